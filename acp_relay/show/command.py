"""`acp-relay show`: the session listing, a session's or connection's frames, one frame, the transcript.

`compute` reads what was asked for into one of four shapes (Listing, FrameDetail, Transcript, Frames; a
session's frames come lazily, one at a time, so a session of big frames, or one followed live, costs one
frame); `render` prints any of them in the mode they were read for (lines, raw, json, transcript).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any, NamedTuple

from ..protocol.check.rules import Finding
from ..protocol.check.verdict import verdict
from ..protocol.session_state import SessionState
from ..protocol.words import counted
from ..render import frames as fmt
from ..render.findings import finding_line
from ..render.transcript import materialize_view, render_transcript
from ..store.check_queries import check_inputs, frames_to_check
from ..store.pages import connection_ending
from ..store.queries import (
    DEFAULT_LIST_LIMIT,
    Filters,
    FrameRow,
    SessionSummary,
    UserError,
    View,
    batch_members,
    ended_text,
    follow,
    frame_in_view,
    get_frame,
    iter_frames,
    list_sessions,
    live_connection,
    max_connection_id,
    next_connection,
    related_frames,
    resolve_view,
    unanswered_entries,
)
from ..store.transport import relay_answers, transport_lines

log = logging.getLogger(__name__)

# A frame run --connect wrote to the editor itself (a request the remote never took): the agent did not send it.
RELAY_MARK = "  [made by acp-relay]"
RELAY_NOTE = "made by acp-relay: the remote agent never took this request (see the relay_answer transport event)"


# -- the command ------------------------------------------------------------------------------------------
@dataclass
class ShowOptions:
    """Everything `acp-relay show` was asked for, already parsed (see cli.py)."""

    session: str | None = None
    connection: str | None = None
    frame: int | None = None
    filters: Filters = field(default_factory=Filters)
    limit: int | None = None
    tail: int | None = None
    follow: bool = False
    mode: str = "lines"  # lines | raw | json | transcript
    all: bool = False
    follow_after: int | None = None  # -f alone after waiting for the database: the first connection above this


@dataclass
class Listing:
    """No SESSION: the sessions, newest first."""

    sessions: list[SessionSummary]
    mode: str


@dataclass
class FrameDetail:
    """--frame N: the frame, its request or its answers, and what `check` finds at it."""

    frame: FrameRow
    related: list[tuple[str, FrameRow]]
    members: dict[int, list[dict[str, Any]]]  # a batch's members by frame id (--json)
    made_by_relay: bool
    findings: list[Finding]
    mode: str


@dataclass
class Transcript:
    """--transcript: the view's messages folded by the materializer."""

    view: View
    state: SessionState


class Shown(NamedTuple):
    """A frame as `show` prints it: its batch members (--json) and whether the relay made it."""

    frame: FrameRow
    members: list[dict[str, Any]] | None
    made_by_relay: bool


@dataclass
class Ending:
    """How a connection ended, for the bottom of a full view (connection_ending's row), and its transport's
    events (transport_lines)."""

    connection: int
    row: tuple[Any, ...]
    transport: tuple[str, str | None, list[tuple[float, Any, float | None]]]


@dataclass
class Frames:
    """A session's or connection's frames, read lazily (followed: as they are recorded)."""

    view: View
    rows: Iterator[Shown]
    mode: str
    follow: bool = False
    ending: Ending | None = None  # the full view of an ended connection, in lines mode


Shape = Listing | FrameDetail | Transcript | Frames


def compute(conn: sqlite3.Connection, opts: ShowOptions | None = None) -> Shape:
    """What `show` was asked for (see Shape); notes on the way (a prefix that matched twice, `following
    connection N`) are logged as they happen: `show -f` may then wait for a relay to start."""
    opts = opts or ShowOptions()
    if opts.frame is not None:
        named = opts.session is not None or opts.connection is not None
        return frame_detail(
            conn, opts.frame, opts.mode, resolve_view(conn, opts.session, opts.connection) if named else None
        )
    if opts.session is None and opts.connection is None and not opts.follow:
        return listing(conn, opts)
    if opts.follow and opts.session is None and opts.connection is None:
        view = _live_or_next(conn, opts.follow_after)
    else:
        view = resolve_view(conn, opts.session or ("last" if opts.connection is None else None), opts.connection)
    for text in view.notes:
        log.info("%s", text)
    if opts.mode == "transcript":
        if opts.filters.active or opts.limit or opts.tail or opts.follow:
            raise UserError("--transcript shows a whole session: no filters, --limit, --tail or --follow")
        return Transcript(view, materialize_view(conn, view))
    return frames(conn, view, opts)


