"""What to show: a session or a connection, named by id, unique prefix or `last`, resolved to a View."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from ..protocol.classify import RESULT_SESSION_METHODS
from .rows import ShowError


# -- what to show -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class View:
    """A session within one connection, or a whole connection (session_id None)."""

    connection_id: int
    session_id: str | None
    base: float  # the `mono` shown as time 0: the session's first frame, or the connection's start
    protocol_version: int | None = None
    notes: tuple[str, ...] = ()  # things to tell the user on stderr (the session is in other connections too)

    @property
    def name(self) -> str:
        return f"connection {self.connection_id}" if self.session_id is None else f"session {self.session_id}"


def resolve_view(conn: sqlite3.Connection, session: str | None = None, connection: str | int | None = None) -> View:
    """SESSION (id, unique prefix, or `last`) and/or --connection N (or `last`) to a View; ShowError if none."""
    cid: int | None = None
    if connection is not None:
        if str(connection) == "last":
            cid = conn.execute("SELECT max(id) FROM connections").fetchone()[0]
            if cid is None:
                raise ShowError("no connections recorded yet")
        else:
            try:
                cid = int(connection)
            except ValueError:
                raise ShowError(f"--connection takes a number or `last`, not {connection!r}") from None
            if conn.execute("SELECT 1 FROM connections WHERE id = ?", (cid,)).fetchone() is None:
                raise ShowError(f"no connection {cid}")
    if session is None:
        if cid is None:
            raise ShowError("which session? give a session id, a prefix of one, `last`, or --connection N")
        return _view(conn, cid, None)
    if session == "last":
        sid, home = _last_session(conn, cid)
        return _view(conn, home, sid)
    sid = _match_session(conn, session, cid)
    where, params = (
        ("session_id = ? AND connection_id = ?", (sid, cid)) if cid is not None else ("session_id = ?", (sid,))
    )
    homes = [
        r[0]
        for r in conn.execute(
            f"SELECT connection_id FROM sessions WHERE {where} ORDER BY first_seen DESC, id DESC", params
        )
    ]
    if not homes:
        raise ShowError(f"session {sid} is not in connection {cid}")
    notes: tuple[str, ...] = ()
    if len(homes) > 1:
        others = ", ".join(str(h) for h in sorted(homes[1:]))
        notes = (
            f"session {sid} is also in connection(s) {others}; showing connection {homes[0]} "
            "(choose with --connection N)",
        )
    return _view(conn, homes[0], sid, notes)


def session_id_for(conn: sqlite3.Connection, text: str) -> str:
    """SESSION as the commands take it (an id, a unique prefix, or `last`) to a session id; ShowError if none."""
    return _last_session(conn, None)[0] if text == "last" else _match_session(conn, text, None)


def _last_session(conn: sqlite3.Connection, cid: int | None) -> tuple[str, int]:
    """The newest conversation (and its connection), not a subagent's child session that started after it:
    those are reached by their id."""
    scope, params = ("WHERE connection_id = ?", (cid,)) if cid is not None else ("", ())
    row = conn.execute(
        f"SELECT session_id, connection_id FROM sessions {scope} "
        "ORDER BY origin IS 'subagent', first_seen DESC, id DESC LIMIT 1",
        params,
    ).fetchone()
    if row is None:
        raise ShowError("no sessions recorded yet" if cid is None else f"connection {cid} has no session")
    return row[0], row[1]


def _match_session(conn: sqlite3.Connection, text: str, cid: int | None) -> str:
    scope, params = ("AND connection_id = ?", (cid,)) if cid is not None else ("", ())
    if conn.execute(f"SELECT 1 FROM sessions WHERE session_id = ? {scope} LIMIT 1", (text, *params)).fetchone():
        return text
    found = [
        r[0]
        for r in conn.execute(
            f"SELECT DISTINCT session_id FROM sessions WHERE session_id >= ? AND session_id < ? {scope} "
            "ORDER BY session_id LIMIT 6",
            (text, text + "\U0010ffff", *params),
        )
    ]
    if not found:
        where = "" if cid is None else f" in connection {cid}"
        raise ShowError(f"no session matches {text!r}{where} (list them with `acp-relay show`)")
    if len(found) > 1:
        more = ", ..." if len(found) > 5 else ""
        raise ShowError(f"{text!r} matches several sessions: {', '.join(found[:5])}{more}; give more of the id")
    return found[0]


def _view(conn: sqlite3.Connection, cid: int, sid: str | None, notes: tuple[str, ...] = ()) -> View:
    version = conn.execute("SELECT protocol_version FROM connections WHERE id = ?", (cid,)).fetchone()[0]
    base = 0.0
    if sid is not None:
        firsts = [
            r[0]
            for r in conn.execute(
                "SELECT mono FROM frames WHERE session_id = ? AND connection_id = ? ORDER BY id LIMIT 1", (sid, cid)
            )
        ]
        firsts += [r[1] for r in _creating_requests(conn, sid, cid)]
        base = min(firsts, default=0.0)
    return View(cid, sid, base, version, notes)


# Frames of a session view whose own session_id is not the session: the connection's initialize exchange,
# the request that created the session (session/new has no sessionId in its params, and recordings made
# before the recorder back-filled it have none; session/fork names the parent), and batches with a member
# in the session.
_INITIALIZE = "SELECT id FROM frames WHERE session_id IS NULL AND connection_id = ? AND +method = 'initialize'"
_BATCHES = (
    "SELECT DISTINCT b.frame_id FROM batch_messages b JOIN frames f ON f.id = b.frame_id "
    "WHERE b.session_id = ? AND f.connection_id = ? AND f.session_id IS NOT b.session_id"
)
_FIRST_FRAMES = 4  # a session's creating answer is among its first frames (after its backfilled request)


def _creating_requests(conn: sqlite3.Connection, sid: str, cid: int) -> list[tuple[int, float]]:
    """(id, mono) of requests outside the session answered in it by a result that names it."""
    out = []
    for kind, method, request_seq in conn.execute(
        "SELECT kind, method, request_seq FROM frames WHERE session_id = ? AND connection_id = ? ORDER BY id LIMIT ?",
        (sid, cid, _FIRST_FRAMES),
    ):
        if kind == "response" and method in RESULT_SESSION_METHODS and request_seq is not None:
            out += conn.execute(
                "SELECT id, mono FROM frames WHERE connection_id = ? AND seq = ? AND session_id IS NOT ?",
                (cid, request_seq, sid),
            ).fetchall()
    return out


def subagent_sessions(conn: sqlite3.Connection, sid: str, cid: int) -> list[str]:
    """The subagents session `sid` started in connection `cid`, and their own, depth first: their frames are
    part of the parent's turns. A fork shares the parent_session_id column with them but is a conversation of
    its own: its origin tells them apart."""
    children: list[str] = []
    todo = [sid]
    while todo:
        parent = todo.pop()
        for (child,) in conn.execute(
            "SELECT session_id FROM sessions WHERE connection_id = ? AND parent_session_id = ? AND session_id != ? "
            "AND origin = 'subagent'",
            (cid, parent, sid),
        ):
            if child not in children:
                children.append(child)
                todo.append(child)
    return children


def session_extra_ids(conn: sqlite3.Connection, sid: str, cid: int) -> list[int]:
    """Frame ids `show SESSION` lists beside the session's own: the initialize exchange, the request that
    created the session, batches with a member of it."""
    ids = {r[0] for r in conn.execute(_INITIALIZE, (cid,))}
    ids.update(r[0] for r in _creating_requests(conn, sid, cid))
    ids.update(r[0] for r in conn.execute(_BATCHES, (sid, cid)))
    return sorted(ids)
