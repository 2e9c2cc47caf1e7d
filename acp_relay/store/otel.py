"""What `acp-relay otel export` reads: which sessions to send, and each one's origin."""

from __future__ import annotations

import sqlite3
from typing import Any

from .rows import ShowError


def connection_sessions(conn: sqlite3.Connection, cid: int) -> list[tuple[str, int]]:
    """(session id, connection id) of every session recorded in connection `cid`, oldest first."""
    if conn.execute("SELECT 1 FROM connections WHERE id = ?", (cid,)).fetchone() is None:
        raise ShowError(f"no connection {cid}")
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
