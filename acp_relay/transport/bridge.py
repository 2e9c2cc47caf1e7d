"""A stdio peer on one side, a remote link on the other: `run --connect`'s forwarding loops.

Editor side byte for byte: every line the editor writes goes to the agent as one message (a WebSocket
text frame or a POST body) as it was written; every message of the agent's becomes one line on our stdout
(its bytes as they arrived, a line break inside the JSON turned into a space, see protocol/remote.one_line).
Stdin and stdout stay blocking descriptors, as in the stdio relay (no O_NONBLOCK on descriptors shared
with the editor): trio waits for them to be ready (epoll needs no O_NONBLOCK) and then reads or writes
what cannot block; what epoll cannot watch (a regular file, /dev/null) goes through a worker thread, as
do writes too big to be sure of. Each direction has its own task: an editor that stops reading blocks only
the agent-to-editor direction, whose bounded queue then stops reading the remote.
What is forwarded is recorded after it is forwarded, with the time it was read (on trio, where nothing
runs in between); over ws:// two blocking threads carry the messages instead (see ws.threaded), and
record each before forwarding it, as the stdio relay's pumps do.
"""

from __future__ import annotations

import os
import select
import signal
from typing import Any, cast

import orjson
import trio

from ..fdio import CHUNK, read_chunk, write_all
from ..protocol.framing import LineFramer
from ..protocol.jsonrpc import A2C, C2A
from ..protocol.remote import one_line
from .base import CLOSE_WAIT, AgentLink, RemoteError, Tap, ThreadedLink

QUEUE = 1024  # batches read from the remote and not yet written to the editor
QUEUE_BYTES = 4 << 20  # and their bytes: past this the link is not read (a lagging editor holds the remote back)
DRAIN_AFTER_EOF = 2.0  # seconds the answers to the editor's last requests may take once it closed stdin
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Ending:
    """How a bridged connection ended: the exit status to pass on, why, and a message for the user."""

    def __init__(self, code: int, closed_by: str, message: str | None = None) -> None:
        self.code, self.closed_by, self.message = code, closed_by, message


class _Pending:
    """Requests each side has sent and not had answered: a drop mid-turn names how many were lost."""

    def __init__(self) -> None:
        self.open: dict[str, set[str]] = {C2A: set(), A2C: set()}

    def saw(self, direction: str, line: bytes) -> None:
        if b'"id"' not in line and b"\\u" not in line:  # a notification (a flood's bulk) needs no parse
            return
        try:
            msg = orjson.loads(line)
        except orjson.JSONDecodeError:
            return
        if not isinstance(msg, dict) or "id" not in msg:
            return
        key = repr(msg["id"])
        if "method" in msg:
            self.open[direction].add(key)
        else:
            self.open[C2A if direction == A2C else A2C].discard(key)

    def editor_waits(self) -> int:
        return len(self.open[C2A])


async def bridge(link: AgentLink, tap: Tap, *, stdin_fd: int = 0, stdout_fd: int = 1, signals: Any = None) -> Ending:
    """Relay until the editor closes stdin, the remote closes, or a signal arrives: from `signals` (the
    receiver of the shell that owns the process, run/shell.run_shell), or one opened here."""
    return await _Bridge(link, tap, stdin_fd, stdout_fd, signals).run()


