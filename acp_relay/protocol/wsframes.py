"""WebSocket frames (RFC 6455 section 5), bytes in, messages out: the client's receive path, sans-I/O.

Why not wsproto's frame layer here: measured on the development machine, wsproto parses about 50,000
200-byte frames a second and trio-websocket delivers about 8,000, where a flood of notifications must be
relayed at 50,000 or more. A server's frames are unmasked and the client negotiates no extension, so
what remains is a header, a length and a slice: this parser does that, checks what RFC 6455 requires
(no RSV bits, no mask from a server, control frames short and unfragmented, continuation order, UTF-8
in text messages), and leaves the handshake to h11 and everything else to the caller.
"""

from __future__ import annotations

from typing import NamedTuple

CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 section 1.3: Sec-WebSocket-Accept's constant


class WsProtocolError(Exception):
    """The peer broke RFC 6455; `code` is the close code to send (1002 protocol, 1007 data, 1009 size)."""

    def __init__(self, message: str, code: int = 1002) -> None:
        super().__init__(message)
        self.code = code


class WsMessage(NamedTuple):
    opcode: int  # TEXT, BINARY, CLOSE, PING or PONG
    payload: bytes


class FrameReader:
    """Feed what the socket gave; get the complete messages (fragments joined, control frames as they come)."""

    def __init__(self, max_message: int = 256 << 20, *, expect_masked: bool = False) -> None:
        self._buf = bytearray()
        self._pos = 0
        self.max_message = max_message
        self.expect_masked = expect_masked  # a server reads masked frames; a client, unmasked ones
        self._parts: list[bytes] = []
        self._opcode: int | None = None  # of the fragmented message in progress
        self._size = 0

    def feed(self, data: bytes) -> list[WsMessage]:
        buf: bytes | bytearray
        if self._buf:  # a frame split across reads: gather in place (a long one costs its size once)
            buf = self._buf
            if self._pos:
                del buf[: self._pos]
                self._pos = 0
            buf += data
        else:  # the common case, whole frames: parsed where they are, only a split tail is kept
            buf = data
        out: list[WsMessage] = []
        pos, n = 0, len(buf)
        while n - pos >= 2:
            b0, b1 = buf[pos], buf[pos + 1]
            if b0 & 0x70:
                raise WsProtocolError("a frame with RSV bits set (no extension was negotiated)")
            masked = b1 & 0x80
            if bool(masked) != self.expect_masked:
                raise WsProtocolError(
                    "a masked frame from the server" if masked else "an unmasked frame from the client"
                )
            length = b1 & 0x7F
            at = pos + 2
            if length == 126:
                if n - at < 2:
                    break
                length = int.from_bytes(buf[at : at + 2], "big")
                at += 2
            elif length == 127:
                if n - at < 8:
                    break
                length = int.from_bytes(buf[at : at + 8], "big")
                at += 8
            key = b""
            if masked:
                if n - at < 4:
                    break
                key = bytes(buf[at : at + 4])
                at += 4
            opcode, fin = b0 & 0x0F, b0 & 0x80
            if length > self.max_message or self._size + length > self.max_message:
                raise WsProtocolError(f"a message over {self.max_message} bytes", 1009)
            if n - at < length:
                break
            payload = bytes(buf[at : at + length])
            if key:
                payload = unmask(payload, key)
            pos = at + length
            message = self._frame(opcode, bool(fin), payload)
            if message is not None:
                out.append(message)
        if buf is self._buf:
            if pos == n:
                buf.clear()
                pos = 0
            self._pos = pos
        elif pos < n:
            self._buf += buf[pos:]
        return out

    def _frame(self, opcode: int, fin: bool, payload: bytes) -> WsMessage | None:
        if opcode >= 0x8:
            if opcode not in (CLOSE, PING, PONG):
                raise WsProtocolError(f"an unknown control opcode {opcode:#x}")
            if not fin or len(payload) > 125:
                raise WsProtocolError("a fragmented or long control frame")
            return WsMessage(opcode, payload)
        if opcode == CONTINUATION:
            if self._opcode is None:
                raise WsProtocolError("a continuation frame with no message to continue")
        elif opcode in (TEXT, BINARY):
            if self._opcode is not None:
                raise WsProtocolError("a new message inside a fragmented one")
            if fin:  # the common case: one frame, one message
                return self._whole(opcode, payload)
            self._opcode = opcode
        else:
            raise WsProtocolError(f"an unknown data opcode {opcode:#x}")
        self._parts.append(payload)
        self._size += len(payload)
        if not fin:
            return None
        whole, first = b"".join(self._parts), self._opcode
        self._parts, self._opcode, self._size = [], None, 0
        assert first is not None
        return self._whole(first, whole)

    @staticmethod
    def _whole(opcode: int, payload: bytes) -> WsMessage:
        if opcode == TEXT:
            try:
                payload.decode("utf-8")
            except UnicodeDecodeError:
                raise WsProtocolError("a text message that is not UTF-8", 1007)
        return WsMessage(opcode, payload)


def unmask(data: bytes, key: bytes) -> bytes:
    """XOR with the 4-byte key (the same operation masks and unmasks), in C through big integers."""
    n = len(data)
    if not n:
        return data
    pad = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "little") ^ int.from_bytes(pad, "little")).to_bytes(n, "little")


def encode(opcode: int, payload: bytes, key: bytes | None) -> bytes:
    """One final frame, masked with `key` (a client's: a fresh random 4 bytes per frame, RFC 6455 section
    5.3; the caller draws it, this module does no I/O) or unmasked (key None: a server's)."""
    n = len(payload)
    mask = key is not None
    if n < 126:
        head = bytes([0x80 | opcode, (0x80 if mask else 0) | n])
    elif n < 1 << 16:
        head = bytes([0x80 | opcode, (0x80 if mask else 0) | 126]) + n.to_bytes(2, "big")
    else:
        head = bytes([0x80 | opcode, (0x80 if mask else 0) | 127]) + n.to_bytes(8, "big")
    if key is None:
        return head + payload
    return head + key + unmask(payload, key)


def close_payload(code: int, reason: str = "") -> bytes:
    return code.to_bytes(2, "big") + reason.encode("utf-8")[:123]


def parse_close(payload: bytes) -> tuple[int | None, str]:
    """(code, reason) of a close frame; (None, "") when it carried none (that reads as 1005)."""
    if len(payload) < 2:
        return None, ""
    return int.from_bytes(payload[:2], "big"), payload[2:].decode("utf-8", "replace")
