"""Turn what store/queries.py reads into text: one line per session or frame, a frame in full, JSON lines, raw bytes.

Pure functions of their arguments (never the current time), so piped output is plain, stable and
golden-testable; color and terminal width come in only through `Style`.
"""

from __future__ import annotations

import base64
import re
import textwrap
from collections.abc import Callable, Iterable
from typing import IO, Any

from ..protocol import vocab
from ..protocol.jsonrpc import dumps_text
from ..store.queries import FrameRow, SessionSummary

# The generic text helpers live in render/text.py; they are re-exported here for the code that has always
# imported them from render/frames.
from .preview import fmt_id, preview
from .text import (  # noqa: F401
    ANSI,
    LINE_MAX,
    TEXT_MAX,
    Style,
    align,
    clean,
    counted,
    cut,
    dumps_line,
    escape,
    escape_json,
    fmt_duration,
    fmt_ms,
    fmt_time,
    middle,
    quote,
    shorten,
    unique_prefix_length,
)

PREVIEW = 80  # characters of content preview when the width is unknown (piped)
WHAT = 44  # width of the method / variant column (longer text is cut in the middle, unless --wide)
MIN_PREVIEW = 15  # on a narrow terminal WHAT gives way down to 20 columns so the preview keeps this many
PLAIN = Style()  # no color, no width: piped output
ARROWS = {"c2a": "-->", "a2c": "<--"}
DIRECTION_WORDS = {"c2a": "editor -> agent", "a2c": "agent -> editor"}


# -- the session listing ----------------------------------------------------------------------------------
SESSION_HEADER = (
    "STARTED",
    "SESSION",
    "CONN",
    "AGENT",
    "CLIENT",
    "V",
    "FRAMES",
    "TURNS",
    "DURATION",
    "ENDED",
    "ANOMALIES",
    "NOTE",
)
_RIGHT = {2, 5, 6, 7, 8}


def anomalies_text(s: SessionSummary) -> str:
    parts = [
        f"{n} {what}"
        for n, what in (
            (s.invalid, "invalid"),
            (s.errors, "error" + "s" * (s.errors != 1)),
            (s.unanswered, "unanswered"),
            (s.in_flight, "in flight"),
        )
        if n
    ]
    return ", ".join(parts) or "-"


def session_cells(s: SessionSummary) -> tuple[str, ...]:
    """One row of the listing, every cell escaped at the exit (each is a recorded value or made of them)."""
    note = " ".join(
        x
        for x in (
            f"[{clean(s.label)}]" if s.label else "",
            quote(s.title) if s.title else "",
            clean(s.origin) if s.origin and s.origin not in (vocab.SESSION_NEW, "seen") else "",
        )
        if x
    )
    cells = (
        fmt_time(s.started),
        s.session_id if s.session_id else "(no session)",
        str(s.connection_id),
        s.agent,
        s.client or "-",
        "-" if s.protocol_version is None else str(s.protocol_version),
        str(s.frames),
        str(s.turns),
        fmt_duration(s.duration),
        s.ended,
        anomalies_text(s),
        note,
    )
    return tuple(clean(str(c)) for c in cells)


# Session list columns a narrow terminal shortens, in this order, and the least each keeps: the SESSION id
# first (to a prefix that is still unique, marked with …), then the free text, then the start time's year
# and seconds. Numbers never shrink (CONN, V, FRAMES, TURNS, DURATION, the counts in ANOMALIES): when the
# table still does not fit, its last columns move, as `name value`, to a line of their own under each row
# (session_table). No column is ever dropped and no line is cut.
_SHRINK = ((11, 10), (3, 10), (4, 10))  # NOTE, AGENT, CLIENT
_FIRST_STACKED = 6  # the table keeps at least STARTED, SESSION, CONN, AGENT, CLIENT and V


def _over(rows: list[tuple[str, ...]], width: int) -> int:
    return sum(max(len(r[i]) for r in rows) for i in range(len(rows[0]))) + 2 * (len(rows[0]) - 1) - width


