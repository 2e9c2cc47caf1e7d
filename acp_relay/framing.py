"""Split a byte stream into lines on b"\\n", keeping every byte.

No length limit (ACP lines carry base64 images and whole files), no decoding, no stripping: a frame is
exactly the bytes between two delimiters, and a last line without a delimiter is handed out by finish().
"""

from __future__ import annotations


class LineFramer:
    """Feed chunks as they are read; get back the lines each chunk completed."""

    __slots__ = ("_parts", "_pending")

    def __init__(self) -> None:
        self._parts: list[bytes] = []  # pieces of the current, unfinished line
        self._pending = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        if b"\n" not in chunk:
            if chunk:
                self._parts.append(chunk)
                self._pending += len(chunk)
            return []
        lines = chunk.split(b"\n")
        tail = lines.pop()
        if self._parts:
            self._parts.append(lines[0])
            lines[0] = b"".join(self._parts)
            self._parts = []
        self._pending = len(tail)
        if tail:
            self._parts.append(tail)
        return lines

    @property
    def pending(self) -> int:
        """Bytes held for a line not yet terminated."""
        return self._pending

    def finish(self) -> bytes | None:
        """At EOF: the unterminated last line, or None when the stream ended on a delimiter."""
        if not self._parts:
            return None
        line = b"".join(self._parts)
        self._parts = []
        self._pending = 0
        return line
