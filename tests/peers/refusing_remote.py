"""A remote ACP endpoint that misbehaves on purpose, on a real socket in a thread of the test process.

HTTP: initialize is answered 200 with an Acp-Connection-Id and the connection's SSE stream stays open
(session/new is answered on it: 202, then the result as an event); every later POST is refused with `status` (or, with status 0, its connection is closed unanswered:
the link dropped under one POST), DELETE gets 202. WebSocket: the upgrade and initialize are answered, then
the next frame is met with a reset (SO_LINGER 0), so the socket is gone under the relay's next send.
With mute_close, the goodbye is never answered: no DELETE answer, no close frame back.
Written with the standard library only, so what the relay meets is bytes, not a library's manners.
"""

from __future__ import annotations

import base64
import hashlib
import http
import json
import socket
import struct
import threading

INIT_RESULT = {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class RefusingRemote:
    def __init__(self, mode: str, status: int = 400, mute_close: bool = False) -> None:
        self.mode, self.status, self.mute_close = mode, status, mute_close
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(16)
        self.port = self.srv.getsockname()[1]
        self.held: list[socket.socket] = []
        self.sse: socket.socket | None = None
        self.sse_ready = threading.Event()
        self.posts: list[tuple[str | None, int]] = []  # (rpc method, status answered; 0 for a dropped one)
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self) -> str:
        return f"{self.mode}://127.0.0.1:{self.port}/acp"

    def close(self) -> None:
        for s in [self.srv, *self.held]:
            try:
                s.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            self.held.append(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c: socket.socket) -> None:
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = c.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method = lines[0].split(" ")[0]
                headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
                if self.mode == "ws":
                    self._websocket(c, headers, buf)
                    return
                size = int(headers.get("content-length", "0"))
                while len(buf) < size:
                    buf += c.recv(65536)
                body, buf = buf[:size], buf[size:]
                if not self._http(c, method, body):
                    return
        except OSError:
            return

    def _http(self, c: socket.socket, method: str, body: bytes) -> bool:
        """Answer one request; False once the connection is to be left (an SSE stream held, a drop)."""
        if method == "GET":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n")
            self.sse = c
            self.sse_ready.set()
            return False  # held open and quiet until close()
        if method == "DELETE":
            if self.mute_close:  # never answered: the relay's goodbye must not wait long for it
                return False
            c.sendall(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
            return True
        msg = json.loads(body)
        rpc = msg.get("method")
        if rpc == "initialize":
            answer = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": INIT_RESULT}).encode()
            c.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nAcp-Connection-Id: conn-1\r\n"
                + f"Content-Length: {len(answer)}\r\n\r\n".encode()
                + answer
            )
            return True
        if rpc == "session/new" and self.status != 0:
            c.sendall(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
            self.sse_ready.wait(5)
            event = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {"sessionId": "s-1"}})
            assert self.sse is not None
            self.sse.sendall(f"data: {event}\n\n".encode())
            return True
        self.posts.append((rpc, self.status))
        if self.status == 0:
            c.close()
            return False
        text = b"Missing Acp-Session-Id" if self.status == 400 else f"refused {rpc}".encode()
        phrase = http.HTTPStatus(self.status).phrase
        c.sendall(f"HTTP/1.1 {self.status} {phrase}\r\nContent-Length: {len(text)}\r\n\r\n".encode() + text)
        return True

    def _websocket(self, c: socket.socket, headers: dict[str, str], rest: bytes) -> None:
        accept = base64.b64encode(hashlib.sha1(headers["sec-websocket-key"].encode() + GUID).digest())
        c.sendall(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n"
        )
        frames = 0
        buf = rest
        while True:
            payload, buf = _read_frame(c, buf)
            frames += 1
            if frames > 1 and self.mute_close:  # frames (the close too) read and never answered
                continue
            if frames > 1:  # the frame after initialize: the socket goes away under the relay
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                c.close()
                return
            msg = json.loads(payload)
            answer = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": INIT_RESULT}).encode()
            c.sendall(_text_frame(answer))


def _text_frame(payload: bytes) -> bytes:
    """An unmasked server text frame, with the length in 1, 2 or 8 bytes as its size needs (RFC 6455 5.2)."""
    size = len(payload)
    if size < 126:
        return bytes([0x81, size]) + payload
    if size < 1 << 16:
        return bytes([0x81, 126]) + struct.pack(">H", size) + payload
    return bytes([0x81, 127]) + struct.pack(">Q", size) + payload


def _read_frame(c: socket.socket, buf: bytes) -> tuple[bytes, bytes]:
    """One masked client frame's payload (a single frame: the relay sends each message whole)."""

    def need(n: int) -> None:
        nonlocal buf
        while len(buf) < n:
            data = c.recv(65536)
            if not data:
                raise OSError("closed")
            buf += data

    need(2)
    size = buf[1] & 0x7F
    at = 2
    if size == 126:
        need(4)
        size, at = struct.unpack(">H", buf[2:4])[0], 4
    elif size == 127:
        need(10)
        size, at = struct.unpack(">Q", buf[2:10])[0], 10
    need(at + 4 + size)
    mask, data = buf[at : at + 4], buf[at + 4 : at + 4 + size]
    payload = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
    return payload, buf[at + 4 + size :]
