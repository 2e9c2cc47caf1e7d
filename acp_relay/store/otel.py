"""What `acp-relay otel export` reads: which sessions to send, and each one's origin."""

from __future__ import annotations

import sqlite3
from typing import Any

from ..protocol.errors import UserError
from .queries import SELECT_FRAMES, batch_members, frame_factory


def connection_sessions(conn: sqlite3.Connection, cid: int) -> list[tuple[str, int]]:
    """(session id, connection id) of every session recorded in connection `cid`, oldest first."""
    if conn.execute("SELECT 1 FROM connections WHERE id = ?", (cid,)).fetchone() is None:
        raise UserError(f"no connection {cid}")
    return [
        (r[0], r[1])
        for r in conn.execute(
            "SELECT session_id, connection_id FROM sessions WHERE connection_id = ? ORDER BY first_seen, id", (cid,)
        )
    ]


def sessions_since(conn: sqlite3.Connection, since: float | None) -> list[tuple[str, int]]:
    """(session id, connection id) of the sessions active at or after `since` (unix seconds; None: all)."""
    return [
        (r[0], r[1])
        for r in conn.execute(
            "SELECT session_id, connection_id FROM sessions WHERE last_seen >= ? ORDER BY first_seen, id",
            (since if since is not None else float("-inf"),),
        )
    ]


def session_row(conn: sqlite3.Connection, sid: str, cid: int) -> dict[str, Any]:
    """The origin, parent and cwd of a session in a connection (the root span's attributes)."""
    row = conn.execute(
        "SELECT origin, parent_session_id, cwd FROM sessions WHERE session_id = ? AND connection_id = ?", (sid, cid)
    ).fetchone()
    return {} if row is None else {"origin": row[0], "parent_session_id": row[1], "cwd": row[2]}


# -- spans `run --otlp` could not send (migration 008) ------------------------------------------------------
def mark_pending(
    conn: sqlite3.Connection, cid: int, sid: str, spans: list[tuple[str, str]], reason: str, now: float
) -> None:
    """Note (span id hex, name) pairs of a session as not sent; one short transaction."""
    with conn:
        conn.executemany(
            "INSERT OR IGNORE INTO otel_pending (connection_id, session_id, span_id, name, reason, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [(cid, sid, span_id, name, reason, now) for span_id, name in spans],
        )


def pending_sessions(conn: sqlite3.Connection) -> list[tuple[int, str, set[str]]]:
    """(connection id, session id, span ids) of every session with spans not sent yet, oldest first."""
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'otel_pending'").fetchone():
        return []  # a database older than migration 008, opened read-only: nothing can be pending
    out: dict[tuple[int, str], set[str]] = {}
    for cid, sid, span_id in conn.execute("SELECT connection_id, session_id, span_id FROM otel_pending ORDER BY id"):
        out.setdefault((cid, sid), set()).add(span_id)
    return [(cid, sid, ids) for (cid, sid), ids in out.items()]


def clear_pending(conn: sqlite3.Connection, cid: int, sid: str, span_ids: set[str]) -> None:
    """The collector has them now (or the session is gone)."""
    with conn:
        conn.executemany(
            "DELETE FROM otel_pending WHERE connection_id = ? AND session_id = ? AND span_id = ?",
            [(cid, sid, s) for s in span_ids],
        )


def find_relay_connection(conn: sqlite3.Connection, relay_pid: int, after: float) -> int | None:
    """The connection a relay with this pid started at or after `after` (unix seconds) is recording."""
    row = conn.execute(
        "SELECT id FROM connections WHERE relay_pid = ? AND started_at >= ? ORDER BY id DESC LIMIT 1",
        (relay_pid, after),
    ).fetchone()
    return row[0] if row else None


def frames_after(conn: sqlite3.Connection, cid: int, after_id: int, limit: int = 2000) -> list[Any]:
    """Up to `limit` of the connection's frames committed after frame `after_id`, in order, each with its
    batch members' index rows (a batch's members may belong to several sessions)."""
    cur = conn.cursor()
    cur.row_factory = frame_factory
    rows = cur.execute(
        f"{SELECT_FRAMES} WHERE f.connection_id = ? AND f.id > ? ORDER BY f.id LIMIT ?", (cid, after_id, limit)
    ).fetchall()
    return [(f, batch_members(conn, f.id) if f.kind == "batch" else None) for f in rows]
