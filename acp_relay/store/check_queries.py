"""What `acp-relay check` (and `view`'s check) reads besides a view's frames: which connections there are,
whether one ended, the rest of what protocol.check.verdict takes."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

from .queries import View, connection_running, iter_frames


def connection_ids(conn: sqlite3.Connection) -> list[int]:
    """Every recorded connection, oldest first (`check --all`)."""
    return [r[0] for r in conn.execute("SELECT id FROM connections ORDER BY id")]


def connection_ended(conn: sqlite3.Connection, cid: int) -> bool:
    """The connection is over (its pending requests will never be answered); a live relay's is not."""
    return not connection_running(conn, cid)


def session_origin(conn: sqlite3.Connection, cid: int, sid: str) -> str | None:
    """How the recorder learned of a session in a connection (session/new, subagent, seen...)."""
    row = conn.execute("SELECT origin FROM sessions WHERE connection_id = ? AND session_id = ?", (cid, sid)).fetchone()
    return row[0] if row else None


def frames_to_check(conn: sqlite3.Connection, view: View) -> Iterator[tuple[Any, ...]]:
    """The view's frames as the check engine reads them: (id, direction, raw, unterminated, session, mono).
    Neither the row nor the tuple is held here while the next row is read: a session of big frames costs
    one of them at a time."""
    for f in iter_frames(conn, view):
        row = (f.id, f.direction, f.raw, bool(f.unterminated), f.session_id, f.mono)
        del f
        yield row
        del row


def check_inputs(conn: sqlite3.Connection, view: View) -> dict[str, Any]:
    """protocol.check.verdict's keyword arguments for a view: its version, whether its connection ended, the
    session a subagent's parent announced outside it, the transport events and the frames the relay made."""
    from .transport import relay_answers, transport_events  # they import the check's Event: only when checking

    cid = view.connection_id
    sid = view.session_id
    known = (sid,) if sid is not None and session_origin(conn, cid, sid) == "subagent" else ()
    return {
        "version": view.protocol_version,
        "ended": connection_ended(conn, cid),
        "known": known,
        "events": list(transport_events(conn, cid)),
        "answers": relay_answers(conn, cid),
    }
