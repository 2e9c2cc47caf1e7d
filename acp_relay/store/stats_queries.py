"""The queries behind `acp-relay stats` (SQL stays in store/): aggregates over a view's frames and the
indexed look-aheads that find where each turn ended. The command folds the rows; nothing here formats."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

from .views import View, session_extra_ids

Scope = tuple[str, list[Any]]  # an SQL condition on `frames f` and its parameters


def scope(conn: sqlite3.Connection, view: View | None) -> Scope:
    """The frames of the view as an SQL condition on `f` (each branch has an index)."""
    if view is None:
        return "1", []
    if view.session_id is None:
        return "f.connection_id = ?", [view.connection_id]
    extra = ", ".join(str(i) for i in session_extra_ids(conn, view.session_id, view.connection_id))
    return f"((f.session_id = ? AND f.connection_id = ?) OR f.id IN ({extra}))", [view.session_id, view.connection_id]


def totals(conn: sqlite3.Connection) -> tuple[int, int]:
    """(connections, sessions) in the whole database."""
    row = conn.execute("SELECT (SELECT count(*) FROM connections), (SELECT count(*) FROM sessions)").fetchone()
    return int(row[0]), int(row[1])


def frame_counts(conn: sqlite3.Connection, where: Scope) -> Iterator[tuple[str, str, str | None, str | None, int, int]]:
    """(direction, kind, method, update variant, frames, bytes on the wire) per group."""
    sql = (
        "SELECT f.direction, f.kind, f.method, f.update_kind, count(*), sum(f.length + 1 - f.unterminated) "
        f"FROM frames f WHERE {where[0]} GROUP BY 1, 2, 3, 4"
    )
    yield from conn.execute(sql, where[1])


def member_counts(conn: sqlite3.Connection, where: Scope) -> Iterator[tuple[str, str | None, str | None, int]]:
    """(kind, method, update variant, messages) of the batch members in the view."""
    sql = (
        "SELECT b.kind, b.method, b.update_kind, count(*) FROM batch_messages b JOIN frames f ON f.id = b.frame_id "
        f"WHERE {where[0]} GROUP BY 1, 2, 3"
    )
    yield from conn.execute(sql, where[1])


def latencies(conn: sqlite3.Connection, where: Scope) -> Iterator[tuple[str | None, float]]:
    """(method, latency in ms) of every answer in the view, batch members included."""
    sql = (
        f"SELECT f.method, f.latency_ms FROM frames f WHERE {where[0]} AND f.kind IN ('response', 'error') "
        "AND f.latency_ms IS NOT NULL UNION ALL SELECT b.method, b.latency_ms FROM batch_messages b JOIN frames f "
        f"ON f.id = b.frame_id WHERE {where[0]} AND b.latency_ms IS NOT NULL"
    )
    yield from conn.execute(sql, where[1] + where[1])


def prompt_answers(conn: sqlite3.Connection, where: Scope) -> Iterator[tuple[Any, ...]]:
    """(connection, request seq, kind, mono, raw, frame id) of every session/prompt answer in the view."""
    sql = (
        f"SELECT f.connection_id, f.request_seq, f.kind, f.mono, f.raw, f.id FROM frames f WHERE {where[0]} "
        "AND f.method = 'session/prompt' AND f.kind IN ('response', 'error') AND f.request_seq IS NOT NULL"
    )
    yield from conn.execute(sql, where[1])


def prompts(conn: sqlite3.Connection, where: Scope) -> Iterator[tuple[int, int, int, str | None, float]]:
    """(frame id, connection, seq, session, mono) of every session/prompt request in the view, in order."""
    sql = (
        f"SELECT f.id, f.connection_id, f.seq, f.session_id, f.mono FROM frames f WHERE {where[0]} "
        "AND f.method = 'session/prompt' AND f.kind = 'request' AND f.direction = 'c2a' ORDER BY f.id"
    )
    yield from conn.execute(sql, where[1])


def updates_after(
    conn: sqlite3.Connection, sid: str, cid: int, start: int, kinds: str, a2c_only: bool
) -> Iterator[tuple[int, float, bytes]]:
    """(id, mono, raw) of the session's updates of `kinds` (an SQL `IN (...)` or `= '...'`) after frame
    `start`, in order, read lazily: the caller stops at the first it accepts."""
    direction = "AND +f.direction = 'a2c' " if a2c_only else ""
    yield from conn.execute(
        f"SELECT f.id, f.mono, f.raw FROM frames f WHERE f.session_id = ? AND f.connection_id = ? AND f.id > ? "
        f"{direction}AND +f.update_kind {kinds} ORDER BY f.id",
        (sid, cid, start),
    )


def member_updates_after(
    conn: sqlite3.Connection, sid: str, cid: int, start: int, kinds: str, a2c_only: bool
) -> Iterator[tuple[int, int, float, bytes]]:
    """(frame id, member index, mono, batch raw) of the same updates inside batches, in order."""
    direction = "AND +f.direction = 'a2c' " if a2c_only else ""
    yield from conn.execute(
        f"SELECT f.id, b.idx, f.mono, f.raw FROM batch_messages b JOIN frames f ON f.id = b.frame_id "
        f"WHERE b.session_id = ? AND f.connection_id = ? AND b.frame_id > ? {direction}AND b.update_kind {kinds} "
        "ORDER BY b.frame_id, b.idx",
        (sid, cid, start),
    )


def user_message_between(conn: sqlite3.Connection, sid: str, cid: int, lo: int, hi: int, mid: str) -> int | None:
    """The first frame of user message `mid` of the session strictly between frames lo and hi."""
    row = conn.execute(
        "SELECT f.id FROM frames f WHERE f.session_id = ? AND f.connection_id = ? AND f.id > ? AND f.id < ? "
        "AND +f.update_kind IN ('user_message', 'user_message_chunk') AND +f.message_id = ? ORDER BY f.id LIMIT 1",
        (sid, cid, lo, hi, mid),
    ).fetchone()
    return None if row is None else int(row[0])


def protocol_version(conn: sqlite3.Connection, cid: int) -> int | None:
    row = conn.execute("SELECT protocol_version FROM connections WHERE id = ?", (cid,)).fetchone()
    return row[0] if row and isinstance(row[0], int) else None
