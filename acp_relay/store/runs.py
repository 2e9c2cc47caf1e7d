"""Lookups `rerun` and `diff` share: SESSION@CONNECTION, and the connection a relay process recorded.

A rerun of a session often gets the same session id from the agent (many agents number sessions from 1
in each process), so the commands also take `SESSION@N`: SESSION within connection N.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator

from .views import View, resolve_view, session_extra_ids

_AT = re.compile(r"^(?P<session>.+)@(?P<connection>\d+|last)$")


def resolve_spec(conn: sqlite3.Connection, text: str) -> View:
    """SESSION (id, unique prefix, `last`) or SESSION@N (within connection N) to a View; ShowError if none."""
    m = _AT.match(text)
    if m is None:
        return resolve_view(conn, text)
    return resolve_view(conn, m.group("session"), m.group("connection"))


def connection_of_relay(conn: sqlite3.Connection, relay_pid: int) -> int | None:
    """The newest connection recorded by the relay process `relay_pid` (None: it recorded none)."""
    row = conn.execute("SELECT max(id) FROM connections WHERE relay_pid = ?", (relay_pid,)).fetchone()
    return row[0] if row else None


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
