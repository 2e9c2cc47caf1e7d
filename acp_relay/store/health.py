"""The queries `acp-relay doctor` asks of a database: is it sound, and what did an entry's relay last record."""

from __future__ import annotations

import sqlite3
from typing import NamedTuple

import orjson


class LastConnection(NamedTuple):
    id: int
    started_at: float
    status: str
    exit_code: int | None
    frames: int
    error: str | None


def quick_check(conn: sqlite3.Connection) -> list[str]:
    """SQLite's own verdict on the file's structure: [] when sound, else its first complaints."""
    found = [line for (row,) in conn.execute("PRAGMA quick_check(5)") for line in str(row).splitlines()]
    return [] if found == ["ok"] else found[:5]


def last_connection(conn: sqlite3.Connection, label: str | None, agent: list[str]) -> LastConnection | None:
    """The newest connection an entry's relay recorded: by its --label, else by the agent command."""
    sql = "SELECT id, started_at, status, exit_code, frames, error FROM connections WHERE {} ORDER BY id DESC LIMIT 1"
    if label is not None:
        row = conn.execute(sql.format("label = ?"), (label,)).fetchone()
    else:
        row = conn.execute(sql.format("argv = ?"), (orjson.dumps(agent).decode(),)).fetchone()
    return LastConnection(*row) if row else None