def _live_or_next(conn: sqlite3.Connection, after: int | None) -> View:
    """`show -f` alone: the connection recording now, else the next one to start (an ended session's old
    frames are not what a follower asked for). `after`: follow the first connection above it, running or
    not (show waited for the database: whatever was recorded since is what the follower waited for)."""
    cid = live_connection(conn) if after is None else None
    if cid is None:
        after = max_connection_id(conn) if after is None else after
        if after == max_connection_id(conn):
            log.info("no relay is recording: waiting for the next connection (Ctrl-C to stop)")
        cid = next_connection(conn, after)
    log.info("following connection %s", cid)
    return resolve_view(conn, None, cid)


def frame_detail(
    conn: sqlite3.Connection, frame_id: int, mode: str = "lines", within: View | None = None
) -> FrameDetail:
    """--frame N: the frame and its related frames; in lines mode also `check`'s findings at it. `within`: the
    session or connection named with it, which must list the frame (a UserError says where it is instead)."""
    f = get_frame(conn, frame_id)
    outside = frame_in_view(conn, within, f) if within is not None else None
    if outside is not None:
        raise UserError(outside, hint=f"acp-relay show --frame {frame_id} shows it wherever it is")
    related = related_frames(conn, f)
    members = {}
    if mode == "json":
        members = {r.id: batch_members(conn, r.id) for r in (f, *(r for _, r in related)) if r.kind == "batch"}
    made = f.id in relay_answers(conn, f.connection_id) if mode == "lines" else False
    found = frame_findings(conn, f.id, f.connection_id) if mode == "lines" else []
    return FrameDetail(f, related, members, made, found, mode)


def frame_findings(conn: sqlite3.Connection, frame_id: int, connection_id: int) -> list[Finding]:
    """What `acp-relay check` finds at this frame (its very verdict, transport rules included): its connection
    is checked up to the end (a request's "never answered" needs the rest of it)."""
    view = resolve_view(conn, None, connection_id)
    found, _ = verdict(frames_to_check(conn, view), **check_inputs(conn, view))
    return [x for x in found if x.frame == frame_id]


def listing(conn: sqlite3.Connection, opts: ShowOptions) -> Listing:
    """No SESSION: one row per session, newest first (the latest DEFAULT_LIST_LIMIT unless --all)."""
    if opts.filters.active or opts.tail is not None or opts.mode in ("raw", "transcript"):
        raise UserError(
            "filters, --tail, --raw and --transcript apply to one session: give SESSION (or `last`) or --connection N"
        )
    limit = None if opts.all else (opts.limit or DEFAULT_LIST_LIMIT)
    rows = list(list_sessions(conn, limit))
    if not rows:
        log.info("no recordings in this database yet (record with `acp-relay run -- AGENT...`)")
    return Listing(rows, opts.mode)


def frames(conn: sqlite3.Connection, view: View, opts: ShowOptions) -> Frames:
    """A session's or connection's frames (followed or not), read as they are printed."""
    if opts.follow:
        rows: Iterable[FrameRow] = follow(conn, view, opts.filters, limit=opts.limit, tail=opts.tail)
    else:
        rows = iter_frames(conn, view, opts.filters, limit=opts.limit, tail=opts.tail)
    made = relay_answers(conn, view.connection_id) if opts.mode != "raw" else {}
    full = opts.mode == "lines" and not (opts.follow or opts.filters.active or opts.limit or opts.tail)
    ending = _ending(conn, view.connection_id) if full else None
    return Frames(view, _shown(conn, rows, made, opts.mode == "json"), opts.mode, opts.follow, ending)


def _shown(conn: sqlite3.Connection, rows: Iterable[FrameRow], made: dict[int, int], json: bool) -> Iterator[Shown]:
    for f in rows:
        yield Shown(f, batch_members(conn, f.id) if json and f.kind == "batch" else None, f.id in made)
        del f  # not held while the next row is read: a session of big frames costs one at a time


def _ending(conn: sqlite3.Connection, cid: int) -> Ending | None:
    row = connection_ending(conn, cid)
    if row is None or row[0] == "running":
        return None
    return Ending(cid, row, transport_lines(conn, cid))


# -- output -----------------------------------------------------------------------------------------------
def render(shape: Shape, out: IO[bytes], style: fmt.Style | None = None) -> None:
    """Print what compute read, in the mode it was read for: --json and --raw too, so show has no separate
    render_json (its --json reads each batch's members, so the mode is chosen before reading)."""
    style = style or fmt.Style()
    if isinstance(shape, Listing):
        _listing(shape, out, style)
    elif isinstance(shape, FrameDetail):
        _frame_detail(shape, out, style)
    elif isinstance(shape, Transcript):
        _lines(out, render_transcript(shape.state, color=style.color))
    else:
        _frames(shape, out, style)


