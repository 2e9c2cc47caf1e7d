"""`acp-relay rerun`, the shell: load the script, start the agent under `acp-relay run`, pump lines.

The agent runs as `python -m acp_relay run --db DB --label "rerun of SESSION" -- AGENT...`, so the new run is
an ordinary recorded connection. A thread reads the relay's stdout into a queue, another keeps the tail of
its stderr; the main thread feeds the core and writes its frames. After the last turn (or a timeout) the
agent's stdin is closed and the relay is given a bounded time to exit, then terminated.
"""

from __future__ import annotations

import collections
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..fdio import Stopped, spawn, stopping_on_signals
from ..protocol import errors
from ..protocol.framing import LineFramer
from ..protocol.words import counted
from ..render.text import clean, safe_dumps
from ..store import db, queries, runs
from .core import DONE, REFUSED, TIMEOUT, Options, RerunCore
from .script import EditorScript, RerunError, build_script

# the exit-code table's statuses, by what they mean to rerun
log = logging.getLogger(__name__)
OK, USAGE, TURN_TIMEOUT, AGENT_DIED = errors.OK, errors.USAGE, errors.TIMEOUT, errors.PEER_DIED
SIGNAL_BASE = errors.SIGNAL_BASE
INTERRUPTED = SIGNAL_BASE + signal.SIGINT
EXIT_WAIT = 10.0  # seconds the agent gets to exit once its stdin is closed after the last turn
TERM_WAIT = 3.0  # then after SIGTERM, before SIGKILL
STDERR_TAIL = 20
_EOF = object()


def load_script(db_path: str | os.PathLike[str], session: str) -> tuple[EditorScript, int]:
    """SESSION's editor side (and its connection id), read through store.queries."""
    with queries.reading(db_path, RerunError) as conn:
        view = queries.resolve_view(conn, session)
        assert view.session_id is not None
        messages = ((f.direction, f.ts, msg) for f, msg, _ in queries.iter_messages(conn, view))
        return build_script(messages, view.session_id, view.protocol_version), view.connection_id


@dataclass
class Result:
    source: str  # the recorded session played, as SESSION@CONNECTION
    session: str | None
    connection: int | None
    turns: int
    completed: int
    exit: int
    message: str
    permissions: list[dict[str, Any]] = field(default_factory=list)  # each answer and the rule that matched
    hint: str | None = None  # what to do next, said below the message

    def to_json(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "connection": self.connection,
            "turns": self.turns,
            "completed": self.completed,
            "exit": self.exit,
            "permissions": self.permissions,
        }


class _Agent:
    """The relay process with the agent behind it: lines out of its stdout, the tail of its stderr."""

    def __init__(self, cmd: list[str], cwd: str | None) -> None:
        # A session of its own (fdio.spawn's "session"): our signals are passed on by stop(), and a
        # last-resort kill of its group reaches the agent too.
        self.proc = spawn(cmd, "session", cwd=cwd)
        self.lines: queue.Queue[Any] = queue.Queue()
        self.stderr: collections.deque[bytes] = collections.deque(maxlen=STDERR_TAIL)
        threading.Thread(target=self._read_stdout, daemon=True, name="rerun-stdout").start()
        self._err = threading.Thread(target=self._read_stderr, daemon=True, name="rerun-stderr")
        self._err.start()

    def _read_stdout(self) -> None:
        framer = LineFramer()
        assert self.proc.stdout is not None
        try:
            while chunk := self.proc.stdout.read(1 << 16):
                for line in framer.feed(chunk):
                    self.lines.put(line)
            last = framer.finish()
            if last is not None:
                self.lines.put(last)
        except (OSError, ValueError):
            pass
        finally:
            self.lines.put(_EOF)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        try:
            for line in iter(self.proc.stderr.readline, b""):
                self.stderr.append(line)
        except (OSError, ValueError):
            pass

    def write(self, frames: list[bytes]) -> bool:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(b"".join(f + b"\n" for f in frames))
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def close(self, wait: float) -> int | None:
        """Close stdin, wait up to `wait` s, then terminate; the exit status (None if it would not die)."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except OSError:
            pass
        for stop in (None, self.proc.terminate, self._kill_group):
            if stop is not None:
                stop()
            try:
                code = self.proc.wait(wait if stop is None else TERM_WAIT)
                self._err.join(1.0)
                return code
            except subprocess.TimeoutExpired:
                continue
        return None

    def stop(self, signum: int) -> None:
        """Stopped by a signal: pass it to the relay (it forwards it to the agent, and records the
        connection closed by it), then end its process group if it does not go."""
        try:
            self.proc.send_signal(signum)
        except OSError:
            pass
        try:
            self.proc.wait(TERM_WAIT)
        except subprocess.TimeoutExpired:
            self._kill_group()
            try:
                self.proc.wait(TERM_WAIT)
            except subprocess.TimeoutExpired:
                pass
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except (OSError, BrokenPipeError):
            pass

    def _kill_group(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            self.proc.kill()

    def stderr_tail(self) -> str:
        return b"".join(self.stderr).decode("utf-8", "replace").rstrip("\n")


def _pump(core: RerunCore, agent: _Agent) -> bool:
    """Run the conversation until the core finishes; False when the agent went away first."""
    if not agent.write(core.start(time.monotonic())):
        return False
    while core.outcome is None:
        deadline = core.next_deadline()
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            item = agent.lines.get(timeout=timeout)
        except queue.Empty:
            item = None
        if item is _EOF:
            return False
        now = time.monotonic()
        frames = core.receive(item, now) if item is not None else core.poll(now)
        if frames and not agent.write(frames):
            return False
    return True


def run_rerun(
    db_path: str | os.PathLike[str],
    session: str,
    agent_cmd: list[str],
    *,
    options: Options,
    label: str | None = None,
) -> Result:
    """`acp-relay rerun`: play SESSION's editor side against AGENT, recorded in the same database."""
    try:
        script, source_cid = load_script(db_path, session)
    except RerunError as exc:  # the CLI says it, once, in the house form
        return Result(session, None, None, 0, 0, USAGE, str(exc), hint=exc.hint)
    source = f"{script.session_id}@{source_cid}"
    name = label or f"rerun of {script.session_id}"
    cmd = [sys.executable, "-m", "acp_relay", "run", "--db", str(Path(db_path).resolve()), "--label", name, "--"]
    n = len(script.turns)
    log.info(f"playing the editor of session {source} ({counted(n, 'turn')}, protocol v{script.protocol_version})")
    try:
        agent = _Agent(cmd + as_typed_here(agent_cmd), options.cwd)
    except OSError as exc:
        return Result(source, None, None, n, 0, AGENT_DIED, f"cannot start the relay: {exc}")
    core = RerunCore(script, options, read_file=_read_text, write_file=_write_text)
    # The relay (and the agent behind it) have a session of their own, so a signal meant for us reaches
    # only us: pass it on to them, and exit 128+N, whichever of SIGTERM, SIGINT, SIGHUP it was.
    with stopping_on_signals():
        try:
            return _finish(core, agent, db_path, source, n)
        except (Stopped, KeyboardInterrupt) as exc:
            signum = exc.signum if isinstance(exc, Stopped) else int(signal.SIGINT)
            agent.stop(signum)
            connection = _connection(db_path, agent.proc.pid)
            name = signal.Signals(signum).name
            return Result(
                source,
                core.live_session,
                connection,
                n,
                core.completed,
                SIGNAL_BASE + signum,
                f"stopped by {name}",
                core.permissions,
            )


