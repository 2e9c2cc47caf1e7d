"""`acp-relay prune` and `acp-relay delete`: forget old or unwanted recordings, safely beside live relays.

Deletes run in short transactions (a running relay's writer waits at most one of them, within its busy
timeout) and never touch a connection whose relay is still alive.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field

# sqlite-utils serves the maintenance commands (prune, delete), where its import time (~150 ms) does not
# matter; `show` opens with plain sqlite3 to stay fast, and the recorder's hot path is plain sqlite3 too
# (see store/writer.py and record/recorder.py).
import sqlite_utils

from ..protocol.errors import USAGE, UserError
from . import db
from .liveness import live_writer, mark_interrupted
from .search import FTS, MESSAGES, MESSAGES_FTS, TEXT

SEARCH_EXISTS = f"SELECT count(*) FROM sqlite_master WHERE name IN ('{TEXT}', '{FTS}')"

CHUNK = 5000  # frames deleted per transaction


def db_size(conn: sqlite3.Connection) -> int:
    """Bytes in use (pages not on the free list)."""
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    pages = conn.execute("PRAGMA page_count").fetchone()[0] - conn.execute("PRAGMA freelist_count").fetchone()[0]
    return pages * page_size


@dataclass
class Removed:
    """One connection prune deleted (or, with --dry-run, would delete)."""

    connection: int
    started_at: float
    label: str | None
    frames: int


@dataclass
class PruneResult:
    connections: int
    frames: int
    size_before: int
    size_after: int  # with --dry-run, the estimate of what deleting would leave
    removed: list[Removed] = field(default_factory=list)
    estimated: bool = False


def _live_connections(conn: sqlite3.Connection) -> set[int]:
    """Connections a relay is still writing: never deleted, whatever the options."""
    mark_interrupted(conn)
    candidates = conn.execute("SELECT id FROM connections WHERE status IN ('running', 'recorder_died')").fetchall()
    return {cid for (cid,) in candidates if live_writer(conn, cid) is not None}


def _searchable(conn: sqlite3.Connection) -> bool:
    return bool(conn.execute(SEARCH_EXISTS).fetchone()[0] == 2)


def _forget_text(conn: sqlite3.Connection, marks: str, ids: list[int]) -> None:
    """The search index's copies of the frames' text: per frame, and the whole messages their chunks made
    (their FTS5 triggers record the deletions)."""
    if _searchable(conn):
        conn.execute(f"DELETE FROM {TEXT} WHERE frame_id IN ({marks})", ids)
    if _has(conn, MESSAGES):
        conn.execute(
            f"DELETE FROM {MESSAGES} WHERE first_frame_id IN ({marks}) OR last_frame_id IN ({marks})", ids + ids
        )


def _has(conn: sqlite3.Connection, table: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone() is not None


def scrub(conn: sqlite3.Connection) -> None:
    """What deleted rows leave behind, gone: FTS5 keeps a deleted row's terms in its segments until they
    are merged ('optimize' merges them all), SQLite keeps deleted cells in free space and old pages in the
    WAL (secure_delete zeroes them; a TRUNCATE checkpoint empties the WAL when no reader holds it)."""
    for fts in (FTS, MESSAGES_FTS):
        if _has(conn, fts):
            conn.execute(f"INSERT INTO {fts} ({fts}) VALUES ('optimize')")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def secure(conn: sqlite3.Connection) -> None:
    """Deletes on this connection overwrite what they free (SQLite's secure_delete)."""
    conn.execute("PRAGMA secure_delete = ON")


def delete_connection(conn: sqlite3.Connection, cid: int) -> int:
    """Delete one connection and everything recorded on it, in short transactions. Returns frames deleted."""
    deleted = 0
    secure(conn)
    while True:
        conn.execute("BEGIN IMMEDIATE")
        ids = [r[0] for r in conn.execute("SELECT id FROM frames WHERE connection_id = ? LIMIT ?", (cid, CHUNK))]
        if ids:
            marks = ",".join("?" * len(ids))
            _forget_text(conn, marks, ids)
            conn.execute(f"DELETE FROM batch_messages WHERE frame_id IN ({marks})", ids)
            conn.execute(f"DELETE FROM frames WHERE id IN ({marks})", ids)
            conn.execute("COMMIT")
            deleted += len(ids)
            continue
        tables = sqlite_utils.Database(conn, recursive_triggers=False)  # its delete_where nests as a savepoint
        tables.table("stderr").delete_where("connection_id = ?", [cid])
        if tables.table("transport_events").exists():
            tables.table("transport_events").delete_where("connection_id = ?", [cid])
        tables.table("sessions").delete_where("connection_id = ?", [cid])
        tables.table("connections").delete_where("id = ?", [cid])
        conn.execute("COMMIT")
        return deleted


def prune(
    conn: sqlite3.Connection,
    *,
    older_than: float | None = None,
    max_size: int | None = None,
    dry_run: bool = False,
    now: float | None = None,
) -> PruneResult:
    """Delete whole connections, oldest first: those that ended before now - older_than, then more until
    the database holds at most max_size bytes. Then give the space back (VACUUM)."""
    now = time.time() if now is None else now
    before = db_size(conn)
    live = _live_connections(conn)
    candidates = [
        (cid, started, ended, size)
        for cid, started, ended, size in conn.execute(
            "SELECT id, started_at, coalesce(ended_at, started_at), bytes_c2a + bytes_a2c + bytes_stderr "
            "FROM connections ORDER BY started_at, id"
        )
        if cid not in live
    ]
    chosen: list[int] = []
    if older_than is not None:
        chosen = [cid for cid, _, ended, _ in candidates if ended < now - older_than]
    remaining = _choose_by_size(conn, candidates, chosen, before, max_size)
    everything = bool(chosen) and len(chosen) == len(candidates) and not live
    if everything:
        remaining = min(before, empty_size(conn))  # nothing left but the schema: no guess
    if not dry_run:
        db.clean_pages(0)  # view's temporary pages: copies of recordings, in one directory
    if dry_run:
        removed = [_removed(conn, cid, _frame_count(conn, cid)) for cid in chosen]
        after = max(0, int(remaining))
        guessed = bool(chosen) and not everything  # deleting nothing or everything, the size after is known
        return PruneResult(len(chosen), sum(r.frames for r in removed), before, after, removed, estimated=guessed)
    removed = []
    for cid in chosen:
        row = _removed(conn, cid, 0)
        removed.append(Removed(row.connection, row.started_at, row.label, delete_connection(conn, cid)))
    if max_size is not None:  # the estimate was rough: pages in use now tell the truth
        for cid, *_ in candidates:
            if db_size(conn) <= max_size:
                break
            if cid not in chosen:
                chosen.append(cid)
                row = _removed(conn, cid, 0)
                removed.append(Removed(row.connection, row.started_at, row.label, delete_connection(conn, cid)))
    if chosen:
        scrub(conn)
        vacuum(conn)
    return PruneResult(len(chosen), sum(r.frames for r in removed), before, db_size(conn), removed)


def _choose_by_size(
    conn: sqlite3.Connection,
    candidates: list[tuple[int, float, float, int]],
    chosen: list[int],
    before: int,
    max_size: int | None,
) -> float:
    """The size left once `chosen` go, after adding to it the oldest candidates until that fits max_size.
    What a vacuumed database keeps with no recording at all (its schema: a page per table and index), plus
    the recordings' share of the rest by their raw bytes (most of a recording's size; its index rows and
    search text are about proportional to them)."""
    floor = min(before, empty_size(conn))
    total = conn.execute("SELECT coalesce(sum(bytes_c2a + bytes_a2c + bytes_stderr), 0) FROM connections")
    per_byte = (before - floor) / max(1, total.fetchone()[0])
    remaining = before - sum(size for cid, *_, size in candidates if cid in chosen) * per_byte
    for cid, *_, size in candidates if max_size is not None else ():
        if remaining <= max_size:
            break
        if cid not in chosen:
            chosen.append(cid)
            remaining -= size * per_byte
    return remaining


# What prune empties when it deletes every connection; every other table (migrations, imports) keeps its rows.
RECORDING_TABLES = ("connections", "sessions", "frames", "batch_messages", "stderr", "transport_events")


def empty_size(conn: sqlite3.Connection) -> int:
    """The bytes this database would hold, vacuumed, with every recording deleted: its schema built again in
    memory (same page size), with the rows of the tables prune does not empty."""
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    mem = sqlite3.connect(":memory:", isolation_level=None)
    try:
        mem.execute(f"PRAGMA page_size = {int(page_size)}")
        kept: list[str] = []
        for kind, name, sql in conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid"
        ).fetchall():
            try:
                mem.execute(sql)
            except sqlite3.Error:  # a shadow table its virtual table already made
                continue
            if kind == "table" and not sql.upper().startswith("CREATE VIRTUAL") and name not in RECORDING_TABLES:
                kept.append(name)
        for name in kept:
            if name in (TEXT, MESSAGES):  # the search index's tables hold the recordings' text
                continue
            rows = conn.execute(f'SELECT * FROM "{name}"').fetchall()
            if rows:
                mem.executemany(f'INSERT INTO "{name}" VALUES ({",".join("?" * len(rows[0]))})', rows)
        return db_size(mem)
    finally:
        mem.close()


