"""Reading a connection's transport events (migration 007's table), for check's transport rules."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import orjson

from ..protocol.check.transport import Event
from ..protocol.remote import RELAY_ANSWER


def transport_events(conn: sqlite3.Connection, cid: int) -> Iterator[Event]:
    """The connection's events in the order they were read; none for a database from before 007."""
    try:
        rows = conn.execute(
            "SELECT id, event, side, method, status, acp_connection_id, acp_session_id, details "
            "FROM transport_events WHERE connection_id = ? ORDER BY mono, id",
            (cid,),
        ).fetchall()
    except sqlite3.OperationalError:  # no such table: recorded before remote transports existed
        return
    for r in rows:
        try:
            details = orjson.loads(r[7]) if r[7] else {}
        except orjson.JSONDecodeError:
            details = {}
        yield Event(r[0], r[1], r[2], r[3], r[4], r[5], r[6], details if isinstance(details, dict) else {})


def transport_lines(
    conn: sqlite3.Connection, cid: int
) -> tuple[str, str | None, list[tuple[float, Event, float | None]]]:
    """(transport, endpoint, [(mono, event, elapsed_ms)...]) of a connection, for show's full view."""
    try:
        row = conn.execute("SELECT transport, endpoint FROM connections WHERE id = ?", (cid,)).fetchone()
        times = conn.execute(
            "SELECT mono, elapsed_ms FROM transport_events WHERE connection_id = ? ORDER BY mono, id", (cid,)
        ).fetchall()
    except sqlite3.OperationalError:  # a database from before 007: every connection was stdio
        return "stdio", None, []
    if row is None:
        return "stdio", None, []
    events = list(transport_events(conn, cid))
    return row[0], row[1], [(t[0], e, t[1]) for t, e in zip(times, events, strict=False)]


def relay_answers(conn: sqlite3.Connection, cid: int) -> dict[int, int]:
    """The frames the relay wrote to the editor itself, frame id -> its relay_answer event's id: for each such
    event, the first answer to its request id on the agent-to-editor side from its time on (the link queued
    the answer as it recorded the event, so nothing of the agent's with that id comes between)."""
    try:
        made = conn.execute(
            "SELECT id, mono, json_extract(details, '$.id') FROM transport_events "
            "WHERE connection_id = ? AND event = ? ORDER BY mono, id",
            (cid, RELAY_ANSWER),
        ).fetchall()
    except sqlite3.OperationalError:  # before 007: no remote recordings
        return {}
    out: dict[int, int] = {}
    for event_id, mono, rpc_id in made:
        for (frame_id,) in conn.execute(
            "SELECT id FROM frames WHERE connection_id = ? AND direction = 'a2c' AND kind IN ('response', 'error') "
            "AND rpc_id IS ? AND mono >= ? ORDER BY mono, id LIMIT 4",
            (cid, rpc_id, mono),
        ):
            if frame_id not in out:
                out[frame_id] = event_id
                break
    return out