def fit_session_cells(cells: list[tuple[str, ...]], width: int) -> list[tuple[str, ...]]:
    """The table's cells (header first) made to fit `width` columns by priority (see _SHRINK)."""

    def shrink(rows: list[tuple[str, ...]], col: int, cut: Callable[[str], str]) -> list[tuple[str, ...]]:
        return [r if n == 0 else (*r[:col], cut(r[col]), *r[col + 1 :]) for n, r in enumerate(rows)]

    if _over(cells, width) <= 0:
        return cells
    ids = [r[1] for r in cells[1:] if not r[1].startswith("(")]
    widest = max(len(r[1]) for r in cells)
    keep = max(unique_prefix_length(ids) + 1, len("SESSION"), widest - _over(cells, width))
    cells = shrink(cells, 1, lambda text: text if len(text) <= keep else text[: keep - 1] + "…")
    for col, least in _SHRINK:
        if col < len(cells[0]) and _over(cells, width) > 0:
            target = max(least, len(cells[0][col]), max(len(r[col]) for r in cells) - _over(cells, width))
            cells = shrink(cells, col, lambda text, n=target: shorten(text, n))  # type: ignore[misc]
    if _over(cells, width) > 0:  # 2026-01-01 00:00:05 -> 01-01 00:00
        cells = shrink(cells, 0, lambda text: text[5:16] if len(text) == 19 else text)
    return cells


def stack_session_cells(cells: list[tuple[str, ...]], width: int) -> tuple[list[tuple[str, ...]], int]:
    """The cells fitted to `width` and how many columns stay in the table: the last columns move to a line
    under each row, NOTE and ANOMALIES first, until what is left fits (never fewer than _FIRST_STACKED)."""
    for kept in range(len(cells[0]), _FIRST_STACKED - 1, -1):
        fitted = fit_session_cells([r[:kept] for r in cells], width)
        if _over(fitted, width) <= 0 or kept == _FIRST_STACKED:
            return [f + r[kept:] for f, r in zip(fitted, cells, strict=True)], kept
    raise AssertionError("unreachable")


def _stacked_cells(header: tuple[str, ...], row: tuple[str, ...], width: int) -> list[str]:
    """The columns moved out of the table as `name value` pairs, wrapped at pairs within `width`; only NOTE,
    free text, is shortened to fit (a count or a duration is printed whole)."""
    indent, lines, line = "    ", [], ""
    for name, value in zip(header, row, strict=True):
        pair = f"{name.lower()} {value or '-'}"
        if name == "NOTE":
            pair = shorten(pair, max(width - len(indent), len(name) + 4))
        if line and len(indent) + len(line) + 2 + len(pair) > width:
            lines.append(indent + line)
            line = ""
        line = f"{line}  {pair}" if line else pair
    return [*lines, indent + line] if line else lines


def session_table(rows: Iterable[SessionSummary], style: Style = PLAIN) -> list[str]:
    """Aligned columns with a header; widths follow the rows, so the same data always prints the same. On a
    terminal the columns are made to fit its width (fit_session_cells, then stack_session_cells) unless
    --wide."""
    cells = [SESSION_HEADER] + [session_cells(s) for s in rows]
    kept = len(SESSION_HEADER)
    if style.width is not None and not style.wide:
        cells, kept = stack_session_cells(cells, style.width)
    table = [r[:kept] for r in cells]
    out = []
    for n, (r, parts) in enumerate(zip(cells, align(table, _RIGHT), strict=True)):
        plain = "  ".join(parts).rstrip()
        if style.color and n == 0:
            line = style.paint(plain, "1")
        elif style.color:
            anomalous = r[10] != "-" and any(not x.endswith(" in flight") for x in r[10].split(", "))
            if kept > 10:
                parts[10] = style.paint(parts[10], "31" if anomalous else None)
            if kept > 9:
                parts[9] = style.paint(parts[9], "32" if r[9] == "running" else None)
            line = "  ".join(parts).rstrip()
        else:
            line = plain
        out.append(style.fit(line, len(plain)))
        if n and kept < len(r):
            assert style.width is not None
            out += _stacked_cells(SESSION_HEADER[kept:], r[kept:], style.width)
    return out


