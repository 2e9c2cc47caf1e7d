"""The WebSocket client end of remote ACP: one text frame per JSON-RPC message, both ways.

The opening handshake is HTTP/1.1, done with h11 (python-hyper's, which httpx also uses): it checks the
101 answer and hands back whatever bytes followed it, where our own headers, cookies and refusals are
recorded. The frames are the websockets library's sans-I/O protocol (websockets.protocol.Protocol, the
frame layer of its ClientProtocol, opened once h11 has seen the 101): it checks what RFC 6455 requires,
answers pings and the close, and fails the connection with the right code (1002, 1007, 1009). Measured
(tools/bench.py --case ws): it parses a 200 B flood at about twice the 50,000 frames/s floor, where
wsproto stays below it. One task reads: it hands data messages out in order; sends (ours, pongs, closes)
share a lock, as trio lets one task at a time write a stream. A text message must be valid UTF-8 (checked
here: the library leaves that to its own I/O layers), so its bytes are passed on exactly as they arrived.
"""

from __future__ import annotations

import collections
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import h11
import trio
from websockets.exceptions import InvalidState
from websockets.frames import Frame, Opcode
from websockets.protocol import Protocol, Side
from websockets.utils import accept_key, generate_key

from ..protocol.remote import CONNECTION_ID, Outgoing, recorded_headers, relay_answer
from .base import CLOSE_WAIT, EXIT_PEER, EXIT_TIMEOUT, RemoteError, Tap, ms_since, why

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
        self.stream: trio.abc.Stream | None = None
        self.connection_id: str | None = None
        self.cookies: dict[str, str] = {}  # the connection's jar: a handshake's Set-Cookie, sent on reconnect
        self.ws = Protocol(Side.CLIENT, max_size=MAX_MESSAGE)  # open: h11 does the handshake before it
        self.parts: list[bytes] = []  # the fragmented message in progress (TEXT or BINARY `opcode`)
        self.opcode: Opcode | None = None
        self.ready: collections.deque[bytes] = collections.deque()
        self.early = b""  # what followed the handshake's 101 in the same read: the first frames
        self.send_lock = trio.Lock()
        self.close_code: int | None = None
        self.close_reason = ""
        self.close_sent = False
        self.broken: str | None = None
        self.failure: str | None = None  # a send never ends this link: a broken socket ends receive()
        self.end_code = EXIT_PEER
        self.finished = trio.Event()  # set once receive() has seen the end: a close frame, or a broken stream
        self.sock: socket.socket | None = None  # once threaded(): the blocking socket the threads use
        self.sock_lock = threading.Lock()  # their sends (messages, pongs, closes): one frame at a time
        # The protocol object (not made for threads) used by one at a time; never held across I/O, so a
        # send blocked by back-pressure never keeps the reader from reading.
        self.ws_lock = threading.Lock()

    # -- opening ------------------------------------------------------------------------------------------
    async def open(self, nursery: Any) -> None:
        parts = urlsplit(self.url)
        secure = parts.scheme.lower() == "wss"
        host, port = parts.hostname or "", parts.port or (443 if secure else 80)
        extra = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in self.headers]
        if self.cookies:
            extra.append((b"Cookie", "; ".join(f"{k}={v}" for k, v in self.cookies.items()).encode("latin-1")))
        start = time.perf_counter()
        try:
            with trio.fail_after(self.timeout):
                if secure:
                    context = self.ssl_context or ssl.create_default_context()
                    self.stream = await trio.open_ssl_over_tcp_stream(
                        host, port, ssl_context=context, https_compatible=True
                    )
                else:
                    self.stream = await trio.open_tcp_stream(host, port)
                status, got, body = await self._handshake(parts, extra)
        except trio.TooSlowError:
            self.tap.event({"event": "ws_open", "side": "agent", "ms": ms_since(start), "error": "timeout"})
            await self._abort()
            raise RemoteError(f"no WebSocket handshake from {self.url} within {self.timeout:g} s", EXIT_TIMEOUT)
        except (OSError, trio.BrokenResourceError, h11.ProtocolError, ssl.SSLError, RemoteError) as exc:
            self.tap.event({"event": "ws_open", "side": "agent", "ms": ms_since(start), "error": why(exc)[:500]})
            await self._abort()
            if isinstance(exc, RemoteError):
                raise
            raise RemoteError(f"cannot open a WebSocket to {self.url}: {why(exc)}")
        fields = {
            "event": "ws_open",
            "side": "agent",
            "method": "GET",
            "status": status,
            "ms": ms_since(start),
            "sent": recorded_headers(extra, self.secret),
            "headers": recorded_headers(got),
        }
        if status != 101:
            self.tap.event(fields)
            await self._abort()
            text = body[:200].decode("utf-8", "replace").strip()
            raise RemoteError(f"{self.url} refused the WebSocket upgrade: HTTP {status} {text}".rstrip())
        for name, value in got:
            if name == b"set-cookie":
                key, eq, val = value.decode("latin-1").split(";", 1)[0].partition("=")
                if eq and key.strip():
                    self.cookies[key.strip()] = val.strip()
            elif name == CONNECTION_ID.lower().encode():
                self.connection_id = value.decode("latin-1")
        self.tap.event({**fields, "connection": self.connection_id})

    async def _handshake(
        self, parts: Any, extra: list[tuple[bytes, bytes]]
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Send the upgrade request; (status, response headers, body or b"") once the answer is read.
        Bytes after a 101 are the first frames: they go to the frame reader."""
        assert self.stream is not None
        key = generate_key()
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn = h11.Connection(h11.CLIENT)
        request = h11.Request(
            method="GET",
            target=target,
            headers=[
                (b"Host", parts.netloc.rpartition("@")[2].encode("idna") if parts.netloc else b""),
                (b"Upgrade", b"websocket"),
                (b"Connection", b"Upgrade"),
                (b"Sec-WebSocket-Key", key.encode()),
                (b"Sec-WebSocket-Version", b"13"),
                *extra,
            ],
        )
        await self.stream.send_all(conn.send(request) or b"")
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = bytes(await self.stream.receive_some(1 << 16))
                conn.receive_data(data)
                if not data and conn.their_state is not h11.SWITCHED_PROTOCOL:
                    raise RemoteError(f"{self.url} closed the connection during the WebSocket handshake")
                continue
            if isinstance(event, h11.InformationalResponse) and event.status_code == 101:
                headers = [(k.lower(), v) for k, v in event.headers]
                if dict(headers).get(b"sec-websocket-accept") != accept_key(key).encode():
                    raise RemoteError(f"{self.url} answered the upgrade without the right Sec-WebSocket-Accept")
                self.early = bytes(conn.trailing_data[0])  # read as the first frames (a ping among them is answered)
                return 101, headers, b""
            if isinstance(event, h11.Response):
                body = b""
                with trio.move_on_after(2.0):
                    while len(body) < 4096:
                        nxt = conn.next_event()
                        if nxt is h11.NEED_DATA:
                            more = bytes(await self.stream.receive_some(1 << 16))
                            if not more:
                                break
                            conn.receive_data(more)
                        elif isinstance(nxt, h11.Data):
                            body += bytes(nxt.data)
                        else:
                            break
                return event.status_code, [(k.lower(), v) for k, v in event.headers], body
            if isinstance(event, h11.ConnectionClosed):
                raise RemoteError(f"{self.url} closed the connection during the WebSocket handshake")

    # -- messages -------------------------------------------------------------------------------------------
    def _take(self, frames: list[Any]) -> list[bytes]:
        """Data messages to hand out (fragments joined); a binary one is dropped and said to be; the close
        noted for receive() to act on (pings are answered by the protocol itself)."""
        out = []
        for f in frames:
            if not isinstance(f, Frame) or f.opcode in (Opcode.PING, Opcode.PONG):
                continue
            if f.opcode is Opcode.CLOSE:
                assert self.ws.close_rcvd is not None
                self.close_code, self.close_reason = self.ws.close_rcvd.code, self.ws.close_rcvd.reason
                continue
            if f.opcode is not Opcode.CONT:
                self.opcode = f.opcode
            self.parts.append(bytes(f.data))
            if not f.fin:
                continue
            payload, opcode = b"".join(self.parts) if len(self.parts) > 1 else self.parts[0], self.opcode
            self.parts, self.opcode = [], None
            if opcode is Opcode.BINARY:
                self.tap.event({"event": "dropped", "side": "agent", "reason": "binary frame", "bytes": len(payload)})
                continue
            try:
                payload.decode("utf-8")
            except UnicodeDecodeError:
                self.ws.fail(1007, "a text message that is not UTF-8")
                self.broken = "the server broke the WebSocket protocol: a text message that is not UTF-8"
                break
            out.append(payload)
        return out

    async def send(self, line: bytes) -> None:
        frame = self._text_frame(line)
        if frame is not None and (not frame or not await self._send(frame)):
            self._answer_unsent([line])

    def _answer_unsent(self, lines: list[bytes], broken: str | None = None) -> None:
        """The editor's requests that met a socket already gone: each answered by us, said to be ours, queued
        before the end that receive() is about to report (the run then ends, exit 4, as before)."""
        reason = f"the WebSocket to the remote agent is gone ({broken or self.broken or 'closed'})"
        for line in lines:
            out = Outgoing(line)
            if out.is_request:
                event, answer = relay_answer(out, reason)
                self.tap.event(event)
                self.ready.append(answer)

    def _text_frame(self, line: bytes) -> bytes | None:
        """The masked text frame for a line (b"" once the connection takes no more), or None when it is not
        UTF-8: a text frame must be, and a binary one is ignored by the RFD's servers. Nothing sensible
        reaches the agent, so nothing is sent: the line is recorded, and the event says why it went no
        further."""
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            self.tap.event({"event": "dropped", "side": "agent", "reason": "invalid UTF-8", "bytes": len(line)})
            return None
        with self.ws_lock:
            try:
                self.ws.send_text(line)
            except InvalidState:
                return b""
            return self._outgoing()

    def _outgoing(self) -> bytes:
        """What the protocol has queued to send (b"" is its end-of-stream mark: the TCP close is ours)."""
        return b"".join(self.ws.data_to_send())

    async def _send(self, frame: bytes, *, control: bool = False) -> bool:
        """A frame, unless our close has gone (`control`: one _absorb decided on, sent regardless); whether
        it went out."""
        if self.stream is None or ((self.close_sent or self.broken) and not control):
            return False
        if self.sock is not None:  # threaded: the threads' socket and lock (a close, from trio)
            return await trio.to_thread.run_sync(self._sendall_blocking, frame, abandon_on_cancel=True)
        async with self.send_lock:
            try:
                await self.stream.send_all(frame)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                self.broken = self.broken or f"the connection broke: {why(exc)}"
                return False
        return True

    async def receive(self) -> list[bytes] | None:
        """The text messages read so far (at least one), or None at the end. The only reader of the stream
        (trio lets one task at a time receive): close() waits for this to see the server's close."""
        messages = await self._receive()
        if messages is None:
            self.finished.set()
        return messages

    async def _receive(self) -> list[bytes] | None:
        assert self.stream is not None
        while not self.ready:
            if self.close_code is not None or self.broken:
                return None
            try:
                data, self.early = self.early or bytes(await self.stream.receive_some(1 << 16)), b""
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                self.broken = self.broken or f"the connection broke: {why(exc)}"
                continue  # what send() queued meanwhile (our answers) goes out before the end
            for frame in self._absorb(data):
                await self._send(frame, control=True)
        return self._handed_out()

    def _absorb(self, data: bytes) -> list[bytes]:
        """Parse what the socket gave (its messages go to `ready`); the control frames to send for it,
        in order: pongs, then our answer to the server's close or our close for a protocol error. b"" is
        the end of the TCP stream."""
        if not data:
            self.broken = self.broken or "the connection closed without a close frame"
            return []
        with self.ws_lock:
            self.ws.receive_data(data)
            self.ready.extend(self._take(self.ws.events_received()))
            exc = self.ws.parser_exc
            if exc is not None and self.broken is None:
                self.broken = f"the server broke the WebSocket protocol: {exc}"
            if self.ws.close_sent is not None:  # an answer to the server's close, or ours for an error
                self.close_sent = True
            out = self._outgoing()
        return [out] if out else []

    def _handed_out(self) -> list[bytes]:
        ready = self.ready  # popleft, not list() then clear(): a sending thread may append an answer meanwhile
        return [ready.popleft() for _ in range(len(ready))]

    # -- the threaded hot path (run --connect over ws://) ---------------------------------------------------
    def threaded(self) -> bool:
        """Hand the open connection to blocking threads (send_blocking, receive_blocking), as the stdio
        relay pumps: a round trip through trio's loop costs two scheduler passes and an epoll call per hop,
        which measured about 170 us more than two blocking threads on this 2-core machine. Only a plain TCP
        stream qualifies (an SSL object must not be read and written from two threads at once): False for
        wss://, which stays on trio."""
        stream = self.stream
        if not isinstance(stream, trio.SocketStream) or self.close_sent or self.broken:
            return False
        tsock = stream.socket
        self.sock = socket.socket(tsock.family, tsock.type, tsock.proto, fileno=os.dup(tsock.fileno()))
        self.sock.setblocking(True)  # the descriptor trio made non-blocking is now ours alone
        return True

    def send_blocking(self, lines: list[bytes]) -> None:
        """From a thread: the lines as text frames, in one socket write (a chunk's lines arrived together,
        so none waits for another)."""
        frames = [self._text_frame(line) for line in lines]
        data = b"".join(f for f in frames if f)
        sendable = [line for line, f in zip(lines, frames, strict=True) if f is not None]
        if sendable and (not data or self.close_sent or self.broken):
            self._answer_unsent(sendable)
        elif data:
            self._sendall_blocking(data, unsent=sendable)

    def _sendall_blocking(self, data: bytes, unsent: list[bytes] | None = None) -> bool:
        """Write `data`; if the socket is gone, answer the requests among `unsent` before saying it broke:
        the reading thread ends once it sees `broken` with nothing ready, so answers queued after that
        would never reach the editor."""
        assert self.sock is not None
        with self.sock_lock:
            try:
                self.sock.sendall(data)
            except OSError as exc:
                broke = f"the connection broke: {why(exc)}"
                if unsent:
                    self._answer_unsent(unsent, self.broken or broke)
                self.broken = self.broken or broke
                return False
        return True

    async def receive_in_thread(self, take: Callable[[list[bytes]], None]) -> None:
        """Until the end: each batch receive() would return, handed to `take` in a worker thread (which
        may block writing it on: the socket is then not read, and the server feels the back-pressure)."""

        def loop() -> None:
            while (payloads := self._receive_blocking()) is not None:
                take(payloads)

        try:
            await trio.to_thread.run_sync(loop, abandon_on_cancel=True)
        finally:
            self.finished.set()

    def _receive_blocking(self) -> list[bytes] | None:
        """What _receive() does, with blocking calls, in a thread."""
        assert self.sock is not None
        while not self.ready:
            if self.close_code is not None or self.broken:
                return None
            try:
                data, self.early = self.early or self.sock.recv(1 << 16), b""
            except OSError as exc:
                self.broken = self.broken or f"the connection broke: {why(exc)}"
                continue  # what send_blocking() queued meanwhile (our answers) goes out before the end
            for frame in self._absorb(data):
                self._sendall_blocking(frame)
        return self._handed_out()

    def ended(self) -> tuple[bool, str]:
        """(a normal close?, how it closed), once receive() has returned None."""
        code = self.close_code if self.broken is None else 1006
        self.tap.event(
            {
                "event": "ws_close",
                "side": "agent",
                "status": code,
                "connection": self.connection_id,
                "reason": self.close_reason or self.broken,
            }
        )
        text = (
            f"code {code}"
            + (f": {self.close_reason}" if self.close_reason else "")
            + (f", {self.broken}" if self.broken else "")
        )
        return code in CLEAN_CLOSE, text

    async def close(self) -> None:
        """Our close (1000), then the server's answer for up to CLOSE_WAIT, then the TCP close."""
        if self.stream is None:
            return
        with trio.CancelScope(shield=True):
            if not self.close_sent:
                with self.ws_lock:
                    try:
                        self.ws.send_close(1000)
                    except InvalidState:  # a close is already under way
                        pass
                    frame = self._outgoing()
                if frame:
                    await self._send(frame)
                self.close_sent = True
                with trio.move_on_after(CLOSE_WAIT):
                    await self.finished.wait()
                if not self.finished.is_set():  # the TCP close ends it: the reader then returns None
                    self.broken = self.broken or f"no close frame within {CLOSE_WAIT:g} s of ours"
            await self._abort()

    async def _abort(self) -> None:
        if self.sock is not None:  # wakes a thread blocked in recv (closing the descriptor would not)
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.sock.close()
        if self.stream is not None:
            with trio.CancelScope(shield=True), trio.move_on_after(1.0):
                try:
                    await self.stream.aclose()
                except (trio.BrokenResourceError, OSError):
                    pass
