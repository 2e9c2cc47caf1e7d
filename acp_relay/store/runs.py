"""Reads `rerun` and `diff` share: the connection a relay process recorded, a session's raw lines.

(Sessions are named in the address grammar every command takes: store.views.resolve_view.)
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

from .views import View, session_extra_ids


def connection_of_relay(conn: sqlite3.Connection, relay_pid: int) -> int | None:
    """The newest connection recorded by the relay process `relay_pid` (None: it recorded none)."""
    row = conn.execute("SELECT max(id) FROM connections WHERE relay_pid = ?", (relay_pid,)).fetchone()
    return row[0] if row else None


def forget_unstarted(conn: sqlite3.Connection, cid: int) -> bool:
    """Delete connection `cid` if its agent could not be started (True): a rerun that never began leaves its
    baseline database as it found it."""
    from .retention import delete_connection

    row = conn.execute("SELECT status FROM connections WHERE id = ?", (cid,)).fetchone()
    if row is None or row[0] != "spawn_failed":
        return False
    delete_connection(conn, cid)
    return True


def iter_session_lines(conn: sqlite3.Connection, view: View) -> Iterator[tuple[int, str, float, bytes]]:
    """(seq, direction, ts, raw) of a session view's frames in recorded order, as iter_frames gives them
    (led by the initialize exchange and the creating request) without the index columns: for readers
    that parse every frame themselves (diff reads 100,000-frame sessions; the columns cost 3x the read)."""
    if view.session_id is None:
        raise ValueError("iter_session_lines reads a session view")
    sql = "SELECT id, seq, direction, ts, raw FROM frames WHERE "
    extra = conn.execute(
        sql + f"id IN ({', '.join(str(i) for i in session_extra_ids(conn, view.session_id, view.connection_id))})"
    ).fetchall()
    extra.sort()
    main = conn.execute(sql + "session_id = ? AND connection_id = ? ORDER BY id", (view.session_id, view.connection_id))
    i = 0
    for row in main:
        while i < len(extra) and extra[i][0] <= row[0]:
            if extra[i][0] != row[0]:
                yield extra[i][1:]
            i += 1
        yield row[1:]
    for row in extra[i:]:
        yield row[1:]