# -- one line per frame -----------------------------------------------------------------------------------
def frame_what(f: FrameRow, message: Any) -> str:
    """Method (or variant and entity), id, and for an answer the method it answers and its latency: escaped
    here, once, whatever index column it shows."""
    return clean(_what(f, message))


def _what(f: FrameRow, message: Any) -> str:
    if f.kind == "invalid":
        return f"({f.parse})" if f.parse != "not_jsonrpc" else "(not JSON-RPC)"
    if f.kind == "batch":
        n = len(message) if isinstance(message, list) else 0
        return f"batch of {n}"
    ident = fmt_id(f.rpc_id)
    if f.kind in ("response", "error"):
        word = "result" if f.kind == "response" else "error"
        text = f"{word} of {f.method}" if f.method else f"{word} (unmatched)"
        text += f" {ident}" if ident else ""
        return text + (f" {fmt_ms(f.latency_ms)}" if f.latency_ms is not None else "")
    if f.method == vocab.UPDATE and f.update_kind:
        entity = (
            f.message_id or f.tool_call_id or f.terminal_id or f.plan_id or f.compaction_id or f.child_session_id or ""
        )
        return f"{f.update_kind} {entity}".rstrip()
    return f"{f.method or '?'} {ident}".rstrip()


def frame_flags(f: FrameRow) -> str:
    flags = []
    if f.parse != "ok" and f.kind != "invalid":  # an invalid frame says why in its WHAT column
        flags.append(f.parse)
    if f.unterminated:
        flags.append("unterminated")
    if f.redacted:
        flags.append(f"redacted {f.redacted}")
    return clean(" ".join(f"[{x}]" for x in flags))


_WHOLE = re.compile(r"^(?:[0-9.]+(?:ms|s|m)?|#.{0,12})$")  # a badge, a count, a short request id: never cut


def fit_what(what: str, n: int) -> str:
    """The WHAT column in n characters on a terminal: only long ids in it (a UUID message id, a hex request
    id) are cut, in the middle (`agent_message_chunk 6f1c2…5162`); the method or variant stays whole and a
    number is never cut (a latency badge, a short request id, a count). What is still too long overflows
    the column: frame_line then stacks the row (_stacked)."""
    parts = what.split(" ")
    over = len(what) - n
    for i in sorted(range(1, len(parts)), key=lambda k: -len(parts[k])):
        part = parts[i]
        if over > 0 and len(part) > 12 and "/" not in part and not _WHOLE.match(part):
            parts[i] = middle(part, max(9, len(part) - over))
            over -= len(part) - len(parts[i])
    return " ".join(parts)


def redaction_note(f: FrameRow) -> str:
    """How the stored copy differs from the wire's, for a redacted frame ('' for any other)."""
    if not f.redacted:
        return ""
    return f"redacted: {counted(f.redacted, 'value')} ({counted(f.length, 'byte')} stored, {f.wire_length} on the wire)"


