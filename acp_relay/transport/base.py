"""What every remote link shares: the tap it records through, its errors, and the time it keeps."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

EXIT_TIMEOUT = 3  # the exit-code table: 3 a timeout, 4 the peer died or refused
EXIT_PEER = 4
# Seconds our goodbye (a WebSocket close frame, an HTTP DELETE) waits for the remote's answer once the editor
# has gone: the editor's SDK gives us about 2 s to exit in all, and nothing is owed to anyone any more.
CLOSE_WAIT = 0.5


class Tap(Protocol):
    """Where a transport's reads go: record/pipe.py's RecorderClient has this surface."""

    def stamp(self) -> tuple[float, float]: ...

    def put(self, stream: str, chunk: bytes, ts: float | None = None, mono: float | None = None) -> None: ...

    def eof(self, stream: str) -> None: ...

    def event(self, fields: dict[str, Any]) -> None: ...


class RemoteError(Exception):
    """The remote end failed in a way that ends the connection: one line for the user and an exit code."""

    def __init__(self, message: str, code: int = EXIT_PEER) -> None:
        super().__init__(message)
        self.code = code


class AgentLink(Protocol):
    """The client end of one ACP connection to a remote agent (WebSocket or Streamable HTTP)."""

    transport: str
    failure: str | None  # why a send ended the link (it answered the editor's request first), or None
    end_code: int  # the exit status then: EXIT_PEER, or EXIT_TIMEOUT for a send that timed out

    async def open(self, nursery: Any) -> None: ...

    async def send(self, line: bytes) -> None: ...

    async def receive(self) -> list[bytes] | None:
        """The agent's messages that have arrived (one or more, in order), or None at the end."""
        ...

    async def close(self) -> None: ...

    def ended(self) -> tuple[bool, str]: ...


class ThreadedLink(AgentLink, Protocol):
    """A link whose open connection worker threads can carry with blocking calls (`threaded()` says
    whether this one can; then the bridge sends and receives only through these two)."""

    def threaded(self) -> bool: ...

    def send_blocking(self, lines: list[bytes]) -> None: ...

    async def receive_in_thread(self, take: Callable[[list[bytes]], None]) -> None: ...


def ms_since(start: float) -> float:
    """Milliseconds since a time.perf_counter() reading, rounded for the recording."""
    return round((time.perf_counter() - start) * 1000, 3)


def why(exc: BaseException) -> str:
    """A failure's most telling text: trio wraps an SSL or socket error in a BrokenResourceError with no
    message of its own, so the cause's is used when the outer one says nothing."""
    seen: BaseException | None = exc
    while seen is not None:
        if str(seen):
            return f"{seen}" if seen is exc else f"{type(seen).__name__}: {seen}"
        seen = seen.__cause__ or seen.__context__
    return type(exc).__name__


class NullTap:
    """A tap that keeps nothing: for listeners that do not record (`replay --listen`)."""

    def stamp(self) -> tuple[float, float]:
        return 0.0, 0.0

    def put(self, stream: str, chunk: bytes, ts: float | None = None, mono: float | None = None) -> None:
        """Nothing is kept."""

    def eof(self, stream: str) -> None:
        """Nothing is kept."""

    def event(self, fields: dict[str, Any]) -> None:
        """Nothing is kept."""