def _frame_count(conn: sqlite3.Connection, cid: int) -> int:
    return int(conn.execute("SELECT count(*) FROM frames WHERE connection_id = ?", (cid,)).fetchone()[0])


def _removed(conn: sqlite3.Connection, cid: int, frames: int) -> Removed:
    started, label = conn.execute("SELECT started_at, label FROM connections WHERE id = ?", (cid,)).fetchone()
    return Removed(cid, started, label, frames)


def vacuum(conn: sqlite3.Connection) -> None:
    """Give freed pages back to the file system; a relay writing meanwhile just waits for its lock."""
    conn.execute("VACUUM")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def delete_session(conn: sqlite3.Connection, session_id: str, connection_id: int) -> int:
    """Remove one session's frames (and batch members) in one connection, and its session row. Returns the
    frames deleted. A session its relay is still recording is refused (a UserError naming it)."""
    writer = live_writer(conn, connection_id)
    if writer is not None:
        raise UserError(
            f"connection {connection_id} is still being recorded (relay pid {writer})",
            USAGE,
            "delete it once that relay has exited; `acp-relay show` lists the sessions",
        )
    deleted = 0
    secure(conn)
    while True:
        conn.execute("BEGIN IMMEDIATE")
        ids = [
            r[0]
            for r in conn.execute(
                "SELECT id FROM frames WHERE session_id = ? AND connection_id = ? LIMIT ?",
                (session_id, connection_id, CHUNK),
            )
        ]
        ids += [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT b.frame_id FROM batch_messages b JOIN frames f ON f.id = b.frame_id "
                "WHERE b.session_id = ? AND f.connection_id = ? LIMIT ?",
                (session_id, connection_id, CHUNK),
            )
            if r[0] not in ids
        ]
        if not ids:
            conn.execute("DELETE FROM sessions WHERE session_id = ? AND connection_id = ?", (session_id, connection_id))
            conn.execute("COMMIT")
            scrub(conn)
            return deleted
        marks = ",".join("?" * len(ids))
        _forget_text(conn, marks, ids)
        conn.execute(f"DELETE FROM batch_messages WHERE frame_id IN ({marks})", ids)
        conn.execute(f"DELETE FROM frames WHERE id IN ({marks})", ids)
        conn.execute("COMMIT")
        deleted += len(ids)


def human_size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"
