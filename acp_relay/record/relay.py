"""The shell of `acp-relay run`: start the agent, pump three streams, pass signals, exit as it did.

Each pump is a blocking read/write loop in its own thread, started right after the agent: blocking I/O
works the same on pipes, terminals, sockets, regular files and /dev/null, never flips O_NONBLOCK on a
descriptor shared with the editor, and costs one thread wake-up per chunk. The main thread owns the
signals, the wait for the agent and the bounded drain at exit (Relay.supervise). Bytes are forwarded as
soon as they are read; the recorder (a child process, see child.py) gets a copy through a pipe.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from ..fdio import read_chunk, write_all
from ..protocol.jsonrpc import A2C, C2A, ERR
from ..protocol.redact import Policy
from .pipe import RecorderClient
from .say import speaker

FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
warn = speaker("run")  # every line the stdio relay prints: `acp-relay: run: ...`
DRAIN_AFTER_EXIT = 2.0  # seconds to wait for output still in the pipes once the agent has exited


class Outcome:
    """How the agent ended, as the relay passes it on."""

    def __init__(self, exit_code: int, exit_signal: int | None, closed_by: str) -> None:
        self.exit_code, self.exit_signal, self.closed_by = exit_code, exit_signal, closed_by


def _pdeathsig() -> None:
    """In the child: if the relay dies without cleaning up (SIGKILL), the agent gets SIGTERM."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def spawn(argv: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
        process_group=0,  # signals reach the agent once, through us, not twice from the terminal
        preexec_fn=_pdeathsig if sys.platform.startswith("linux") else None,
    )


class Relay:
    def __init__(
        self, argv: list[str], recorder: RecorderClient, *, stdin_fd: int = 0, stdout_fd: int = 1, stderr_fd: int = 2
    ) -> None:
        self.argv = argv
        self.early_signals: list[int] = []
        self.first_output = threading.Event()  # the agent wrote, or closed both its outputs
        self.recorder = recorder
        self.stdin_fd, self.stdout_fd, self.stderr_fd = stdin_fd, stdout_fd, stderr_fd
        self.closed_by: str | None = None

    # -- pumps (worker threads) -------------------------------------------------------------------------
    def _pump_in(self, proc: subprocess.Popen[bytes]) -> None:
        """Editor -> agent. On EOF close the agent's stdin: that is ACP's shutdown signal."""
        assert proc.stdin is not None
        dst = proc.stdin.fileno()
        alive = True
        try:
            while True:
                try:
                    chunk = read_chunk(self.stdin_fd)
                except OSError:
                    chunk = b""
                if not chunk:
                    break
                self.recorder.put(C2A, chunk, wake=False)  # queued before forwarding: seq is the wire's
                if alive:
                    try:
                        write_all(dst, chunk)
                    except OSError:
                        alive = False  # the agent stopped reading; keep recording what the editor sends
                self.recorder.wake()
            self.closed_by = self.closed_by or "editor_eof"
        finally:
            self.recorder.eof(C2A)
            try:
                proc.stdin.close()
            except OSError:
                pass

    def _pump_out(self, src: int, dst: int, stream: str) -> None:
        """Agent stdout/stderr -> ours. If our side closes, keep draining the agent so it never blocks."""
        alive = True
        try:
            while True:
                try:
                    chunk = read_chunk(src)
                except OSError:
                    break
                if not chunk:
                    break
                self.recorder.put(stream, chunk, wake=False)
                if alive:
                    try:
                        write_all(dst, chunk)
                    except OSError as exc:
                        alive = False
                        if exc.errno not in (errno.EPIPE, errno.EBADF):
                            warn(f"cannot write to the editor: {exc}")
                    self.first_output.set()
                self.recorder.wake()
        finally:
            self.recorder.eof(stream)

    # -- the shell --------------------------------------------------------------------------------------
    def start(self) -> subprocess.Popen[bytes]:
        """Spawn the agent and start the pumps at once, before anything slow is imported: the editor's
        first message is forwarded while the rest of the relay is still loading."""
        proc = spawn(self.argv)
        self.recorder.record_spawn(proc.pid)
        assert proc.stdout is not None and proc.stderr is not None
        self.out_done, self.err_done = threading.Event(), threading.Event()

        def pump(done: threading.Event | None, fn: Callable[..., None], *args: object) -> None:
            try:
                fn(*args)
            finally:
                if done is not None:
                    done.set()
                    if self.out_done.is_set() and self.err_done.is_set():  # (whichever ends last sees both)
                        self.first_output.set()  # no output can come now: nothing to let through first

        for args in (
            (None, self._pump_in, proc),
            (self.out_done, self._pump_out, proc.stdout.fileno(), self.stdout_fd, A2C),
            (self.err_done, self._pump_out, proc.stderr.fileno(), self.stderr_fd, ERR),
        ):
            threading.Thread(target=pump, args=args, daemon=True).start()
        return proc

    def supervise(self, proc: subprocess.Popen[bytes]) -> Outcome:
        """Pass signals on, wait for the agent, then for its last output (bounded), and report.

        Plain handlers on the main thread: a signal interrupts its wait, the handler forwards it, and the
        wait goes on (PEP 475). (trio did this before; importing it cost the relay 12.6 MB of its 80 MB
        flood budget, and CPU the editor's first exchange competed with.)"""
        import time

        for sig in FORWARDED_SIGNALS:
            signal.signal(sig, lambda signum, frame: self._forward(proc, signum))
        for signum in self.early_signals:  # arrived while we were loading
            self._forward(proc, signum)
        returncode = proc.wait()
        self.closed_by = self.closed_by or "agent_exit"
        deadline = time.monotonic() + DRAIN_AFTER_EXIT
        for done in (self.out_done, self.err_done):
            done.wait(max(0.0, deadline - time.monotonic()))  # stdin may stay open forever; the agent is gone
        if returncode < 0:
            return Outcome(128 - returncode, -returncode, self.closed_by)
        return Outcome(returncode, None, self.closed_by)

    def _forward(self, proc: subprocess.Popen[bytes], signum: int) -> None:
        self.closed_by = self.closed_by or f"signal:{signal.Signals(signum).name}"
        try:
            proc.send_signal(signum)
        except ProcessLookupError:
            pass


