"""The recorder's SQL: the row parameters it builds and the statements that insert them.

The Recorder itself (its queue, threads and spill journal) is record/recorder.py; import, the scripted
fixtures and tools/gen_db.py write rows through the same functions here, so a recording made by any of
them has the same shape.

Plain sqlite3 on purpose, not sqlite-utils (which prune and delete use): this is the hot path. Measured
on the development machine (50,000 rows of 200 bytes in 500-row transactions, WAL): executemany() of
this fixed INSERT with tuples takes 17 us a row, sqlite-utils' insert_all() 56 us (it needs a dict per
row and builds its SQL per batch), so plain sqlite3 keeps the recorder about three times faster here.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import orjson

from ..protocol import redact as redaction
from ..protocol.classify import RESULT_SESSION_METHODS, MessageIndex, classify_message
from ..protocol.framing import BIG_FRAME
from ..protocol.jsonrpc import dumps_text
from ..protocol.redact import Policy
from ..protocol.tracker import Frame, QuickRow, SessionSeen
from . import db
from .liveness import mark_interrupted

INSERT_FRAME = (
    "INSERT INTO frames (connection_id, seq, direction, ts, mono, length, raw, parse, kind, method, rpc_id, "
    "session_id, update_kind, details) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
# A run of QuickRow frames (record/recorder.py makes them): frames of one chunk that follow each other in
# seq and share direction, ts, mono, method, session, update kind and details, as one row of QUICK_WIDTH
# (seq of the first, direction, ts, mono, [raw, ...], method, session_id, update_kind, details). Each
# statement inserts up to RUN_ROWS of them with the shared values bound once and seq counted up in SQL: the
# binding of fourteen parameters per frame was the writer's largest cost after SQLite's own work, and it
# holds the GIL the indexing thread needs.
QUICK_WIDTH = 9
RUN_ROWS = 128
_QUICK_INSERT = (
    "INSERT INTO frames (connection_id, seq, direction, ts, mono, length, raw, parse, kind, method, rpc_id, "
    "session_id, update_kind, details) VALUES "
)
_run_statements: dict[tuple[int, int], str] = {}


def _run_insert(cid: int, n: int) -> str:
    """The statement for n frames of a run: parameters 1-8 the shared values, 9.. their raws."""
    sql = _run_statements.get((cid, n))
    if sql is None:
        sql = _run_statements[(cid, n)] = _QUICK_INSERT + ", ".join(
            f"({int(cid)}, ?1{f' + {k}' if k else ''}, ?2, ?3, ?4, length(?{9 + k}), ?{9 + k}, 'ok', "
            "'notification', ?5, NULL, ?6, ?7, ?8)"
            for k in range(n)
        )
    return sql


INSERT_BATCH_MESSAGE = (
    "INSERT INTO batch_messages (frame_id, idx, kind, method, rpc_id, session_id, update_kind, details) "
    "SELECT id, ?, ?, ?, ?, ?, ?, ? FROM frames WHERE connection_id = ? AND seq = ?"
)
# A request that learns its session from its result (session/new...): (session_id, connection_id, seq).
BACKFILL_FRAME = "UPDATE frames SET session_id = ? WHERE connection_id = ? AND seq = ? AND session_id IS NULL"
BACKFILL_MEMBER = (
    "UPDATE batch_messages SET session_id = ? WHERE frame_id = (SELECT id FROM frames WHERE connection_id = ? "
    "AND seq = ?) AND session_id IS NULL AND method IN ("
    + ", ".join(f"'{m}'" for m in sorted(RESULT_SESSION_METHODS))
    + ")"
)
UPSERT_SESSION = (
    "INSERT INTO sessions (session_id, connection_id, origin, first_seen, last_seen, cwd, title, parent_session_id) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (connection_id, session_id) DO UPDATE SET "
    "origin = excluded.origin, last_seen = excluded.last_seen, cwd = coalesce(excluded.cwd, cwd), "
    "title = excluded.title, parent_session_id = coalesce(excluded.parent_session_id, parent_session_id)"
)


INSERT_STDERR = "INSERT INTO stderr (connection_id, ts, mono, raw, unterminated) VALUES (?, ?, ?, ?, ?)"
# The columns a connection row's last update may set (finish_connection names them; nothing else can).
FINAL_COLUMNS = (
    "frames",
    "frames_unrecorded",
    "bytes_c2a",
    "bytes_a2c",
    "bytes_stderr",
    "protocol_version",
    "client_info",
    "agent_info",
    "ended_at",
    "status",
    "exit_code",
    "exit_signal",
    "closed_by",
    "error",
    "agent_pid",
    "unanswered",
    "stderr_tail",
    "recorder_rss_kb",
)


def is_busy(exc: BaseException) -> bool:
    """Another connection holds the lock (SQLITE_BUSY / SQLITE_LOCKED), as opposed to a broken database."""
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))


def connect_writer(path: Any) -> sqlite3.Connection:
    """The recorder's write connection: WAL checkpoints are the checkpointer's job, not the commit's."""
    conn = db.connect(path)
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    return conn