def _finish(core: RerunCore, agent: _Agent, db_path: str | os.PathLike[str], source: str, n: int) -> Result:
    """Play the conversation, close the relay, and say how it went."""
    finished = _pump(core, agent)
    if finished and core.outcome == DONE:
        code, status = agent.close(EXIT_WAIT), OK
        message = core.message
    elif finished and core.outcome == TIMEOUT:
        code, status = agent.close(1.0), TURN_TIMEOUT
        message = core.message
    else:
        code = agent.close(EXIT_WAIT)
        status = AGENT_DIED
        if core.outcome == REFUSED:
            message = clean(core.message)
        else:
            message = f"the agent exited during {core.phase} (exit status {code})"
        last = agent.stderr_tail().rsplit("\n", 1)[-1]  # one line: a diagnostic is one line (its cause last)
        if last:
            message += f"; its stderr ends with: {clean(last)}"
    connection = _connection(db_path, agent.proc.pid)
    if status == AGENT_DIED and connection is not None and _forget_unstarted(db_path, connection):
        # an agent that never started recorded nothing worth a connection: the baseline stays as it was
        said = clean(last.removeprefix("acp-relay: run: ")) if last else f"exit status {code}"
        return Result(source, None, None, n, 0, status, f"the agent did not start: {said}")
    return Result(source, core.live_session, connection, n, core.completed, status, message, core.permissions)


def _forget_unstarted(db_path: str | os.PathLike[str], cid: int) -> bool:
    """Delete connection `cid` when its agent could not be started (True); else keep it (False)."""
    conn = db.connect(db_path)
    try:
        return runs.forget_unstarted(conn, cid)
    finally:
        conn.close()


def as_typed_here(agent_cmd: list[str]) -> list[str]:
    """A relative program path (`./my-agent`) made absolute from where rerun was started, as the shell the
    user typed it in would find it: the agent itself runs in --cwd, where that path means something else."""
    if agent_cmd and "/" in agent_cmd[0] and not os.path.isabs(agent_cmd[0]):
        return [os.path.abspath(agent_cmd[0]), *agent_cmd[1:]]
    return agent_cmd


def _connection(db_path: str | os.PathLike[str], pid: int) -> int | None:
    try:
        conn = queries.open_db(db_path)
    except queries.UserError:
        return None
    try:
        return runs.connection_of_relay(conn, pid)
    finally:
        conn.close()


def _read_text(path: str) -> str:
    return Path(path).read_text(encoding="utf-8")


def _write_text(path: str, content: str) -> None:
    Path(path).write_text(content, encoding="utf-8")


def summary(result: Result) -> str:
    """The stdout line: what happened, ending with the new session id."""
    where = f" (connection {result.connection})" if result.connection is not None else ""
    what = {OK: "completed", TURN_TIMEOUT: "timed out", AGENT_DIED: "agent failed", INTERRUPTED: "interrupted"}.get(
        result.exit, f"stopped by signal {result.exit - SIGNAL_BASE}" if result.exit > SIGNAL_BASE else "not started"
    )
    session = f"session {clean(str(result.session))}" if result.session is not None else "no session started"
    return (
        f"rerun of {clean(result.source)}: {what}, {result.completed}/{counted(result.turns, 'turn')}{where};"
        f"{_rules(result)} {session}"
    )


def _rules(result: Result) -> str:
    """How the permission requests were answered, by rule: ` permissions: 2 by kind+place, 1 by none;`."""
    counts = collections.Counter(str(p.get("rule")) for p in result.permissions)
    if not counts:
        return ""
    return " permissions: " + ", ".join(f"{n} by {clean(rule)}" for rule, n in counts.items()) + ";"


def print_result(result: Result, out: IO[str], as_json: bool) -> None:
    if as_json:
        out.write(safe_dumps(result.to_json()).decode() + "\n")
    else:
        out.write(summary(result) + "\n")
