"""`acp-relay show`: the session listing, a session's or connection's frames, one frame, the transcript."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..protocol.check.engine import check_frames
from ..render import frames as fmt
from ..render.findings import finding_line
from ..render.transcript import transcript_lines
from ..store.check_queries import connection_ended, frames_to_check
from ..store.pages import connection_ending
from ..store.queries import (
    DEFAULT_LIST_LIMIT,
    Filters,
    FrameRow,
    UserError,
    View,
    batch_members,
    ended_text,
    follow,
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


def run_show(
    conn: sqlite3.Connection, opts: ShowOptions, out: Any, err: Callable[[str], None], style: Any = None
) -> int:
    """Write what `show` prints to the binary stream `out`; notes go to `err`. Returns the exit status.

    Four outputs: one frame (--frame), the session listing (no SESSION), a transcript, or frames."""
    printer = _Printer(conn, out, style or fmt.Style())
    if opts.frame is not None:
        printer.one_frame(opts.frame, opts.mode)
    elif opts.session is None and opts.connection is None and not opts.follow:
        printer.listing(opts, err)
    else:
        if opts.follow and opts.session is None and opts.connection is None:
            view = _live_or_next(conn, err, opts.follow_after)
        else:
            view = resolve_view(conn, opts.session or ("last" if opts.connection is None else None), opts.connection)
        for note in view.notes:
            err(note)
        if opts.mode == "transcript":
            if opts.filters.active or opts.limit or opts.tail or opts.follow:
                raise UserError("--transcript shows a whole session: no filters, --limit, --tail or --follow")
            for text in transcript_lines(conn, view, color=printer.style.color):
                printer.line(text)
        else:
            printer.frames(view, opts)
    return 0


def _live_or_next(conn: sqlite3.Connection, err: Callable[[str], None], after: int | None) -> View:
    """`show -f` alone: the connection recording now, else the next one to start (an ended session's old
    frames are not what a follower asked for). `after`: follow the first connection above it, running or
    not (show waited for the database: whatever was recorded since is what the follower waited for)."""
    cid = live_connection(conn) if after is None else None
    if cid is None:
        after = max_connection_id(conn) if after is None else after
        if after == max_connection_id(conn):
            err("no relay is recording: waiting for the next connection (Ctrl-C to stop)")
        cid = next_connection(conn, after)
    err(f"following connection {cid}")
    return resolve_view(conn, None, cid)


class _Printer:
    """The output modes of `show`, writing to one binary stream."""

    def __init__(self, conn: sqlite3.Connection, out: Any, style: fmt.Style) -> None:
        self.conn, self.out, self.style = conn, out, style

    def line(self, text: str) -> None:
        self.out.write(text.encode("utf-8", "replace") + b"\n")

    def record(self, f: FrameRow, base: float, **extra: Any) -> None:
        members = batch_members(self.conn, f.id) if f.kind == "batch" else None
        self.out.write(fmt.dumps_line({**extra, **fmt.frame_record(f, base, members=members)}))

    def one_frame(self, frame_id: int, mode: str) -> None:
        """--frame N: the frame, then its request or its answers."""
        f = get_frame(self.conn, frame_id)
        related = related_frames(self.conn, f)
        if mode == "raw":
            fmt.RawWriter(self.out).write(f)
        elif mode == "json":
            for label, r in [("frame", f), *related]:
                self.record(r, 0.0, role=label)
        else:
            for text in fmt.frame_detail(f, related, self.style):
                self.line(text)
            if f.id in relay_answers(self.conn, f.connection_id):
                self.line(RELAY_NOTE)
            fid, cid = f.id, f.connection_id
            del f, related  # the check below reads the whole connection: not beside a big frame of it
            for text in frame_findings(self.conn, fid, cid, self.style):
                self.line(text)

    def listing(self, opts: ShowOptions, err: Callable[[str], None]) -> None:
        """No SESSION: one line (or JSON object) per session, newest first."""
        if opts.filters.active or opts.tail is not None or opts.mode in ("raw", "transcript"):
            raise UserError(
                "filters, --tail, --raw and --transcript apply to one session: give SESSION (or `last`) "
                "or --connection N"
            )
        limit = None if opts.all else (opts.limit or DEFAULT_LIST_LIMIT)
        rows = list(list_sessions(self.conn, limit))
        if not rows:
            err("no recordings in this database yet (record with `acp-relay run -- AGENT...`)")
        if opts.mode == "json":
            for s in rows:
                self.out.write(fmt.dumps_line(s.to_json()))
        else:
            for text in fmt.session_table(rows, self.style):
                self.line(text)

    def frames(self, view: View, opts: ShowOptions) -> None:
        """A session's or connection's frames (raw, JSON lines or one line each), followed or not."""
        if opts.follow:
            rows: Iterable[FrameRow] = follow(self.conn, view, opts.filters, limit=opts.limit, tail=opts.tail)
        else:
            rows = iter_frames(self.conn, view, opts.filters, limit=opts.limit, tail=opts.tail)
        raw = fmt.RawWriter(self.out) if opts.mode == "raw" else None
        made = relay_answers(self.conn, view.connection_id) if raw is None else {}
        for f in rows:
            if raw is not None:
                raw.write(f)
            elif opts.mode == "json":
                self.record(f, view.base, **({"made_by": "acp-relay"} if f.id in made else {}))
            else:
                self.line(fmt.frame_line(f, view.base, self.style) + (RELAY_MARK if f.id in made else ""))
            if opts.follow:
                self.out.flush()
            del f  # not held while the next row is read: a session of big frames costs one at a time
        if opts.mode == "lines" and not (opts.follow or opts.filters.active or opts.limit or opts.tail):
            for text in connection_record(self.conn, view.connection_id):
                self.line(text)


def frame_findings(conn: sqlite3.Connection, frame_id: int, connection_id: int, style: Any) -> list[str]:
    """What `acp-relay check` finds at this frame: its connection is checked up to the end (a request's
    "never answered" needs the rest of it)."""
    view = resolve_view(conn, None, connection_id)
    frames = frames_to_check(conn, view)
    found, _ = check_frames(frames, view.protocol_version, connection_ended(conn, connection_id))
    mine = [x for x in found if x.frame == frame_id]
    if not mine:
        return []
    return ["", style.paint(f"check: {len(mine)} finding{'s' if len(mine) != 1 else ''}", "1")] + [
        finding_line(x, style) for x in mine
    ]


def connection_record(conn: sqlite3.Connection, cid: int) -> list[str]:
    """How a connection ended, for the bottom of a full view: status, who closed first, what was left
    unanswered or unrecorded, and the agent's last stderr lines."""
    row = connection_ending(conn, cid)
    if row is None or row[0] == "running":
        return []
    status, code, sig, closed_by, error, frames, unrecorded, unanswered, tail, redaction = row
    lines = [
        f"-- connection {cid}: {ended_text(status, code, sig)}"
        + (f", closed first by {closed_by}" if closed_by else "")
        + f"; {frames} frames recorded, {unrecorded} not recorded"
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
    return lines + transport_record(conn, cid)


def transport_record(conn: sqlite3.Connection, cid: int) -> list[str]:
    """A remote connection's transport events, each marked `~`: HTTP requests with status and timing,
    SSE streams, WebSocket opens and closes (header values were redacted before they were stored)."""
    transport, endpoint, events = transport_lines(conn, cid)
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
