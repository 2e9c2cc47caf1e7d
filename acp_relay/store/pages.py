"""A connection's and a session's row, as a page (`acp-relay view`), an export or replay describes them
(frames: queries.iter_messages)."""

from __future__ import annotations

import sqlite3
from typing import Any

from .views import View

_COLUMNS = (
    "started_at",
    "ended_at",
    "argv",
    "cwd",
    "label",
    "status",
    "exit_code",
    "exit_signal",
    "closed_by",
    "error",
    "protocol_version",
    "client_info",
    "agent_info",
    "frames",
    "bytes_c2a",
    "bytes_a2c",
    "bytes_stderr",
    "unanswered",
    "stderr_tail",
)


def connection_row(conn: sqlite3.Connection, cid: int) -> dict[str, Any]:
    """The connection's row as a dict of the columns a page header shows (empty when it is gone)."""
    row = conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM connections WHERE id = ?", (cid,)).fetchone()
    return dict(zip(_COLUMNS, row, strict=True)) if row else {}


def session_row(conn: sqlite3.Connection, view: View) -> dict[str, Any]:
    """The session's row (origin, cwd, title, parent) for a session view; empty for a connection view."""
    if view.session_id is None:
        return {}
    cols = ("origin", "first_seen", "last_seen", "cwd", "title", "parent_session_id")
    row = conn.execute(
        f"SELECT {', '.join(cols)} FROM sessions WHERE session_id = ? AND connection_id = ?",
        (view.session_id, view.connection_id),
    ).fetchone()
    return dict(zip(cols, row, strict=True)) if row else {}


_ENDING = (
    "status, exit_code, exit_signal, closed_by, error, frames, frames_unrecorded, unanswered, stderr_tail, redaction"
)


def connection_ending(conn: sqlite3.Connection, cid: int) -> tuple[Any, ...] | None:
    """How the connection ended, for the footer of `show`: (status, exit_code, exit_signal, closed_by, error,
    frames, frames_unrecorded, unanswered, stderr_tail, redaction), or None when it is gone."""
    row = conn.execute(f"SELECT {_ENDING} FROM connections WHERE id = ?", (cid,)).fetchone()
    return None if row is None else tuple(row)
