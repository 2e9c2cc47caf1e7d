"""Read what the relay recorded: the session listing, a session's or connection's frames, one frame, follow.

Query functions take a read-only sqlite3 connection and yield rows as SQLite hands them over: a session can
hold millions of frames, so nothing here loads a whole session. Each query is shaped for an index of
migrations 001/002 (see the comments there). Formatting lives in `render/`; the commands
are thin layers over both.
"""

from __future__ import annotations

import itertools
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..protocol.jsonrpc import id_key, loads, stored_id

# The read API in one place: the commands import these from here, wherever they are defined.
from .filters import Filters, TimeBound, parse_time, where_clause
from .liveness import pid_alive
from .rows import (
    DEFAULT_LIST_LIMIT,
    DIRECTIONS,
    FOLLOW_INTERVAL,
    FRAME_COLUMNS,
    KIND_ALIASES,
    KINDS,
    MEMBER_COLUMNS,
    SELECT_FRAMES,
    FrameRow,
    ShowError,
    UserError,
    compile_grep,
    frame_factory,
    open_db,
    reading,
    wait_for_db,
)
from .sessions import SessionSummary, ended_text, list_sessions, unanswered_entries
from .views import View, resolve_view, session_extra_ids, session_id_for

__all__ = [
    "DEFAULT_LIST_LIMIT",
    "DIRECTIONS",
    "FRAME_COLUMNS",
    "KIND_ALIASES",
    "KINDS",
    "MEMBER_COLUMNS",
    "Filters",
    "FrameRow",
    "SessionSummary",
    "ShowError",
    "UserError",
    "TimeBound",
    "View",
    "batch_members",
    "compile_grep",
    "connection_running",
    "ended_text",
    "follow",
    "get_frame",
    "iter_frames",
    "iter_messages",
    "list_sessions",
    "live_connection",
    "max_connection_id",
    "max_frame_id",
    "next_connection",
    "open_db",
    "reading",
    "parse_time",
    "related_frames",
    "resolve_view",
    "session_extra_ids",
    "session_id_for",
    "unanswered_entries",
    "wait_for_db",
]


# -- frames -----------------------------------------------------------------------------------------------
def iter_frames(
    conn: sqlite3.Connection,
    view: View,
    flt: Filters | None = None,
    *,
    limit: int | None = None,
    tail: int | None = None,
    upto: int | None = None,
) -> Iterator[FrameRow]:
    """The view's frames in recorded order, filtered; `limit` keeps the first N, `tail` the last N.

    A session view is the session's frames in its connection, led by the connection's initialize exchange
    and the request that created the session. Streams: only `tail` holds N rows, to put them back in order.
    `upto` (a frame id) leaves out what was committed after a given moment (see follow()).
    """
    select = SELECT_FRAMES
    flt = flt or Filters()
    if limit is not None and tail is not None:
        raise UserError("--limit and --tail do not combine; use one")
    where, params = where_clause(conn, view, flt)
    if upto is not None:
        where += " AND f.id <= ?"
        params = [*params, upto]
    desc = tail is not None
    order = "DESC" if desc else "ASC"
    n = tail if desc else limit
    lim = "" if n is None else f" LIMIT {int(n)}"
    cur = conn.cursor()
    cur.row_factory = frame_factory
    if view.session_id is None:
        rows: Iterable[FrameRow] = cur.execute(
            f"{select} WHERE f.connection_id = ? AND {where} ORDER BY f.seq {order}{lim}", (view.connection_id, *params)
        )
    else:
        main = cur.execute(
            f"{select} WHERE f.session_id = ? AND f.connection_id = ? AND {where} ORDER BY f.id {order}{lim}",
            (view.session_id, view.connection_id, *params),
        )
        extra_ids = session_extra_ids(conn, view.session_id, view.connection_id)
        extra: Iterable[FrameRow] = ()
        if extra_ids:
            cur2 = conn.cursor()
            cur2.row_factory = frame_factory
            extra = cur2.execute(
                f"{select} WHERE f.id IN ({', '.join(map(str, extra_ids))}) AND {where} ORDER BY f.id {order}{lim}",
                params,
            )
        rows = _merge_few(main, list(extra), desc)
    if n is not None:
        rows = itertools.islice(rows, n)
    if desc:
        yield from reversed(list(rows))
    else:
        yield from rows


def _merge_few(main: Iterable[FrameRow], few: list[FrameRow], desc: bool) -> Iterator[FrameRow]:
    """`main` merged by id with the few rows of `few` (ordered alike), each id once: for a long session a
    plain loop costs a third of a heapq.merge with a key."""
    i, n = 0, len(few)
    for r in main:
        while i < n and (few[i].id > r.id if desc else few[i].id < r.id):
            yield few[i]
            i += 1
        if i < n and few[i].id == r.id:
            i += 1
        yield r
        del r  # not held while the cursor reads the next row: a session of big frames costs one at a time
    yield from few[i:]