class _Bridge:
    """The four tasks of one bridged connection; the first ending recorded wins."""

    def __init__(self, link: AgentLink, tap: Tap, stdin_fd: int, stdout_fd: int, signals: Any) -> None:
        self.link, self.tap, self.signals = link, tap, signals
        self.io = EditorIO(stdin_fd, stdout_fd)
        self.pending = _Pending()
        self.writing = False  # the queue's writer is writing to the editor
        self.queued = 0  # batches sent to the queue and not yet written
        self.queued_bytes = 0  # their payloads' bytes
        self.room = trio.Event()  # set by the writer each time it has written a batch
        self.alive = True  # the editor still reads our stdout
        self.endings: list[Ending] = []
        # Batches of messages as the link read them, with the time they were read.
        self.send_out, self.recv_out = trio.open_memory_channel[tuple[list[bytes], float, float]](QUEUE)

    async def run(self) -> Ending:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._guarded, self._start, nursery)
        except Exception as exc:
            # A library failing on bytes no protocol allows (h11 on a garbage handshake, httpx's internals):
            # the connection is over, and the user gets one line, not a traceback.
            leaf = _first_leaf(exc)
            self.endings.insert(
                0, Ending(4, "agent_error", f"the remote connection failed: {type(leaf).__name__}: {leaf}")
            )
        return self.endings[0] if self.endings else Ending(4, "agent_exit", "the remote connection ended")

    async def _guarded(self, task: Any, nursery: Any) -> None:
        """A remote failure in any task ends the connection with its message (not an exception group)."""
        try:
            await task(nursery)
        except RemoteError as exc:
            self.endings.insert(0, Ending(exc.code, "agent_error", str(exc)))
            with trio.CancelScope(shield=True):
                await self.link.close()
            nursery.cancel_scope.cancel()

    async def _start(self, nursery: Any) -> None:
        await self.link.open(nursery)
        tasks: tuple[Any, ...] = (self._editor_to_agent, self._agent_to_queue, self._queue_to_editor)
        threaded = getattr(self.link, "threaded", None)
        if threaded is not None and threaded():
            tasks = (self._editor_to_agent_threaded, self._agent_to_editor_threaded)
        for task in (*tasks, self._signals):
            nursery.start_soon(self._guarded, task, nursery)

    def _from_editor(self, framer: LineFramer, chunk: bytes) -> list[bytes]:
        """Record a chunk the editor wrote (b"": its end of file); the messages in it, to send."""
        tap = self.tap
        # Recorded before it is sent, unlike the stdio relay's pumps: a send here can take a round trip
        # (an HTTP POST), in which the answer may arrive and be recorded; the recorder numbers frames in
        # the order it is handed them, so the request goes first. (A queue append: the wire waits on
        # nothing.)
        if chunk:
            tap.put(C2A, chunk, *tap.stamp())
            lines = framer.feed(chunk)
        else:
            tap.eof(C2A)
            last = framer.finish()
            lines = [last] if last else []
        out = []
        for line in lines:
            if line.strip():  # a blank line is recorded, but no message carries it
                self.pending.saw(C2A, line)
                out.append(bytes(line))
        return out

    async def _editor_to_agent(self, nursery: Any) -> None:
        framer = LineFramer()
        while True:
            chunk = await self.io.read()
            for line in self._from_editor(framer, chunk):
                await self.link.send(line)
            if not chunk:
                break
        await self._editor_closed(nursery)

    async def _editor_to_agent_threaded(self, nursery: Any) -> None:
        link = cast(ThreadedLink, self.link)
        framer = LineFramer()

        def pump() -> None:  # blocking reads, as the stdio relay's pumps: no event loop pass per message
            while True:
                chunk = _read(self.io.stdin_fd)
                messages = self._from_editor(framer, chunk)
                if messages:
                    link.send_blocking(messages)
                if not chunk:
                    return

        await trio.to_thread.run_sync(pump, abandon_on_cancel=True)
        await self._editor_closed(nursery)

    async def _editor_closed(self, nursery: Any) -> None:
        with trio.move_on_after(DRAIN_AFTER_EOF):  # as the stdio relay drains an agent that has exited
            while self.pending.editor_waits():
                await trio.sleep(0.01)
        self.endings.append(Ending(0, "editor_eof"))
        await self.link.close()
        # What the agent sent before it saw our close is still on its way to the editor: the writer ends
        # the connection once it has written the last of it (bounded: the editor has gone, and its SDK
        # gives us about 2 s to exit in all).
        await trio.sleep(CLOSE_WAIT)
        nursery.cancel_scope.cancel()

    async def _agent_to_editor_threaded(self, nursery: Any) -> None:
        """The remote's messages written to the editor from the link's reading thread, blocking (an editor
        that stops reading stops the reads from the remote)."""
        link = cast(ThreadedLink, self.link)

        def write(payloads: list[bytes]) -> None:
            chunk = b"".join(one_line(p) + b"\n" for p in payloads)
            # Recorded before it is written, as the stdio relay's pumps do: the editor's answer to it,
            # read by the other thread, cannot then be numbered before it.
            self._recorded(payloads, chunk, *self.tap.stamp())
            if self.alive:
                try:
                    write_all(self.io.stdout_fd, chunk)
                except OSError:
                    self.alive = False  # the editor is gone; keep recording what the agent sends

        await link.receive_in_thread(write)
        self._agent_ended()
        self.tap.eof(A2C)
        nursery.cancel_scope.cancel()

    async def _agent_to_queue(self, nursery: Any) -> None:
        while (payloads := await self.link.receive()) is not None:
            stamp = self.tap.stamp()
            if not self.queued and not self.writing and self.alive:
                # Nothing queued ahead: a write that cannot block goes out from here, a task switch
                # sooner (most of a round trip's cost); the rest waits its turn in the queue.
                chunk = b"".join(one_line(p) + b"\n" for p in payloads)
                try:
                    n = self.io.write_now(chunk)
                except OSError:
                    self.alive, n = False, 0
                if n == len(chunk):
                    self._recorded(payloads, chunk, *stamp)
                    continue
                if n:  # a socket took part of it: the rest, in order, before anything else
                    self.writing = True
                    try:
                        await self.io.write(chunk[n:])
                    except OSError:
                        self.alive = False
                    finally:
                        self.writing = False
                    self._recorded(payloads, chunk, *stamp)
                    continue
            while self.queued_bytes > QUEUE_BYTES:
                self.room = trio.Event()
                await self.room.wait()
            self.queued += 1  # counted here, not by the channel: a batch handed to a waiting writer is not buffered
            self.queued_bytes += sum(map(len, payloads))
            await self.send_out.send((payloads, *stamp))
        if self.link.failure is not None:
            # A send failed and the link ended itself, having answered the editor's request: this ending wins
            # (over the editor's EOF too), recorded before the writer, once it has drained, cancels us.
            self.send_out.close()
            self.endings.insert(0, Ending(self.link.end_code, "agent_error", self.link.failure + self._lost()))
            return
        await self.send_out.aclose()
        self._agent_ended()

    def _agent_ended(self) -> None:
        """Once the link has said it is over: the ending it makes, unless another came first."""
        clean, how = self.link.ended()
        if self.endings:
            return
        if clean and not self.pending.editor_waits():
            self.endings.append(Ending(0, "agent_exit"))
        else:
            self.endings.append(Ending(4, "agent_exit", f"the remote agent ended the connection ({how}){self._lost()}"))

    def _lost(self) -> str:
        waiting = self.pending.editor_waits()
        return f" with {waiting} request{'s' if waiting != 1 else ''} unanswered" if waiting else ""

    async def _queue_to_editor(self, nursery: Any) -> None:
        """Write what arrived to the editor, a batch (everything queued) per write, then record it: one
        chunk per batch, as the stdio relay records a chunk per read."""
        recv_out = self.recv_out
        async with recv_out:
            async for payloads, ts, mono in recv_out:
                batch, stamps = [payloads], [(ts, mono)]
                while len(batch) < 64:
                    try:
                        p, t, m = recv_out.receive_nowait()
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                    batch.append(p)
                    stamps.append((t, m))
                chunks = [b"".join(one_line(p) + b"\n" for p in ps) for ps in batch]
                if self.alive:
                    self.writing = True
                    try:
                        await self.io.write(b"".join(chunks))
                    except OSError:
                        self.alive = False  # the editor is gone; keep recording what the agent sends
                    finally:
                        self.writing = False
                for ps, chunk, (t, m) in zip(batch, chunks, stamps, strict=True):
                    self._recorded(ps, chunk, t, m)
                self.queued -= len(batch)
                self.queued_bytes -= sum(len(p) for ps in batch for p in ps)
                self.room.set()
        self.tap.eof(A2C)
        nursery.cancel_scope.cancel()

    def _recorded(self, payloads: list[bytes], chunk: bytes, ts: float, mono: float) -> None:
        """Note the answers (for a drop's message) and record the chunk."""
        for one in payloads:
            self.pending.saw(A2C, one)
        self.tap.put(A2C, chunk, ts, mono)

    async def _signals(self, nursery: Any) -> None:
        if self.signals is None:
            with trio.open_signal_receiver(*SIGNALS) as received:
                await self._on_signal(received, nursery)
        else:
            await self._on_signal(self.signals, nursery)

    async def _on_signal(self, received: Any, nursery: Any) -> None:
        """The first signal ends the connection with 128+N (the remote is told goodbye first)."""
        async for signum in received:
            self.endings.insert(0, Ending(128 + signum, f"signal:{signal.Signals(signum).name}"))
            with trio.CancelScope(shield=True):
                await self.link.close()
            nursery.cancel_scope.cancel()
            return


