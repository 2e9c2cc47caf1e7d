"""Lookups `rerun` and `diff` share: SESSION@CONNECTION, and the connection a relay process recorded.

A rerun of a session often gets the same session id from the agent (many agents number sessions from 1
in each process), so the commands also take `SESSION@N`: SESSION within connection N.
"""

from __future__ import annotations

import re
import sqlite3

from .views import View, resolve_view

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
