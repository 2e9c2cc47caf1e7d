"""A local stdio agent behind a remote endpoint (`serve`): one process per ACP connection, recorded.

The agent's side is the stdio relay's, byte for byte: what a client sends becomes one line on the agent's
stdin, and its stdout is recorded in the chunks it was read, then split into lines, each of which goes
to the client as one message. Its stderr passes through to ours and is recorded. The pipes are our own
(nothing shared with an editor), so trio reads them directly.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import trio

from ..fdio import spawn, write_all
from ..protocol.framing import LineFramer
from ..protocol.jsonrpc import A2C, C2A, ERR
from ..protocol.remote import one_line
from .base import Tap

STOP_AFTER_EOF = 2.0  # seconds an agent has to exit once its stdin is closed, then SIGTERM, then SIGKILL


class StdioAgent:
    """One agent process: `send` a line to it, `lines` iterates what it writes, `close` ends it."""

    def __init__(self, argv: list[str], tap: Tap) -> None:
        self.argv, self.tap = argv, tap
        self.proc: subprocess.Popen[bytes] | None = None
        self.stdin: trio.lowlevel.FdStream | None = None
        self.stdout: trio.lowlevel.FdStream | None = None
        self.stderr: trio.lowlevel.FdStream | None = None
        self.send_lines, self.lines = trio.open_memory_channel[bytes](256)
        self.returncode: int | None = None
        self.closed = False

    async def start(self, nursery: trio.Nursery) -> None:
        """Start the process and its readers (OSError if it cannot be started)."""
        # A session of its own (fdio.spawn's "session"): our Ctrl-C is for us; close() ends the agent.
        # Our own pipes (nothing shared with an editor), so trio reads and writes them directly.
        self.proc = await trio.to_thread.run_sync(spawn, self.argv, "session")
        self.stdin, self.stdout, self.stderr = (_stream(self.proc, name) for name in ("stdin", "stdout", "stderr"))
        nursery.start_soon(self._read_stdout)
        nursery.start_soon(self._read_stderr)

    async def send(self, line: bytes) -> bool:
        """One message to the agent, as one line; False once the agent no longer reads."""
        assert self.stdin is not None
        data = one_line(line) + b"\n"
        # Recorded before the write: send_all yields to trio, and the agent's answer may be read (and
        # recorded) before it returns; the recorder numbers frames in the order it is handed them.
        self.tap.put(C2A, data, *self.tap.stamp())
        try:
            await self.stdin.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        return True

    async def _read_stdout(self) -> None:
        assert self.stdout is not None
        framer = LineFramer()
        try:
            while chunk := bytes(await self.stdout.receive_some(1 << 16)):
                stamp = self.tap.stamp()
                for line in framer.feed(chunk):
                    if line.strip():
                        await self.send_lines.send(bytes(line))
                self.tap.put(A2C, chunk, *stamp)
            last = framer.finish()
            if last and last.strip():
                await self.send_lines.send(bytes(last))
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass
        finally:
            self.tap.eof(A2C)
            await self.send_lines.aclose()

    async def _read_stderr(self) -> None:
        assert self.stderr is not None
        try:
            while chunk := bytes(await self.stderr.receive_some(1 << 16)):
                stamp = self.tap.stamp()
                try:
                    write_all(sys.stderr.fileno(), chunk)
                except OSError:
                    pass
                self.tap.put(ERR, chunk, *stamp)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass
        finally:
            self.tap.eof(ERR)

    async def close(self) -> int:
        """Close the agent's stdin (ACP's shutdown), give it STOP_AFTER_EOF to exit, then end it. Returns the
        exit status as `run` reports it (128+N for signal N)."""
        if self.proc is None:
            return 127
        if not self.closed:
            self.closed = True
            self.tap.eof(C2A)
            if self.stdin is not None:
                with trio.CancelScope(shield=True):
                    try:
                        await self.stdin.aclose()
                    except (trio.BrokenResourceError, OSError):
                        pass
        with trio.CancelScope(shield=True):
            for sig in (None, signal.SIGTERM, signal.SIGKILL):
                if sig is not None:
                    try:
                        os.killpg(self.proc.pid, sig)
                    except (ProcessLookupError, PermissionError):
                        pass
                with trio.move_on_after(STOP_AFTER_EOF):
                    await trio.to_thread.run_sync(self.proc.wait, abandon_on_cancel=True)
                    break
        code = self.proc.returncode if self.proc.returncode is not None else -9
        self.returncode = 128 - code if code < 0 else code
        return self.returncode

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None


def _stream(proc: subprocess.Popen[bytes], name: str) -> trio.lowlevel.FdStream:
    """The pipe to or from the agent as a trio stream (which owns, and makes non-blocking, a copy of the
    descriptor: the pipe is ours alone); the Popen's own file object is closed."""
    f = getattr(proc, name)
    stream = trio.lowlevel.FdStream(os.dup(f.fileno()))
    f.close()
    setattr(proc, name, None)
    return stream


def describe(argv: list[str], exc: OSError) -> tuple[str, int]:
    """Why an agent could not start, and the exit status `run` would give (127 not found, 126 not runnable)."""
    if isinstance(exc, FileNotFoundError):
        return f"cannot start {argv[0]!r}: command not found", 127
    return f"cannot start {argv[0]!r}: {exc.strerror or exc}", 126
