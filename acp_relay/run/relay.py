"""The trio shell of `acp-relay run`: start the agent, pump three streams, pass signals, exit as it did.

The split, measured (tools/bench_shell.py against main): the agent's spawn and its three pumps (blocking
read/write loops in threads, see Relay.start) start before trio is imported, so the editor's first
exchange waits for neither trio's import nor the recorder's start. Then trio owns the process (run/shell.py,
shared with `run --connect`, run/connect.py): the signals, the wait for the agent, the bounded drain of
its last output, the end of the pumps and the recorder's lifetime, one cancellation story. Bytes are
forwarded as soon as they are read; the recorder (a child process, see child.py) gets a copy through a pipe.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from ..fdio import read_chunk, spawn, write_all
from ..protocol.jsonrpc import A2C, C2A, ERR
from ..protocol.redact import Policy
from ..record.pipe import RecorderClient
from .shell import FORWARDED_SIGNALS, Final, run_shell, trio_core

log = logging.getLogger(__name__)
DRAIN_AFTER_EXIT = 2.0  # seconds to wait for output still in the pipes once the agent has exited
FIRST_OUTPUT_WAIT = 0.5  # the most the recorder's start waits for the agent's first output


class Relay:
    def __init__(
        self, argv: list[str], recorder: RecorderClient, *, stdin_fd: int = 0, stdout_fd: int = 1, stderr_fd: int = 2
    ) -> None:
        self.argv = argv
        self.early_signals: list[int] = []
        self.first_output = threading.Event()  # the agent wrote, or closed both its outputs
        self.out_done, self.err_done = threading.Event(), threading.Event()
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
                            log.warning(f"cannot write to the editor: {exc}")
                    self.first_output.set()
                self.recorder.wake()
        finally:
            self.recorder.eof(stream)

    def _pump(self, done: threading.Event | None, fn: Callable[..., None], *args: object) -> None:
        try:
            fn(*args)
        finally:
            if done is not None:
                done.set()
                if self.out_done.is_set() and self.err_done.is_set():  # (whichever ends last sees both)
                    self.first_output.set()  # no output can come now: nothing to let through first

    # -- the shell --------------------------------------------------------------------------------------
    def start(self) -> subprocess.Popen[bytes]:
        """Spawn the agent and start the pumps at once, before trio is imported (see run()): its own process
        group, signals forwarded by us, and SIGTERM if we die without cleaning up (fdio.spawn's "forwarded"
        policy). OSError if it cannot be started.

        Why the pumps are threads and not trio streams: blocking I/O works the same on pipes, terminals,
        sockets, regular files and /dev/null, never flips O_NONBLOCK on a descriptor shared with the editor
        (trio's FdStream would, under the editor's feet), and costs one thread wake-up per chunk where a
        trio stream adds a trip through the event loop. trio owns them from supervise() on: it waits for
        the output pumps (bounded), and the stdin pump, blocked on an editor that may never close, ends
        with the process."""
        proc = spawn(self.argv, "forwarded", pdeathsig=True)
        self.recorder.record_spawn(proc.pid)
        assert proc.stdout is not None and proc.stderr is not None
        for args in (
            (None, self._pump_in, proc),
            (self.out_done, self._pump_out, proc.stdout.fileno(), self.stdout_fd, A2C),
            (self.err_done, self._pump_out, proc.stderr.fileno(), self.stderr_fd, ERR),
        ):
            threading.Thread(target=self._pump, args=args, daemon=True).start()
        return proc

    async def supervise(self, proc: subprocess.Popen[bytes], signals: Any) -> Final:
        """In trio (run_shell): forward signals, wait for the agent, then for its last output (bounded)."""
        trio = trio_core()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._forward_signals, proc, signals)
            for early in self.early_signals:  # arrived before trio was there to receive them
                self._forward(proc, early)
            returncode: int = await trio.to_thread(proc.wait, abandon_on_cancel=True)
            self.closed_by = self.closed_by or "agent_exit"
            with trio.move_on_after(DRAIN_AFTER_EXIT):
                for done in (self.out_done, self.err_done):
                    await trio.to_thread(done.wait, abandon_on_cancel=True)
            nursery.cancel_scope.cancel()  # stop forwarding: the agent is gone
        signum = -returncode if returncode < 0 else None
        code = 128 + signum if signum is not None else returncode
        return code, {"status": "ended", "exit_code": code, "exit_signal": signum, "closed_by": self.closed_by}

    def spawn_failed(self, exc: OSError) -> Final:
        if isinstance(exc, FileNotFoundError):
            reason, code = "command not found", 127
        else:
            reason, code = "not executable" if isinstance(exc, PermissionError) else str(exc), 126
        log.warning(f"cannot start {self.argv[0]!r}: {reason} ({exc.strerror})")
        return code, {"status": "spawn_failed", "exit_code": code, "closed_by": "spawn_failed", "error": str(exc)}

    async def _forward_signals(self, proc: subprocess.Popen[bytes], signals: Any) -> None:
        async for signum in signals:
            self._forward(proc, signum)

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
        log.warning(f"--otlp: cannot start the exporter ({exc}); export later with `acp-relay otel export`")
        return None


def run(
    argv: list[str], db_path: Path, *, label: str | None = None, policy: Policy | None = None, otlp: str | None = None
) -> int:
    """`acp-relay run`: relay until the agent exits; return the exit status to pass on."""
    import time

    started = time.time()
    policy = policy or Policy()
    if not policy.enabled:
        log.warning(f"--no-redact: credentials sent to the agent are stored as they are in {db_path}")
    early: list[int] = []
    for sig in FORWARDED_SIGNALS:  # until trio receives them: remember, forward once the agent exists
        signal.signal(sig, lambda signum, frame: early.append(signum))
    recorder = RecorderClient(db_path, argv=argv, cwd=os.getcwd(), label=label, policy=policy)
    relay = Relay(argv, recorder)
    relay.early_signals = early
    try:
        proc = relay.start()
    except OSError as exc:
        failed = relay.spawn_failed(exc)
        return run_shell(recorder, lambda signals: _now(failed))
    # The agent's start and the editor's first exchange wait for nothing: the recorder's start and trio's
    # import (about 40 ms of CPU that holds the GIL, more on a busy machine) come after the agent's first
    # output (bounded), and overlap each other (the recorder is a process of its own). Importing trio while
    # the agent starts up instead made the first answer 1.49x slower (tools/bench_shell.py, same run).
    relay.first_output.wait(FIRST_OUTPUT_WAIT)
    recorder.launch()
    if otlp:
        start_otlp_follower(db_path, otlp, policy, started - 1.0)
    return run_shell(recorder, partial(relay.supervise, proc))


async def _now(final: Final) -> Final:
    return final