def begin_connection(conn: sqlite3.Connection, **row: Any) -> int:
    """In one write transaction: rows of recorders that died marked interrupted, and this connection's
    first row (open_connection's fields); returns its id."""
    conn.execute("BEGIN IMMEDIATE")
    mark_interrupted(conn)
    cid = open_connection(conn, **row)
    conn.execute("COMMIT")
    return cid


def rollback(conn: sqlite3.Connection) -> None:
    """End a failed transaction, leaving the page cache as insert_batch leaves it at commit."""
    try:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
            conn.execute(f"PRAGMA cache_size = -{CACHE_KB}")
    except sqlite3.Error:
        pass


def open_connection(
    conn: sqlite3.Connection,
    *,
    started_at: float,
    argv: list[str],
    cwd: str | None,
    label: str | None,
    relay_pid: int | None = None,
    recorder_pid: int | None = None,
    status: str = "running",
    redaction: Any = None,
    ended_at: float | None = None,
    connection_id: int | None = None,
    error: str | None = None,
    transport: str = "stdio",
    endpoint: str | None = None,
) -> int:
    """Insert a connection's first row (with the id given, or a new one); returns its id. A stdio connection
    names no transport columns: the schema's default says stdio (a database from before 007 has none)."""
    values: dict[str, Any] = {
        "id": connection_id,
        "started_at": started_at,
        "ended_at": ended_at,
        "argv": dumps_text(argv),
        "cwd": cwd,
        "relay_pid": relay_pid,
        "recorder_pid": recorder_pid,
        "label": label,
        "status": status,
        "redaction": json_or_null(redaction),
        "error": error,
    }
    if transport != "stdio" or endpoint is not None:
        values.update(transport=transport, endpoint=endpoint)
    cur = conn.execute(
        f"INSERT INTO connections ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})", list(values.values())
    )
    assert cur.lastrowid is not None
    return cur.lastrowid


def finish_connection(conn: sqlite3.Connection, cid: int, fields: Mapping[str, Any]) -> None:
    """The one update that ends a connection row: the FINAL_COLUMNS given, nothing else."""
    unknown = set(fields) - set(FINAL_COLUMNS)
    if unknown:
        raise ValueError(f"not a connection column: {sorted(unknown)}")
    names = [k for k in FINAL_COLUMNS if k in fields]
    if names:
        sets = ", ".join(f"{k} = ?" for k in names)
        conn.execute(f"UPDATE connections SET {sets} WHERE id = ?", (*(fields[k] for k in names), cid))


def connection_bytes(conn: sqlite3.Connection, cid: int) -> tuple[int, int, int] | None:
    """(bytes_c2a, bytes_a2c, bytes_stderr) of a connection, None when there is no such row."""
    row = conn.execute("SELECT bytes_c2a, bytes_a2c, bytes_stderr FROM connections WHERE id = ?", (cid,)).fetchone()
    return None if row is None else (row[0] or 0, row[1] or 0, row[2] or 0)


def stored_frames(conn: sqlite3.Connection, cid: int) -> tuple[int, int]:
    """(frames stored, highest seq stored) of a connection."""
    n, top = conn.execute(
        "SELECT count(*), coalesce(max(seq), 0) FROM frames WHERE connection_id = ?", (cid,)
    ).fetchone()
    return int(n), int(top)


def session_rows(cid: int, sessions: Iterable[SessionSeen]) -> list[tuple[Any, ...]]:
    """UPSERT_SESSION's parameters for the tracker's sessions."""
    return [
        (s.session_id, cid, s.origin, s.first_seen, s.last_seen, s.cwd, s.title, s.parent_session_id) for s in sessions
    ]