def start_otlp_follower(db_path: Path, url: str, policy: Policy, after: float) -> subprocess.Popen[bytes] | None:
    """`run --otlp URL`: `acp-relay otel follow` in a process (and session) of its own, which reads what the
    recorder commits and sends each turn as it ends. Nothing here waits for it or for the collector; it
    ends by itself once the connection has ended and its last spans are sent (or noted pending)."""
    args = ["--db", str(db_path), "--relay-pid", str(os.getpid()), "--after", repr(after), "--endpoint", url]
    args += ["--no-redact"] if not policy.enabled else []
    args += [a for p in policy.paths for a in ("--redact", p)] + [
        a for r in policy.regexes for a in ("--redact", "re:" + r)
    ]
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "acp_relay", "otel", "follow", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,  # the editor's Ctrl-C to our group must not cut the last turn's export
        )
    except OSError as exc:
        warn(f"--otlp: cannot start the exporter ({exc}); export later with `acp-relay otel export`")
        return None


def run(
    argv: list[str], db_path: Path, *, label: str | None = None, policy: Policy | None = None, otlp: str | None = None
) -> int:
    """`acp-relay run`: relay until the agent exits; return the exit status to pass on."""
    import time

    started = time.time()
    policy = policy or Policy()
    if not policy.enabled:
        warn(f"--no-redact: credentials sent to the agent are stored as they are in {db_path}")
    early: list[int] = []
    for sig in FORWARDED_SIGNALS:  # until supervise(): remember, forward once the agent exists
        signal.signal(sig, lambda signum, frame: early.append(signum))
    recorder = RecorderClient(db_path, argv=argv, cwd=os.getcwd(), label=label, warn=warn, policy=policy)
    relay = Relay(argv, recorder)
    relay.early_signals = early
    try:
        proc = relay.start()
    except FileNotFoundError as exc:
        warn(f"cannot start {argv[0]!r}: command not found ({exc.strerror})")
        recorder.close(status="spawn_failed", exit_code=127, closed_by="spawn_failed", error=str(exc))
        return 127
    except OSError as exc:
        reason = "not executable" if isinstance(exc, PermissionError) else str(exc)
        warn(f"cannot start {argv[0]!r}: {reason} ({exc.strerror})")
        recorder.close(status="spawn_failed", exit_code=126, closed_by="spawn_failed", error=str(exc))
        return 126
    # Starting the recorder takes a while and holds the GIL. The editor's first exchange (initialize) should
    # not wait behind it: let the agent's first output through first (signals meanwhile are kept for later).
    relay.first_output.wait(0.5)
    recorder.launch()
    if otlp:
        start_otlp_follower(db_path, otlp, policy, started - 1.0)
    outcome = relay.supervise(proc)
    for sig in FORWARDED_SIGNALS:  # the agent is gone: a signal now ends us (the recorder finishes alone)
        signal.signal(sig, signal.SIG_DFL)
    recorder.close(
        status="ended", exit_code=outcome.exit_code, exit_signal=outcome.exit_signal, closed_by=outcome.closed_by
    )
    return outcome.exit_code
