"""The WebSocket client end of remote ACP: one text frame per JSON-RPC message, both ways.

trio-websocket (python-trio's own, over wsproto) does the handshake, masking, ping/pong and close; what we
add is the RFD's bits (Acp-Connection-Id from the upgrade response, cookies for the connection) and the
recording of what the transport did. A text frame is valid UTF-8 by the protocol's rules (wsproto checks),
so its str encodes back to exactly the bytes that were on the wire.
"""

from __future__ import annotations

import ssl
import time
from typing import Any

import trio
import trio_websocket as tw

from ..protocol.remote import CONNECTION_ID, recorded_headers
from .base import EXIT_TIMEOUT, RemoteError, Tap, ms_since

CLEAN_CLOSE = {1000, 1001}  # normal closure, going away
MAX_MESSAGE = 256 << 20  # ACP lines carry base64 images and whole files


class WsAgentLink:
    transport = "ws"

    def __init__(
        self,
        url: str,
        headers: list[tuple[str, str]],
        tap: Tap,
        *,
        ssl_context: ssl.SSLContext | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.url, self.headers, self.tap, self.timeout = url, headers, tap, timeout
        self.secret = frozenset(n.lower() for n, _ in headers)  # --header values are never recorded
        self.ssl_context = ssl_context
        self.ws: tw.WebSocketConnection | None = None
        self.connection_id: str | None = None
        self.cookies: dict[str, str] = {}  # the connection's jar: a handshake's Set-Cookie, sent on reconnect

    async def open(self, nursery: Any) -> None:
        extra = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in self.headers]
        if self.cookies:
            extra.append((b"Cookie", "; ".join(f"{k}={v}" for k, v in self.cookies.items()).encode("latin-1")))
        start = time.perf_counter()
        try:
            with trio.fail_after(self.timeout):
                self.ws = await tw.connect_websocket_url(
                    nursery,
                    self.url,
                    self.ssl_context,
                    extra_headers=extra,
                    message_queue_size=256,
                    max_message_size=MAX_MESSAGE,
                    receive_buffer_size=1 << 16,
                )
        except trio.TooSlowError:
            self.tap.event({"event": "ws_open", "side": "agent", "ms": ms_since(start), "error": "timeout"})
            raise RemoteError(f"no WebSocket handshake from {self.url} within {self.timeout:g} s", EXIT_TIMEOUT)
        except tw.ConnectionRejected as exc:
            self.tap.event(
                {
                    "event": "ws_open",
                    "side": "agent",
                    "status": exc.status_code,
                    "ms": ms_since(start),
                    "headers": recorded_headers(exc.headers),
                }
            )
            body = (exc.body or b"")[:200].decode("utf-8", "replace").strip()
            raise RemoteError(f"{self.url} refused the WebSocket upgrade: HTTP {exc.status_code} {body}".rstrip())
        except (tw.HandshakeError, OSError, ssl.SSLError) as exc:
            self.tap.event({"event": "ws_open", "side": "agent", "ms": ms_since(start), "error": str(exc)[:500]})
            raise RemoteError(f"cannot open a WebSocket to {self.url}: {exc or type(exc).__name__}")
        got = self.ws.handshake_headers
        for name, value in got:
            if name.lower() == b"set-cookie":
                first = value.decode("latin-1").split(";", 1)[0]
                key, eq, val = first.partition("=")
                if eq and key.strip():
                    self.cookies[key.strip()] = val.strip()
            elif name.lower() == CONNECTION_ID.lower().encode():
                self.connection_id = value.decode("latin-1")
        self.tap.event(
            {
                "event": "ws_open",
                "side": "agent",
                "method": "GET",
                "status": 101,
                "ms": ms_since(start),
                "connection": self.connection_id,
                "sent": recorded_headers(extra, self.secret),
                "headers": recorded_headers(got),
            }
        )

    async def send(self, line: bytes) -> None:
        assert self.ws is not None
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            # A text frame must be UTF-8; a binary one is ignored by the RFD's servers. Nothing sensible
            # reaches the agent, so nothing is sent: the frame is recorded, and this says why it went no further.
            self.tap.event({"event": "dropped", "side": "agent", "reason": "invalid UTF-8", "bytes": len(line)})
            return
        try:
            await self.ws.send_message(text)
        except tw.ConnectionClosed:
            pass  # receive() sees the close and reports it

    async def receive(self) -> bytes | None:
        assert self.ws is not None
        while True:
            try:
                message = await self.ws.get_message()
            except tw.ConnectionClosed:
                return None
            if isinstance(message, str):
                return message.encode("utf-8")
            self.tap.event({"event": "dropped", "side": "agent", "reason": "binary frame", "bytes": len(message)})

    def ended(self) -> tuple[bool, str]:
        """(a normal close?, how it closed), once receive() has returned None."""
        reason = self.ws.closed if self.ws is not None else None
        code = reason.code if reason is not None else None
        self.tap.event(
            {
                "event": "ws_close",
                "side": "agent",
                "status": code,
                "connection": self.connection_id,
                "reason": (reason.reason if reason is not None else None),
            }
        )
        text = f"code {code}" + (f" {reason.name}" if reason is not None else "")
        if reason is not None and reason.reason:
            text += f": {reason.reason}"
        return code in CLEAN_CLOSE, text

    async def close(self) -> None:
        if self.ws is None:
            return
        with trio.move_on_after(2.0):
            try:
                await self.ws.aclose(1000)
            except (tw.ConnectionClosed, OSError, trio.BrokenResourceError):
                pass