def _first_leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


PIPE_ROOM = 4096  # a pipe that polls writable has at least a page free: a write this size cannot block


class EditorIO:
    """Reads and writes on the editor's blocking descriptors without blocking trio (see the module's
    docstring). A thread hop costs tens of microseconds a message on a busy machine; readiness costs none."""

    def __init__(self, stdin_fd: int, stdout_fd: int) -> None:
        self.stdin_fd, self.stdout_fd = stdin_fd, stdout_fd
        self.poll_in = self.poll_out = True

    async def read(self) -> bytes:
        if self.poll_in:
            try:
                await trio.lowlevel.wait_readable(self.stdin_fd)
            except OSError:  # not pollable (a regular file, /dev/null): threads from now on
                self.poll_in = False
            else:
                return _read(self.stdin_fd, CHUNK)
        return await trio.to_thread.run_sync(_read, self.stdin_fd, abandon_on_cancel=True)

    def write_now(self, data: bytes) -> int:
        """Write what cannot block, now: a small write to a descriptor with room. Returns the bytes written
        (0: not now). OSError once the editor is gone."""
        if len(data) > PIPE_ROOM:
            return 0
        try:
            if not select.select([], [self.stdout_fd], [], 0)[1]:
                return 0
        except (OSError, ValueError):
            return 0
        return os.write(self.stdout_fd, data)

    async def write(self, data: bytes) -> None:
        """Every byte, or OSError once the editor is gone."""
        while data and len(data) <= PIPE_ROOM:
            n = self.write_now(data)
            data = data[n:]
            if not data or not self.poll_out:
                break
            try:
                await trio.lowlevel.wait_writable(self.stdout_fd)
            except OSError:
                self.poll_out = False
        if data:
            await trio.to_thread.run_sync(write_all, self.stdout_fd, data)


def _read(fd: int, size: int = CHUNK) -> bytes:
    try:
        return read_chunk(fd, size)
    except OSError:
        return b""
