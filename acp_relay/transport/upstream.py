"""A remote agent as the far side of a listener (`proxy`): each client connection gets its own upstream
connection, and both directions' messages are recorded as frames, one line each."""

from __future__ import annotations

import ssl
from typing import Any

import trio

from ..protocol.jsonrpc import A2C, C2A
from ..protocol.remote import one_line, transport_of
from .base import EXIT_PEER, AgentLink, RemoteError, Tap


def client_tls(insecure: bool) -> ssl.SSLContext:
    """Certificates and host names verified, unless --insecure (which the caller says out loud)."""
    context = ssl.create_default_context()
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def link_to(url: str, headers: list[tuple[str, str]], tap: Any, *, insecure: bool, timeout: float) -> AgentLink:
    """The client link for a ws://, wss://, http:// or https:// URL (run --connect and proxy's upstream)."""
    tls = client_tls(insecure) if url.lower().startswith(("https:", "wss:")) else None
    if transport_of(url) == "ws":
        from .ws import WsAgentLink

        return WsAgentLink(url, headers, tap, ssl_context=tls, timeout=timeout)
    from .http import HttpAgentLink

    return HttpAgentLink(url, headers, tap, verify=tls if tls is not None else True, timeout=timeout)


class RemoteBackend:
    """transport/server.py's Backend over an AgentLink (WebSocket or Streamable HTTP client)."""

    def __init__(self, link: AgentLink, tap: Tap) -> None:
        self.link, self.tap = link, tap
        self.send_lines, self.lines = trio.open_memory_channel[bytes](256)
        self.failed: str | None = None

    async def start(self, nursery: trio.Nursery) -> None:
        """Connect upstream (OSError with the reason when that fails) and start reading it."""
        try:
            await self.link.open(nursery)
        except RemoteError as exc:
            raise OSError(str(exc)) from None
        nursery.start_soon(self._read)

    async def _read(self) -> None:
        try:
            while (payloads := await self.link.receive()) is not None:
                stamp = self.tap.stamp()
                lines = [one_line(p) for p in payloads]
                for line in lines:
                    await self.send_lines.send(line)
                self.tap.put(A2C, b"".join(line + b"\n" for line in lines), *stamp)
            clean, how = self.link.ended()
            if not clean:
                self.failed = how
        except RemoteError as exc:
            self.failed = str(exc)
        finally:
            self.tap.eof(A2C)
            await self.send_lines.aclose()

    async def send(self, line: bytes) -> bool:
        data = one_line(line)
        self.tap.put(C2A, data + b"\n", *self.tap.stamp())  # before the send: see transport/bridge.py
        try:
            await self.link.send(data)
        except RemoteError as exc:
            self.failed = str(exc)
            return False
        return True

    async def close(self) -> int:
        self.tap.eof(C2A)
        with trio.CancelScope(shield=True):
            await self.link.close()
        return EXIT_PEER if self.failed else 0
