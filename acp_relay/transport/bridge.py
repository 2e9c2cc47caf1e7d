"""A stdio peer on one side, a remote link on the other: `run --connect`'s forwarding loops.

Editor side byte for byte: every line the editor writes goes to the agent as one message (a WebSocket
text frame or a POST body) as it was written; every message of the agent's becomes one line on our stdout
(its bytes as they arrived, a line break inside the JSON turned into a space, see protocol/remote.one_line).
Reading stdin and writing stdout are blocking calls in worker threads, as in the stdio relay (no
O_NONBLOCK on descriptors shared with the editor), and each direction has its own task: an editor that
stops reading blocks only the agent-to-editor direction, whose bounded queue then stops reading the remote.
What is forwarded is recorded after it is forwarded, with the time it was read.
"""

from __future__ import annotations

import signal
from typing import Any

import orjson
import trio

from ..fdio import read_chunk, write_all
from ..protocol.framing import LineFramer
from ..protocol.jsonrpc import A2C, C2A
from ..protocol.remote import one_line
from .base import AgentLink, RemoteError, Tap

QUEUE = 1024  # messages read from the remote and not yet written to the editor
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


async def bridge(link: AgentLink, tap: Tap, *, stdin_fd: int = 0, stdout_fd: int = 1) -> Ending:
    """Relay until the editor closes stdin, the remote closes, or a signal arrives."""
    return await _Bridge(link, tap, stdin_fd, stdout_fd).run()


class _Bridge:
    """The four tasks of one bridged connection; the first ending recorded wins."""

    def __init__(self, link: AgentLink, tap: Tap, stdin_fd: int, stdout_fd: int) -> None:
        self.link, self.tap, self.stdin_fd, self.stdout_fd = link, tap, stdin_fd, stdout_fd
        self.pending = _Pending()
        self.endings: list[Ending] = []
        self.send_out, self.recv_out = trio.open_memory_channel[tuple[bytes, float, float]](QUEUE)

    async def run(self) -> Ending:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._guarded, self._start, nursery)
        except Exception as exc:
            # A library's background task (trio-websocket's reader, say) failing on bytes no protocol allows:
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
        for task in (self._editor_to_agent, self._agent_to_queue, self._queue_to_editor, self._signals):
            nursery.start_soon(self._guarded, task, nursery)

    async def _editor_to_agent(self, nursery: Any) -> None:
        framer = LineFramer()
        tap, link = self.tap, self.link
        while True:
            chunk = await trio.to_thread.run_sync(_read, self.stdin_fd, abandon_on_cancel=True)
            stamp = tap.stamp()
            lines = framer.feed(chunk) if chunk else []
            if not chunk:
                last = framer.finish()
                lines = [last] if last else []
            for line in lines:
                if line.strip():  # a blank line is recorded, but no message carries it
                    self.pending.saw(C2A, line)
                    await link.send(bytes(line))
            if not chunk:
                tap.eof(C2A)
                break
            tap.put(C2A, chunk, *stamp)
        with trio.move_on_after(DRAIN_AFTER_EOF):  # as the stdio relay drains an agent that has exited
            while self.pending.editor_waits():
                await trio.sleep(0.01)
        self.endings.append(Ending(0, "editor_eof"))
        await link.close()
        nursery.cancel_scope.cancel()

    async def _agent_to_queue(self, nursery: Any) -> None:
        while (payload := await self.link.receive()) is not None:
            await self.send_out.send((payload, *self.tap.stamp()))
        await self.send_out.aclose()
        clean, how = self.link.ended()
        waiting = self.pending.editor_waits()
        if self.endings:
            return
        if clean and not waiting:
            self.endings.append(Ending(0, "agent_exit"))
        else:
            lost = f" with {waiting} request{'s' if waiting != 1 else ''} unanswered" if waiting else ""
            self.endings.append(Ending(4, "agent_exit", f"the remote agent ended the connection ({how}){lost}"))

    async def _queue_to_editor(self, nursery: Any) -> None:
        alive = True
        recv_out = self.recv_out
        async with recv_out:
            async for payload, ts, mono in recv_out:
                batch = [(one_line(payload) + b"\n", ts, mono)]
                while len(batch) < 256:  # whatever else has arrived goes in the same write
                    try:
                        p, t, m = recv_out.receive_nowait()
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                    batch.append((one_line(p) + b"\n", t, m))
                if alive:
                    try:
                        await trio.to_thread.run_sync(write_all, self.stdout_fd, b"".join(b[0] for b in batch))
                    except OSError:
                        alive = False  # the editor is gone; keep recording what the agent sends
                for line, t, m in batch:
                    self.pending.saw(A2C, line[:-1])
                    self.tap.put(A2C, line, t, m)
        self.tap.eof(A2C)
        nursery.cancel_scope.cancel()

    async def _signals(self, nursery: Any) -> None:
        with trio.open_signal_receiver(*SIGNALS) as received:
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


def _read(fd: int) -> bytes:
    try:
        return read_chunk(fd)
    except OSError:
        return b""
