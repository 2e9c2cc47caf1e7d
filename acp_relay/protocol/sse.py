"""Server-Sent Events, bytes in, events out: how Streamable HTTP carries agent-to-client messages.

Sans-I/O like the line framer: feed() takes whatever chunk the socket gave and returns the events it
completed. An event's data is kept as bytes exactly as sent (the `data:` lines' values joined by LF, as
the SSE rules say), so the recorded frame is the payload the server wrote, never a re-serialized copy.
Lines end in CRLF, LF or CR; a CR at the end of a chunk may be the first half of a CRLF, so it waits for
the next byte before it ends a line. Comments (`: keepalive`) are counted, not dropped silently.
"""

from __future__ import annotations

from typing import NamedTuple

_BOM = b"\xef\xbb\xbf"


class SseEvent(NamedTuple):
    """One dispatched event: its data (bytes), and the `event`, `id` and `retry` fields when it had them."""

    data: bytes
    event: str | None = None
    id: str | None = None
    retry: int | None = None


class SseParser:
    """Incremental SSE parser. `comments` counts comment lines; `last_event_id` is what a reconnect sends."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._started = False
        self._data: list[bytes] = []
        self._has_data = False
        self._event: str | None = None
        self._id: str | None = None
        self._retry: int | None = None
        self.comments = 0
        self.last_event_id: str | None = None

    def feed(self, chunk: bytes) -> list[SseEvent]:
        buf = self._buf
        buf += chunk
        if not self._started:
            if len(buf) < len(_BOM) and _BOM.startswith(bytes(buf)):
                return []
            if buf.startswith(_BOM):
                del buf[: len(_BOM)]
            self._started = True
        out: list[SseEvent] = []
        start = 0
        n = len(buf)
        while start < n:
            lf = buf.find(b"\n", start)
            cr = buf.find(b"\r", start, lf if lf >= 0 else n)
            if cr >= 0:
                if cr + 1 == n:  # maybe half of a CRLF: wait for the next chunk
                    break
                end, nxt = cr, cr + 2 if buf[cr + 1] == 0x0A else cr + 1
            elif lf >= 0:
                end, nxt = lf, lf + 1
            else:
                break
            event = self._line(bytes(buf[start:end]))
            if event is not None:
                out.append(event)
            start = nxt
        del buf[:start]
        return out

    def finish(self) -> tuple[list[SseEvent], bytes]:
        """At the stream's end: a last line without its terminator is processed, but an event without its
        blank line is not dispatched (the SSE rules discard it). Returns (events, bytes left undispatched)."""
        out: list[SseEvent] = []
        if self._buf.endswith(b"\r"):
            event = self._line(bytes(self._buf[:-1]))
            self._buf.clear()
            if event is not None:
                out.append(event)
        left = bytes(self._buf)
        if left:
            self._line(left)
        pending = b"\n".join(self._data) if self._has_data else b""
        self._buf.clear()
        self._reset()
        return out, left or pending

    def _reset(self) -> None:
        self._data = []
        self._has_data = False
        self._event = None
        self._retry = None

    def _line(self, line: bytes) -> SseEvent | None:
        if not line:
            if not self._has_data:
                self._reset()
                return None
            event = SseEvent(b"\n".join(self._data), self._event, self._id, self._retry)
            self._reset()
            return event
        if line.startswith(b":"):
            self.comments += 1
            return None
        name, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self._data.append(value)
            self._has_data = True
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\0" not in value:
                self._id = self.last_event_id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit():
            self._retry = int(value)
        return None