def frame_line(f: FrameRow, base: float, style: Style = PLAIN, message: Any = ...) -> str:
    """`FRAME  TIME  DIR  KIND  WHAT  PREVIEW [FLAGS]`; TIME is seconds from the view's start. On a terminal
    too narrow for WHAT and a useful preview, the row stacks (see _stacked) rather than cut a number."""
    msg = f.message() if message is ... else message
    what = frame_what(f, msg)
    flags = frame_flags(f)
    kind = clean(f.kind)  # the index's own word; escaped all the same, as every column
    head = f"{f.id:>7} {f.mono - base:10.3f}  {ARROWS.get(f.direction, '???')}  {kind:<12}  "
    column = WHAT if style.width is None else max(20, min(WHAT, style.width - len(head) - 2 - MIN_PREVIEW))
    if style.width is not None and not style.wide:  # on a terminal a UUID id no longer pushes the preview
        what = fit_what(what, column)  # out of line; piped output keeps every id whole (grep)
        tail = len(flags) + 2 * bool(flags)
        if len(head) + max(len(what), column) + 2 + STACKED_PREVIEW + tail > style.width:
            return _stacked(head, frame_what(f, msg), preview(f, msg), flags, style)
    budget = PREVIEW if style.width is None else max(10, style.width - len(head) - max(len(what), column) - 2)
    budget -= 0 if style.width is None or not flags else len(flags) + 2
    prev = shorten(preview(f, msg), max(budget, 1))
    plain = f"{head}{what:<{column}}  {prev}".rstrip() + (f"  {flags}" if flags else "")
    if not style.color:
        return style.fit(plain, len(plain))
    kind_color = {"error": "31", "invalid": "31", "request": "36", "response": "32"}.get(f.kind)
    line = (
        f"{f.id:>7} "
        + style.paint(f"{f.mono - base:10.3f}", "2")
        + "  "
        + style.paint(ARROWS.get(f.direction, "???"), "33" if f.direction == "c2a" else "34")
        + "  "
        + style.paint(f"{kind:<12}", kind_color)
        + "  "
        + style.paint(f"{what:<{column}}", "1")
        + (f"  {prev}" if prev else "")
        + ("  " + style.paint(flags, "31") if flags else "")
    )
    return line if style.width is None or len(plain) <= style.width else style.fit(line, len(plain))


STACKED_PREVIEW = 10  # a frame row whose preview would get fewer columns stacks (_stacked)
STACK_INDENT = " " * 8  # the continuation lines of a stacked frame row start under TIME


def _stacked(head: str, what: str, prev: str, flags: str, style: Style) -> str:
    """A frame row on several lines: the head (and WHAT if it fits there), else WHAT wrapped at its spaces
    on lines of its own (a single word wider than the screen, never a number, loses its middle), then the
    preview and flags; every line within the width."""
    assert style.width is not None
    room = style.width - len(STACK_INDENT)
    fitted = fit_what(what, style.width - len(head))
    if len(head) + len(fitted) <= style.width:
        lines = [head + style.paint(fitted, "1")]
    else:
        wrapped = textwrap.wrap(fit_what(what, room), room, break_long_words=False, break_on_hyphens=False)
        lines = [head.rstrip()] + [STACK_INDENT + style.paint(middle(w, room), "1") for w in wrapped]
    tail = f"  {style.paint(flags, '31')}" if flags else ""
    text = shorten(prev, max(room - len(flags) - 2 * bool(flags), 1)) if prev else ""
    if text or flags:
        lines.append((STACK_INDENT + text + tail).rstrip() if text else STACK_INDENT + tail.lstrip())
    return "\n".join(lines)


def pretty(f: FrameRow, message: Any = ...) -> list[str]:
    """The message as indented JSON in its own key order; a frame that is not JSON as escaped text."""
    msg = f.message() if message is ... else message
    hint = f"; the whole frame: acp-relay show --frame {f.id} --raw"
    if msg is None:
        text = f.raw[: TEXT_MAX * 4].decode("utf-8", "backslashreplace").replace("\r", "\\r")
        return [clean(cut(text, TEXT_MAX, hint), TEXT_MAX + 200)]
    msg = abridged(msg, PRETTY_STRING_MAX, hint)
    return [escape(cut(line, TEXT_MAX, hint), json_text=True) for line in dumps_text(msg, indent=True).splitlines()]


# A string's JSON is at most 6 characters a character (\u001b), so a string cut to this many keeps its pretty
# line within TEXT_MAX: the note it carries says exactly how much it left out.
PRETTY_STRING_MAX = TEXT_MAX // 6
_ABRIDGE_DEPTH = 256  # deeper values are dumped as they are (orjson reads at most 1024 levels)