def _lines(out: IO[bytes], lines: Iterable[str]) -> None:
    for text in lines:
        out.write(text.encode("utf-8", "replace") + b"\n")


def _record(out: IO[bytes], f: FrameRow, base: float, members: list[dict[str, Any]] | None, **extra: Any) -> None:
    out.write(fmt.dumps_line({**extra, **fmt.frame_record(f, base, members=members)}))


def _listing(shape: Listing, out: IO[bytes], style: fmt.Style) -> None:
    if shape.mode == "json":
        for s in shape.sessions:
            out.write(fmt.dumps_line(s.to_json()))
    else:
        _lines(out, fmt.session_table(shape.sessions, style))


def _frame_detail(d: FrameDetail, out: IO[bytes], style: fmt.Style) -> None:
    if d.mode == "raw":
        fmt.RawWriter(out).write(d.frame)
    elif d.mode == "json":
        for label, r in [("frame", d.frame), *d.related]:
            _record(out, r, 0.0, d.members.get(r.id), role=label)
    else:
        _lines(out, fmt.frame_detail(d.frame, d.related, style))
        if d.made_by_relay:
            _lines(out, [RELAY_NOTE])
        if d.findings:
            n = len(d.findings)
            _lines(out, ["", style.paint(f"check: {n} finding{'s' if n != 1 else ''}", "1")])
            _lines(out, (finding_line(x, style) for x in d.findings))


def _frames(shape: Frames, out: IO[bytes], style: fmt.Style) -> None:
    raw = fmt.RawWriter(out) if shape.mode == "raw" else None
    base = shape.view.base
    for f, members, made in shape.rows:
        if raw is not None:
            raw.write(f)
        elif shape.mode == "json":
            _record(out, f, base, members, **({"made_by": "acp-relay"} if made else {}))
        else:
            out.write(
                (fmt.frame_line(f, base, style) + (RELAY_MARK if made else "")).encode("utf-8", "replace") + b"\n"
            )
        if shape.follow:
            out.flush()
        del f, members  # not held while the next row is read
    if shape.ending is not None:
        _lines(out, ending_lines(shape.ending))


def ending_lines(e: Ending) -> list[str]:
    """How a connection ended: status, who closed first, what was left unanswered or unrecorded, and the
    agent's last stderr lines, then its transport's events."""
    cid = e.connection
    status, code, sig, closed_by, error, frames, unrecorded, unanswered, tail, redaction = e.row
    lines = [
        f"-- connection {cid}: {ended_text(status, code, sig)}"
        + (f", closed first by {closed_by}" if closed_by else "")
        + f"; {counted(frames, 'frame')} recorded, {unrecorded} not recorded"
    ]
    if error:
        lines.append(f"   error: {fmt.clean(error)}")
    for p in unanswered_entries(unanswered):
        lines.append(
            f"   unanswered: {fmt.clean(str(p.get('method')))} {fmt.fmt_id(p.get('id'))} "
            f"(seq {fmt.clean(str(p.get('seq')))})"
        )
    try:
        if redaction and json.loads(redaction).get("enabled") is False:
            lines.append("   recorded with --no-redact")
    except (ValueError, AttributeError):
        pass
    if tail:
        lines.append("   agent stderr, last lines:")
        lines += [f"   | {fmt.clean(t)}" for t in tail.splitlines()]
    return [fmt.escape(line) for line in lines + transport_record(*e.transport)]  # every field, once more


def transport_record(transport: str, endpoint: str | None, events: list[tuple[float, Any, float | None]]) -> list[str]:
    """A remote connection's transport events, each marked `~`: HTTP requests with status and timing,
    SSE streams, WebSocket opens and closes (header values were redacted before they were stored)."""
    if transport == "stdio" and not events:
        return []
    lines = [f"   transport: {fmt.clean(transport)} {fmt.clean(endpoint or '')}".rstrip()]
    for mono, e, ms in events:
        d = e.details
        what = " ".join(
            str(x)
            for x in (
                e.side,
                e.method or "",
                e.event if e.event != "http" else "",
                e.status if e.status is not None else "",
                f"{ms:.1f}ms" if ms is not None else "",
                d.get("rpc") or "",
                f"session={e.session}" if e.session else "",
                f"id={d['id']}" if d.get("id") else "",
                d.get("reason") or d.get("error") or d.get("by") or "",
            )
            if x != ""
        )
        lines.append(f"   ~ {mono:9.3f}  {fmt.clean(what)}")
    return lines