def connection_running(conn: sqlite3.Connection, cid: int) -> bool:
    """Still recording: status 'running' and, on this machine, the relay process still alive."""
    row = conn.execute(
        "SELECT status, coalesce(recorder_pid, relay_pid) FROM connections WHERE id = ?", (cid,)
    ).fetchone()
    if row is None or row[0] != "running":
        return False
    return not row[1] or pid_alive(row[1])  # a dead writer never got to write its last row


def live_connection(conn: sqlite3.Connection) -> int | None:
    """The newest connection still recording (its relay alive), or None."""
    for (cid,) in conn.execute("SELECT id FROM connections WHERE status = 'running' ORDER BY id DESC"):
        if connection_running(conn, cid):
            return int(cid)
    return None


def next_connection(
    conn: sqlite3.Connection,
    after: int,
    *,
    interval: float = FOLLOW_INTERVAL,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Wait for the first connection with an id above `after` (the next `acp-relay run`) and return it."""
    while True:
        row = conn.execute("SELECT min(id) FROM connections WHERE id > ?", (after,)).fetchone()
        if row[0] is not None:
            return int(row[0])
        sleep(interval)


def max_connection_id(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT coalesce(max(id), 0) FROM connections").fetchone()[0])


def max_frame_id(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT coalesce(max(id), 0) FROM frames").fetchone()[0]


def follow(
    conn: sqlite3.Connection,
    view: View,
    flt: Filters | None = None,
    *,
    limit: int | None = None,
    tail: int | None = None,
    interval: float = FOLLOW_INTERVAL,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[FrameRow]:
    """Like `tail -f`: what is there (limit/tail apply), then new frames as the relay commits them.

    Polls the read-only database every `interval` seconds for frames with id above the last one seen (a
    rowid range, so each poll costs only the new frames). Ends by itself once the connection is no longer
    running and nothing new arrived; Ctrl-C ends it too.
    """
    flt = flt or Filters()
    hi = max_frame_id(conn)
    yield from iter_frames(conn, view, flt, limit=limit, tail=tail, upto=hi)
    where, params = where_clause(conn, view, flt)
    sparams: list[Any]
    if view.session_id is None:
        scope, sparams = "+f.connection_id = ?", [view.connection_id]
    else:
        scope = (
            "+f.connection_id = ? AND (+f.session_id = ? OR (+f.kind = 'batch' AND EXISTS (SELECT 1 FROM "
            "batch_messages b WHERE b.frame_id = f.id AND b.session_id = ?)))"
        )
        sparams = [view.connection_id, view.session_id, view.session_id]
    cur = conn.cursor()
    cur.row_factory = frame_factory
    while True:
        running = connection_running(conn, view.connection_id)  # before reading: its last frames precede the status
        top = max_frame_id(conn)
        got = False
        if top > hi:
            for row in cur.execute(
                f"{SELECT_FRAMES} WHERE f.id > ? AND f.id <= ? AND {scope} AND {where} ORDER BY f.id",
                (hi, top, *sparams, *params),
            ):
                got = True
                yield row
            hi = top
        if not got and not running:
            return
        if not got:
            sleep(interval)


def get_frame(conn: sqlite3.Connection, frame_id: int) -> FrameRow:
    cur = conn.cursor()
    cur.row_factory = frame_factory
    row = cur.execute(f"{SELECT_FRAMES} WHERE f.id = ?", (frame_id,)).fetchone()
    if row is None:
        raise UserError(f"no frame {frame_id}")
    return row


def frame_in_view(conn: sqlite3.Connection, view: View, f: FrameRow) -> str | None:
    """None when the view lists the frame (`show -c N`, `show SESSION`), else why not: a frame of another
    connection, or of the connection but neither of the session nor one its view leads with."""
    if f.connection_id != view.connection_id:
        return f"frame {f.id} is in connection {f.connection_id}, not in {view.name}"
    sid = view.session_id
    if sid is None or f.session_id == sid or f.id in session_extra_ids(conn, sid, view.connection_id):
        return None
    return f"frame {f.id} is not in {view.name}"


def batch_members(conn: sqlite3.Connection, frame_id: int) -> list[dict[str, Any]]:
    """The index rows of a batch frame's members, in array order."""
    return [
        {**dict(zip(MEMBER_COLUMNS, r, strict=True)), "rpc_id": stored_id(r[MEMBER_COLUMNS.index("rpc_id")])}
        for r in conn.execute(
            f"SELECT {', '.join(MEMBER_COLUMNS)} FROM batch_messages WHERE frame_id = ? ORDER BY idx", (frame_id,)
        )
    ]


def _answers(cur: sqlite3.Cursor, request: FrameRow) -> list[FrameRow]:
    """The response to a request frame: first among its session's later answers, else the connection's."""
    answers = (
        "AND f.id > ? AND +f.kind IN ('response', 'error') AND +f.request_seq = ? "
        "AND +f.direction != ? ORDER BY f.id LIMIT 1"
    )
    args = (request.id, request.seq, request.direction)
    if request.session_id is not None:
        found = cur.execute(
            f"{SELECT_FRAMES} WHERE f.session_id = ? AND f.connection_id = ? {answers}",
            (request.session_id, request.connection_id, *args),
        ).fetchall()
        if found:
            return found
    return cur.execute(
        f"{SELECT_FRAMES} WHERE f.connection_id = ? AND f.seq > ? {answers}",
        (request.connection_id, request.seq, *args),
    ).fetchall()


def related_frames(conn: sqlite3.Connection, frame: FrameRow) -> list[tuple[str, FrameRow]]:
    """A response's request, a request's response(s); for a batch, each member's. Labelled, no duplicates."""
    cur = conn.cursor()
    cur.row_factory = frame_factory
    out: list[tuple[str, FrameRow]] = []
    seen = {frame.id}

    def add(label: str, rows: Iterable[FrameRow]) -> None:
        for r in rows:
            if r.id not in seen:
                seen.add(r.id)
                out.append((label, r))

    request_seqs = [frame.request_seq] if frame.request_seq is not None else []
    is_request = frame.kind == "request"
    if frame.kind == "batch":
        members = batch_members(conn, frame.id)
        request_seqs += [m["request_seq"] for m in members if m["request_seq"] is not None]
        is_request = any(m["kind"] == "request" for m in members)
    for seq in request_seqs:
        add(
            "request",
            cur.execute(f"{SELECT_FRAMES} WHERE f.connection_id = ? AND f.seq = ?", (frame.connection_id, seq)),
        )
    if is_request:
        add("response", _answers(cur, frame))
        add(
            "response",
            cur.execute(
                f"{SELECT_FRAMES} WHERE f.id IN (SELECT b.frame_id FROM batch_messages b JOIN frames g "
                "ON g.id = b.frame_id WHERE g.connection_id = ? AND b.request_seq = ?) ORDER BY f.id",
                (frame.connection_id, frame.seq),
            ).fetchall(),
        )
    return out


# -- for the materializer ---------------------------------------------------------------------------------
def iter_messages(conn: sqlite3.Connection, view: View) -> Iterator[tuple[FrameRow, Any, Any]]:
    """(frame, message, the request it answers or None) for every message of the view, batches unpacked.

    A frame that is not JSON comes once with message None. Only requests still waiting for their answer
    are kept, so memory follows the open requests, not the length of the session.
    """
    waiting: dict[int, list[dict[str, Any]]] = {}
    for f in iter_frames(conn, view):
        yield from _messages_of(conn, f, waiting)
        del f  # not held while the next row is read: a session of big frames costs one at a time


def _messages_of(
    conn: sqlite3.Connection, f: FrameRow, waiting: dict[int, list[dict[str, Any]]]
) -> Iterator[tuple[FrameRow, Any, Any]]:
    """iter_messages' items for one frame (its parsed value dies with this generator)."""
    msg = f.message()
    if f.kind == "batch" and isinstance(msg, list):
        seqs = [m["request_seq"] for m in batch_members(conn, f.id)]
        members = list(zip(msg, seqs + [None] * (len(msg) - len(seqs)), strict=False))
    elif msg is None:
        yield f, None, None
        return
    else:
        members = [(msg, f.request_seq)]
    for m, request_seq in members:
        request = None
        if isinstance(m, dict) and "id" in m:
            if "method" in m:
                waiting.setdefault(f.seq, []).append(m)
            elif request_seq is not None:
                request = _take_request(conn, f.connection_id, request_seq, m.get("id"), waiting)
        yield f, m, request


def _take_request(
    conn: sqlite3.Connection, cid: int, seq: int, rpc_id: Any, waiting: dict[int, list[dict[str, Any]]]
) -> dict[str, Any] | None:
    """The request at `seq` with this id: from those seen, else read back (it is outside the view)."""
    if seq not in waiting:
        row = conn.execute("SELECT raw FROM frames WHERE connection_id = ? AND seq = ?", (cid, seq)).fetchone()
        try:
            value = loads(row[0]) if row else None
        except (ValueError, UnicodeDecodeError, RecursionError):
            value = None
        waiting[seq] = [x for x in (value if isinstance(value, list) else [value]) if isinstance(x, dict)]
    candidates = waiting[seq]
    for i, req in enumerate(candidates):
        if id_key(req.get("id")) == id_key(rpc_id):
            del candidates[i]
            if not candidates:
                del waiting[seq]
            return req
    return None
