"""The session listing of `acp-relay show`: one SessionSummary per session (and per connection without one)."""

from __future__ import annotations

import heapq
import itertools
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..protocol import vocab
from ..protocol.classify import RESULT_SESSION_METHODS
from ..protocol.jsonrpc import loads_or_none
from .rows import DEFAULT_LIST_LIMIT
from .views import session_extra_ids


# -- the session listing ----------------------------------------------------------------------------------
@dataclass
class SessionSummary:
    """One line of `acp-relay show`: a session, or a connection that never created one."""

    session_id: str | None
    connection_id: int
    started: float
    duration: float | None
    agent: str
    client: str | None
    protocol_version: int | None
    frames: int
    turns: int
    ended: str  # running | exit N | signal N | spawn failed | interrupted
    invalid: int  # the connection's invalid lines (they belong to no session)
    errors: int
    unanswered: int
    origin: str | None = None
    title: str | None = None
    label: str | None = None
    in_flight: int = 0  # a running connection's requests not answered yet: no anomaly, they are under way

    @property
    def anomalies(self) -> int:
        return self.invalid + self.errors + self.unanswered

    def to_json(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["anomalies"] = self.anomalies
        return d


def _name(info: str | None) -> str | None:
    value = loads_or_none(info)
    if isinstance(value, dict):
        name = value.get("name")
        if isinstance(name, str):
            version = value.get("version")
            return f"{name} {version}" if isinstance(version, str) else name
    return None


def _agent(argv: str | None, agent_info: str | None) -> str:
    name = _name(agent_info)
    if name:
        return name
    args = loads_or_none(argv)
    return os.path.basename(args[0]) if isinstance(args, list) and args and isinstance(args[0], str) else "?"


def ended_text(status: str | None, exit_code: int | None, exit_signal: int | None) -> str:
    """How a connection ended, in a few words."""
    if status == "running":
        return "running"
    if status == "spawn_failed":
        return "spawn failed"
    if status == "interrupted":
        return "interrupted"
    if status == "imported":
        return "imported"
    if exit_signal:
        return f"signal {exit_signal}"
    return "?" if exit_code is None else f"exit {exit_code}"


_CONNECTION_COLUMNS = (
    "id, started_at, ended_at, argv, status, exit_code, exit_signal, protocol_version, "
    "client_info, agent_info, frames, unanswered, label"
)


def list_sessions(conn: sqlite3.Connection, limit: int | None = DEFAULT_LIST_LIMIT) -> Iterator[SessionSummary]:
    """Sessions and session-less connections, newest first; counts come from index ranges, per listed row."""
    lim = -1 if limit is None else limit
    sessions = conn.execute(
        "SELECT first_seen, id, session_id, connection_id, last_seen, origin, title FROM sessions "
        "ORDER BY first_seen DESC, id DESC LIMIT ?",
        (lim,),
    )
    lonely = conn.execute(
        "SELECT started_at, id FROM connections c WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.connection_id = c.id) "
        "ORDER BY started_at DESC, id DESC LIMIT ?",
        (lim,),
    )
    rows = heapq.merge(
        ((r[0], 1, r) for r in sessions),
        ((r[0], 0, r) for r in lonely),
        reverse=True,
        key=lambda item: (item[0], item[1], item[2][1]),
    )
    connections: dict[int, tuple[Any, ...]] = {}
    for _, is_session, r in itertools.islice(rows, None if limit is None else limit):
        cid = r[3] if is_session else r[1]
        c = connections.get(cid)
        if c is None:
            c = connections[cid] = conn.execute(
                f"SELECT {_CONNECTION_COLUMNS} FROM connections WHERE id = ?", (cid,)
            ).fetchone()
        yield _summary(conn, c, r if is_session else None)


def _kind_counts(conn: sqlite3.Connection, session_id: str | None, cid: int) -> dict[tuple[str, str | None], int]:
    """(kind, method) -> frames of one session (None: the connection's frames outside any session)."""
    counts: dict[tuple[str, str | None], int] = {}
    for kind, method, n in conn.execute(
        "SELECT kind, method, count(*) FROM frames WHERE session_id IS ? AND connection_id = ? GROUP BY kind, method",
        (session_id, cid),
    ):
        counts[(kind, method)] = n
    return counts


def _in_flight(counts: dict[tuple[str, str | None], int], whole_connection: bool) -> int:
    """Requests not answered yet, of a running connection. A session-creating request and its answer count
    together or not at all: the recorder back-fills the request into the session, while its answer may name
    the session or not."""
    requests = sum(
        n for (k, m), n in counts.items() if k == "request" and (whole_connection or m not in RESULT_SESSION_METHODS)
    )
    answers = sum(
        n
        for (k, m), n in counts.items()
        if k in ("response", "error") and m is not None and (whole_connection or m not in RESULT_SESSION_METHODS)
    )
    return max(0, requests - answers)


def _summary(conn: sqlite3.Connection, c: tuple[Any, ...], s: tuple[Any, ...] | None) -> SessionSummary:
    """One listing line from a connection row and its session row (None: a connection without a session)."""
    (
        cid,
        started_at,
        ended_at,
        argv,
        status,
        exit_code,
        exit_signal,
        version,
        client_info,
        agent_info,
        _recorded,  # connections.frames: what was recorded, not what is left
        unanswered_json,
        label,
    ) = c
    session_id = s[2] if s else None
    counts = _kind_counts(conn, session_id, cid)
    invalid = sum(n for (k, _), n in counts.items() if k == "invalid")
    if s is not None:
        invalid = conn.execute(
            "SELECT count(*) FROM frames WHERE session_id IS NULL AND connection_id = ? AND kind = 'invalid'", (cid,)
        ).fetchone()[0]
    errors = sum(n for (k, _), n in counts.items() if k == "error")
    turns = counts.get(("request", vocab.PROMPT), 0)
    if status == "running":
        in_flight, unanswered = _in_flight(counts, s is None), 0
    else:
        in_flight = 0
        unanswered = sum(1 for p in unanswered_entries(unanswered_json) if p.get("session_id") == session_id)
    if s is not None:
        started, last_seen = s[0], s[4]
        duration: float | None = last_seen - started
        frames = sum(counts.values()) + len(session_extra_ids(conn, s[2], cid))  # as `show SESSION` lists them
    else:
        started = started_at
        duration = None if ended_at is None else ended_at - started_at
        # what `show -c N` lists: connections.frames is what was recorded, and `delete` takes sessions away
        frames = conn.execute("SELECT count(*) FROM frames WHERE connection_id = ?", (cid,)).fetchone()[0]
    return SessionSummary(
        session_id=session_id,
        connection_id=cid,
        started=started,
        duration=duration,
        agent=_agent(argv, agent_info),
        client=_name(client_info),
        protocol_version=version,
        frames=frames,
        turns=turns,
        ended=ended_text(status, exit_code, exit_signal),
        invalid=invalid,
        errors=errors,
        unanswered=unanswered,
        in_flight=in_flight,
        origin=s[5] if s else None,
        title=s[6] if s else None,
        label=label,
    )


def unanswered_entries(text: str | None) -> list[dict[str, Any]]:
    """Entries of connections.unanswered ({"c2a": [...], "a2c": [...]}); empty when absent or malformed."""
    value = loads_or_none(text)  # exact ids, however wide
    if not isinstance(value, dict):
        return []
    return [p for items in value.values() if isinstance(items, list) for p in items if isinstance(p, dict)]
