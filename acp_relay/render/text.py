"""Text helpers every command that prints shares: the one escaping of recorded text (escape, clean,
escape_json), cutting to a width (shorten, middle), counts, times and durations, aligned columns, JSON Lines,
and Style (color and terminal width). Generic: nothing here knows frames or sessions (render/frames.py does).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii
from typing import IO, Any

import orjson

from ..protocol.jsonrpc import dumps
from ..protocol.words import counted as counted  # re-exported: the one helper for counts in sentences

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
# What a recording must not send to the reader's terminal: C0 controls and DEL, C1 controls (U+0080-U+009F;
# U+009B is an 8-bit CSI that some terminals obey), and the bidirectional formatting characters (U+061C,
# U+200E, U+200F, embeddings and overrides U+202A-U+202E, isolates U+2066-U+2069), which reorder the text a
# reader sees ("Trojan Source").
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


@dataclass(frozen=True)
class Style:
    """Color and width: only for a terminal, and never when NO_COLOR is set."""

    color: bool = False
    width: int | None = None  # None: not a terminal, nothing is cut to fit
    wide: bool = False  # --wide: no id or column shortened, whatever the width

    @classmethod
    def detect(cls, stream: IO[Any] | None = None, color: str = "auto", wide: bool = False) -> Style:
        stream = stream or sys.stdout
        tty = bool(getattr(stream, "isatty", lambda: False)())
        use = {"always": True, "never": False}.get(color, tty and not os.environ.get("NO_COLOR"))
        width = shutil.get_terminal_size((120, 24)).columns if tty and not wide else None
        return cls(use, width, wide)

    def paint(self, text: str, code: str | None) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color and code and text else text

    def fit(self, line: str, visible: int) -> str:
        """Cut a line to the terminal width (`visible` is its length without color codes)."""
        if self.width is None or visible <= self.width:
            return line
        plain = ANSI.sub("", line)
        return plain[: self.width - 1] + "~"


LINE_MAX = 2000  # characters one-line views (previews, labels, messages) escape at most: they print fewer
TEXT_MAX = 1 << 20  # characters of one text block the transcript and --frame escape at most


def _table(json_text: bool, multiline: bool) -> dict[int, str]:
    """str.translate's table for escape: every character _UNSAFE matches, as its visible escape."""
    codes = [*range(0x20), *range(0x7F, 0xA0), 0x61C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
    table = {c: (f"\\u{c:04x}" if json_text or c > 0xFF else f"\\x{c:02x}") for c in codes}
    if multiline:
        del table[ord("\n")], table[ord("\t")]
    return table


_TABLES = {(j, m): _table(j, m) for j in (False, True) for m in (False, True)}


def cut(text: str, limit: int | None, hint: str = "") -> str:
    """The first `limit` characters and a note of how many more there were: views cut before escaping, so
    a hostile 64 MiB line costs what its first screenful costs."""
    if limit is None or len(text) <= limit:
        return text
    return text[:limit] + f" [... {len(text) - limit} more characters{hint}]"


def escape(text: str, *, multiline: bool = False, json_text: bool = False, limit: int | None = None) -> str:
    """The one escaping of recorded text for every view people read: ANSI sequences removed, every other
    unsafe character (see _UNSAFE) written as a visible escape, \\xNN (C0, DEL, C1) or \\uNNNN (bidi).
    `multiline` keeps line breaks and tabs (the transcript); otherwise the text becomes one line.
    `json_text` writes \\uNNNN throughout, so pretty JSON stays valid JSON with the same meaning.
    `limit` cuts the text to that many characters first (see cut)."""
    if limit is not None and len(text) > limit:
        text = cut(text, limit)
    text = ANSI.sub("", text)
    if multiline:
        text = text.replace("\r\n", "\n")
    else:
        text = text.replace("\r\n", "\\n").replace("\n", "\\n").replace("\t", " ")
    if _UNSAFE.search(text) is None:
        return text
    return text.translate(_TABLES[(json_text, multiline)])


# What orjson leaves as it is in a JSON string but a terminal obeys or reorders: DEL, C1, bidi controls.
_UNSAFE_JSON = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_JSON_ESCAPES = [(chr(c), f"\\u{c:04x}") for c in _table(True, False) if c >= 0x7F]
# The UTF-8 of every non-ASCII character _UNSAFE_JSON finds starts with one of these: a byte search each
# (C speed) rules out most text, where the regex scans a character at a time (seconds in a big export).
_UNSAFE_LEADS = (b"\xc2", b"\xd8\x9c", b"\xe2\x80", b"\xe2\x81")


def safe_dumps(value: Any) -> bytes:
    """`value` as compact JSON made safe to `cat` (see escape_json), which every --json line and text
    export writes. A big output holding unsafe characters has its strings escaped before the dump instead:
    escaping millions of them in the dumped text costs a Python step each (seconds per hostile MiB)."""
    data = dumps(value)
    if len(data) <= SAFE_DUMPS_BIG:
        return escape_json(data)
    if _unsafe_text(data) is None:
        return data
    del data  # not kept beside the second dump
    try:
        return escape_json(orjson.dumps(_escaped_strings(value)))  # keys, if any unsafe, are escaped after
    except (TypeError, RecursionError):  # what only the standard library writes (wide integers)
        return escape_json(dumps(value))


SAFE_DUMPS_BIG = 1 << 20


def _escaped_strings(value: Any, depth: int = 0) -> Any:
    """`value` with each string that holds an unsafe character as a ready JSON fragment, written by the
    standard library's C encoder with every non-ASCII character as \\uXXXX (the same string, read back)."""
    if isinstance(value, str):
        return orjson.Fragment(encode_basestring_ascii(value)) if _UNSAFE_JSON.search(value) else value
    if depth > 256:
        return value
    if isinstance(value, list):
        return [_escaped_strings(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {k: _escaped_strings(v, depth + 1) for k, v in value.items()}
    return value


def escape_json(data: bytes) -> bytes:
    """JSON text made safe to `cat`: the characters _UNSAFE_JSON finds written as \\uXXXX (C0 controls
    are escaped by every JSON writer already). The same JSON value: these characters can only stand
    inside strings, where the escape means the character."""
    text = _unsafe_text(data)
    if text is None:
        return data
    for char, written in _JSON_ESCAPES:  # a C-speed scan each: a regex callback a match took 40 s on 64 MiB
        if char in text:
            text = text.replace(char, written)
    return text.encode("utf-8", "surrogateescape")


def _unsafe_text(data: bytes) -> str | None:
    """`data` decoded when it holds a character escape_json escapes, else None, found by byte searches
    first (isascii: one pass at memory speed; then one search per lead) and the regex only after them."""
    if b"\x7f" not in data and (data.isascii() or not any(lead in data for lead in _UNSAFE_LEADS)):
        return None
    text = data.decode("utf-8", "surrogateescape")
    return None if _UNSAFE_JSON.search(text) is None else text


def clean(text: str, limit: int = LINE_MAX) -> str:
    """One printable line: a recording must not drive the reader's terminal or break the line (cut to
    `limit` characters first: a line is read, not scrolled)."""
    return escape(text, limit=limit)


def shorten(text: str, n: int) -> str:
    return text if len(text) <= n else text[: max(0, n - 3)] + "..."


def middle(text: str, n: int, tail: int = 4) -> str:
    """`text` in at most n characters, cut in the middle (`6f1c2a9e3b7d…5162`): the head stays a prefix the
    user can type, the tail tells similar ids apart."""
    if len(text) <= n:
        return text
    if n <= tail + 2:
        return text[: max(0, n - 1)] + "…"
    return text[: n - tail - 1] + "…" + text[-tail:]


def unique_prefix_length(ids: Iterable[str], least: int = 8) -> int:
    """The shortest prefix length (at least `least`) that tells every id in `ids` apart."""
    items = sorted(set(ids))
    n = least
    for a, b in zip(items, items[1:], strict=False):
        common = len(os.path.commonprefix([a, b]))
        n = max(n, common + 1)
    return n


def quote(text: str) -> str:
    return '"' + clean(text) + '"'


def fmt_time(ts: float, ms: bool = False) -> str:
    """Local wall-clock time (set TZ for another zone); a time no calendar holds prints as its number."""
    try:
        base = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))
    except (OverflowError, ValueError, OSError):
        return f"(time {ts!r})"
    return f"{base}.{int(round((ts % 1) * 1000)) % 1000:03d}" if ms else base


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"


def fmt_ms(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms:.1f}ms" if ms < 1000 else f"{ms / 1000:.2f}s"


def align(rows: Sequence[tuple[str, ...]], right: Container[int] = frozenset()) -> list[list[str]]:
    """Cells padded to their column's width (the columns in `right` to the right): join them with two
    spaces and rstrip() for a table whose layout depends only on its data."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))] if rows else []
    return [[c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(r)] for r in rows]


def write_lines(out: IO[bytes], lines: Iterable[str]) -> None:
    """A report without color, written: each line escaped here, at its exit (escape, uncut), so a field its
    renderer did not escape cannot reach the terminal; one it did escape is unchanged (escaping is idempotent)."""
    out.write("".join(escape(line) + "\n" for line in lines).encode("utf-8", "replace"))


def write_painted(out: IO[bytes], lines: Iterable[Sequence[tuple[str, str | None]]], style: Style) -> None:
    """A report in color when `style` says so: each line its (text, SGR code) pieces, each piece escaped
    first (as write_lines does) and only then painted, so the only escape sequences that reach the terminal
    are our own codes, never a recorded byte."""
    text = "".join("".join(style.paint(escape(piece), code) for piece, code in line) + "\n" for line in lines)
    out.write(text.encode("utf-8", "replace"))


def dumps_line(record: dict[str, Any]) -> bytes:
    """One JSON line (integers beyond 64 bits fall back to the standard library), safe to `cat`."""
    return safe_dumps(record) + b"\n"