def abridged(value: Any, limit: int, hint: str = "", depth: int = 0) -> Any:
    """`value` with every string (and key) over `limit` characters cut, with a note of what is left out;
    the same object when nothing is that long. pretty() dumps the abridged copy: a 64 MiB string would
    otherwise be written out whole (orjson reserves several times its size) only to be cut afterwards."""
    if isinstance(value, str):
        return cut(value, limit, hint)
    if depth > _ABRIDGE_DEPTH:
        return value
    if isinstance(value, list):
        items = [abridged(v, limit, hint, depth + 1) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        pairs = [(cut(k, limit, hint), abridged(v, limit, hint, depth + 1)) for k, v in value.items()]
        same = all(k is k2 and v is v2 for (k, v), (k2, v2) in zip(pairs, value.items(), strict=True))
        return value if same else dict(pairs)
    return value


def frame_heading(f: FrameRow) -> str:
    parts = [
        f"frame {f.id}",
        f"connection {f.connection_id}",
        f"seq {f.seq}",
        f"{DIRECTION_WORDS.get(f.direction, f.direction)} ({f.direction})",
        fmt_time(f.ts, ms=True),
        f"t {f.mono:.3f}s",  # seconds since the connection started, as every listing prints them
        redaction_note(f) or counted(f.length, "byte"),
    ]
    return clean("  ".join(parts))


def frame_summary(f: FrameRow, message: Any = ...) -> str:
    msg = f.message() if message is ... else message
    bits = [f.kind, frame_what(f, msg)]
    if f.session_id:
        bits.append(f"session {f.session_id}")
    flags = frame_flags(f)
    if flags:
        bits.append(flags)
    return clean("  ".join(bits))


def frame_detail(f: FrameRow, related: list[tuple[str, FrameRow]], style: Style = PLAIN) -> list[str]:
    """--frame N: heading, summary and pretty JSON, then each related frame (its request or response)."""
    out = [style.paint(frame_heading(f), "1"), frame_summary(f)] + pretty(f)
    for label, r in related:
        delta = r.mono - f.mono
        out += ["", style.paint(f"{label}: {frame_heading(r)}  ({delta:+.3f}s)", "1"), frame_summary(r)] + pretty(r)
    return out


# -- JSON lines and raw bytes -----------------------------------------------------------------------------
def frame_record(
    f: FrameRow, base: float, message: Any = ..., members: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The index fields and the parsed message; a frame that is not JSON carries its bytes instead."""
    msg = f.message() if message is ... else message
    d: dict[str, Any] = {
        "frame": f.id,
        "connection": f.connection_id,
        "seq": f.seq,
        "direction": f.direction,
        "ts": f.ts,
        "t": round(f.mono - base, 6),
        "kind": f.kind,
        "method": f.method,
        "id": f.rpc_id,
        "session": f.session_id,
        "update": f.update_kind,
        "message_id": f.message_id,
        "tool_call_id": f.tool_call_id,
        "terminal_id": f.terminal_id,
        "plan_id": f.plan_id,
        "compaction_id": f.compaction_id,
        "sender_session_id": f.sender_session_id,
        "recipient_session_id": f.recipient_session_id,
        "child_session_id": f.child_session_id,
        "request_seq": f.request_seq,
        "latency_ms": f.latency_ms,
        "error_code": f.error_code,
        "parse": f.parse,
        "unterminated": bool(f.unterminated),
        "length": f.length,
    }
    if f.redacted:
        d["redacted"] = f.redacted
        d["wire_length"] = f.wire_length
    if members is not None:
        d["members"] = members
    d["message"] = msg
    if msg is None:
        try:
            d["raw"] = f.raw.decode("utf-8")
        except UnicodeDecodeError:
            d["raw_base64"] = base64.b64encode(f.raw).decode()
    return d


class RawWriter:
    """--raw: each frame's exact bytes and its \\n. A frame recorded without \\n gets none, so one direction
    reproduces its stream byte for byte; should another frame follow it, a \\n keeps them on separate lines."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.open_line = False

    def write(self, f: FrameRow) -> None:
        if self.open_line:
            self.out.write(b"\n")
        self.out.write(f.raw)
        self.open_line = bool(f.unterminated)
        if not self.open_line:
            self.out.write(b"\n")