def upsert_sessions(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    """Insert or update session rows (UPSERT_SESSION parameters, see session_rows)."""
    if rows:
        conn.executemany(UPSERT_SESSION, rows)


def insert_batch(conn: sqlite3.Connection, cid: int, batch: Batch, began: Callable[[bool], None] | None = None) -> None:
    """One recorder batch in one transaction: frames in seq order, batch members, stderr, back-fills,
    sessions and the connection's running totals. `began(True)` once the write lock is ours, `began(False)`
    at the end: the time between is work, not waiting."""
    conn.execute("BEGIN IMMEDIATE")
    if began is not None:
        began(True)
    big = False
    for width, group in itertools.groupby(batch.rows, len):  # in order: frame ids follow seq
        if width == QUICK_WIDTH:
            insert_runs(conn, cid, group)
        else:
            big = _insert_full(conn, list(group)) or big
    if batch.members:
        conn.executemany(INSERT_BATCH_MESSAGE, batch.members)
    if batch.stderr:
        conn.executemany(INSERT_STDERR, batch.stderr)
    if batch.transport:
        conn.executemany(INSERT_TRANSPORT_EVENT, batch.transport)
    if batch.backfill:
        backfill_sessions(conn, batch.backfill)
    upsert_sessions(conn, batch.sessions)
    conn.execute(
        "UPDATE connections SET frames = frames + ?, bytes_c2a = ?, bytes_a2c = ?, bytes_stderr = ?, "
        "protocol_version = ?, client_info = ?, agent_info = ? WHERE id = ?",
        batch.connection,
    )
    conn.execute("COMMIT")
    if began is not None:
        began(False)
    if big:  # back to the default cache: a flood of small frames keeps a small recorder
        conn.execute(f"PRAGMA cache_size = -{CACHE_KB}")


INSERT_FRAME_BIG = INSERT_FRAME.replace("?, ?, ?, ?, ?, ?, ?, ?", "?, ?, ?, ?, ?, ?, zeroblob(?), ?", 1)
BLOB_PIECE = 1 << 20
CACHE_KB = 2000  # SQLite's default page cache (PRAGMA cache_size = -2000)
BIG_CACHE_KB = 16 << 10  # the most a big frame's transaction may cache (frames up to about 14 MiB)


def backfill_sessions(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    """Give requests the session their result named: (session_id, connection_id, seq) each."""
    conn.executemany(BACKFILL_FRAME, rows)
    conn.executemany(BACKFILL_MEMBER, rows)


def insert_runs(conn: sqlite3.Connection, cid: int, runs: Iterable[tuple[Any, ...]]) -> None:
    """Runs of QuickRow frames, in order (a multi-row VALUES inserts row after row). A run is cut into
    pieces of RUN_ROWS, then of powers of two (so that at most eight statements exist per connection);
    pieces of one size in a row go through one executemany."""
    size, params = 0, list[tuple[Any, ...]]()
    for seq, direction, ts, mono, raws, method, sid, kind, details in runs:
        at, left = 0, len(raws)
        while left:
            n = RUN_ROWS if left >= RUN_ROWS else 1 << (left.bit_length() - 1)
            if n != size and params:
                conn.executemany(_run_insert(cid, size), params)
                params = []
            size = n
            params.append((seq + at, direction, ts, mono, method, sid, kind, details, *raws[at : at + n]))
            at, left = at + n, left - n
    if params:
        conn.executemany(_run_insert(cid, size), params)


def _insert_full(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> bool:
    """INSERT_FRAME rows, a big frame's by itself. Returns whether there was a big one."""
    start = 0
    for i, row in enumerate(rows):
        if len(row[6]) >= BIG_FRAME:
            if i > start:
                conn.executemany(INSERT_FRAME, rows[start:i])
            _insert_big(conn, row)
            start = i + 1
    if start < len(rows):
        conn.executemany(INSERT_FRAME, rows[start:] if start else rows)
    return start > 0


def _insert_big(conn: sqlite3.Connection, row: tuple[Any, ...]) -> None:
    """A big frame: its row with a zeroblob, then its bytes streamed in (SQLite never copies it whole).

    With the default 2 MB page cache, a frame larger than the cache spilled its zeroed pages to the WAL
    before the bytes overwrote them: every page written twice. The cache grows to hold the frame for this
    transaction when that takes at most BIG_CACHE_KB (a bigger frame spills either way, and its memory
    matters more); _insert puts it back at commit."""
    raw = row[6]
    need_kb = len(raw) // 1024 + CACHE_KB
    if need_kb <= BIG_CACHE_KB:
        conn.execute(f"PRAGMA cache_size = -{need_kb}")
    cur = conn.execute(INSERT_FRAME_BIG, row[:6] + (len(raw),) + row[7:])
    view = memoryview(raw)
    assert cur.lastrowid is not None  # an INSERT into a rowid table always has one
    with conn.blobopen("frames", "raw", cur.lastrowid) as blob:
        for i in range(0, len(view), BLOB_PIECE):
            blob.write(view[i : i + BLOB_PIECE])


class Batch(NamedTuple):
    """One transaction's worth of parameters, prepared by the indexing thread for the writer thread."""

    rows: list[tuple[Any, ...]]
    members: list[tuple[Any, ...]]
    stderr: list[tuple[Any, ...]]
    backfill: list[tuple[Any, ...]]
    sessions: list[tuple[Any, ...]]
    connection: tuple[Any, ...]
    transport: list[tuple[Any, ...]] = []  # transport events (never mutated: each batch gets its own list)
    frames: int = 0  # frames in rows (a run of QUICK_WIDTH holds several)


INSERT_TRANSPORT_EVENT = (
    "INSERT INTO transport_events (connection_id, ts, mono, event, side, method, status, elapsed_ms, "
    "acp_connection_id, acp_session_id, details) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_EVENT_COLUMNS = ("event", "side", "method", "status", "ms", "connection", "session")


def transport_row(cid: int, payload: bytes, ts: float, mono: float) -> tuple[Any, ...]:
    """INSERT_TRANSPORT_EVENT's parameters for one event (a JSON object from a transport; the keys that are
    not columns go to details). A payload that is not such an object is kept whole, as its details."""
    try:
        event = orjson.loads(payload)
    except orjson.JSONDecodeError:
        event = None
    if not isinstance(event, dict):
        return (cid, ts, mono, "invalid", None, None, None, None, None, None, payload.decode("utf-8", "replace"))
    rest = {k: v for k, v in event.items() if k not in _EVENT_COLUMNS}
    name, side, method, status, ms, acp_cid, acp_sid = (event.get(k) for k in _EVENT_COLUMNS)
    return (cid, ts, mono, str(name), side, method, status, ms, acp_cid, acp_sid, dumps_text(rest) if rest else None)


def _redacted_quick_row(row: QuickRow, policy: Policy) -> tuple[Any, ...]:
    """A run of one (see insert_runs) for a QuickRow the policy may apply to. A redacted copy's columns
    are its own: a method, session or entity id the policy replaced is not kept beside it."""
    raw, n = redaction.redact_frame(row[4], policy, None, row[9])
    if not n:
        return (*row[:4], [raw], *row[5:8], orjson.dumps(row[8]).decode() if row[8] else None)
    m = classify_message(orjson.loads(raw)) if raw != redaction.WITHHELD else None
    if m is None or m.kind != "notification":
        m = MessageIndex("notification")  # withheld: nothing of it is known
    details: dict[str, Any] = {**(m.details or {}), "redacted": n, "wire_length": len(row[4])}
    return (*row[:4], [raw], m.method, m.session_id, m.update_kind, orjson.dumps(details).decode())


def frame_rows(
    cid: int,
    frames: list[Frame],
    rows: list[tuple[Any, ...]] | None = None,
    batches: list[tuple[Any, ...]] | None = None,
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The INSERT_FRAME and INSERT_BATCH_MESSAGE parameters for a list of frames (appended to the lists
    given). The recorder builds QuickRow's rows inline; these are the others'.

    A single message's row is built inline: it runs per frame at flood rates, and helper calls per row
    cost measurably. Batches and frames that are not JSON-RPC are rare and go through _batch_rows."""
    rows = [] if rows is None else rows
    batches = [] if batches is None else batches
    dumps = orjson.dumps
    for f in frames:
        ix = f.index
        if ix.kind == "batch" or not ix.messages:
            _batch_rows(cid, f, rows, batches)
            continue
        m = ix.messages[0]
        details = m.details
        if f.unterminated or f.redacted:
            details = {
                **(details or {}),
                **({"unterminated": 1} if f.unterminated else {}),
                **({"redacted": f.redacted, "wire_length": f.wire_length} if f.redacted else {}),
            }
        rows.append(
            (
                cid,
                f.seq,
                f.direction,
                f.ts,
                f.mono,
                len(f.raw),
                f.raw,
                ix.parse,
                m.kind,
                m.method,
                m.rpc_id,
                m.session_id,
                m.update_kind,
                dumps(details).decode() if details else None,
            )
        )
    return rows, batches


def _batch_rows(cid: int, f: Frame, rows: list[tuple[Any, ...]], batches: list[tuple[Any, ...]]) -> None:
    """frame_rows for a batch or a frame that is not JSON-RPC: its row, and a row per batch member."""
    ix = f.index
    dumps = orjson.dumps
    flags: dict[str, int] | None = {
        k: int(v)
        for k, v in (("unterminated", f.unterminated), ("redacted", f.redacted), ("wire_length", f.wire_length))
        if v
    } or None
    session = next((b.session_id for b in ix.messages if b.session_id), None)
    rows.append(
        (
            cid,
            f.seq,
            f.direction,
            f.ts,
            f.mono,
            len(f.raw),
            f.raw,
            ix.parse,
            ix.kind,
            None,
            None,
            session,
            None,
            dumps(flags).decode() if flags else None,
        )
    )
    for i, b in enumerate(ix.messages):
        batches.append(
            (
                i,
                b.kind,
                b.method,
                b.rpc_id,
                b.session_id,
                b.update_kind,
                dumps(b.details).decode() if b.details else None,
                cid,
                f.seq,
            )
        )


def json_or_null(value: Any) -> str | None:
    """A JSON column's value: NULL for None."""
    return None if value is None else dumps_text(value)
