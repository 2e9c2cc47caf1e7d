"""What to show: a session or a connection, named in the one address grammar every command takes, resolved to a View."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass

from ..protocol.classify import RESULT_SESSION_METHODS
from .rows import UserError


# -- what to show -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class View:
    """A session within one connection, or a whole connection (session_id None)."""

    connection_id: int
    session_id: str | None
    # the `mono` shown as time 0: the connection's start, for a session too, so that a frame has one time in
    # every view (a session, its connection, --frame, the page); the session's own start was another base
    base: float
    protocol_version: int | None = None
    notes: tuple[str, ...] = ()  # things to tell the user on stderr (the session is in other connections too)

    @property
    def name(self) -> str:
        return f"connection {self.connection_id}" if self.session_id is None else f"session {self.session_id}"


@dataclass(frozen=True)
class Address:
    """What a command was told to read, parsed but not looked up: a session (an id, a unique prefix of one,
    or `last`), the connection it must be in (N or `last`), or, with no session, that whole connection."""

    session: str | None
    connection: int | str | None  # an id, or "last"
    at: bool = False  # the connection came from SESSION@N, not --connection

    @property
    def text(self) -> str:
        if self.session is None:
            return f"connection {self.connection}"
        return self.session if self.connection is None else f"{self.session}@{self.connection}"


_AT = re.compile(r"(?P<session>.+)@(?P<connection>[0-9]+|last)", re.DOTALL)  # fullmatch: an id may hold a newline


def parse_connection(text: str | int) -> int | str:
    """--connection's value (and the N of SESSION@N): a connection id or `last`."""
    if isinstance(text, int) or text == "last":
        return text
    if text.isascii() and text.isdigit():
        return int(text)
    raise UserError(f"--connection takes a connection number or `last`, not {text!r}")


def parse_address(session: str | None, connection: str | int | None = None) -> Address:
    """The one grammar every command takes a session in: ID, a unique prefix, `last`, ID@N (the session in
    connection N, `last` for N too), and --connection N|last (with no SESSION: the whole connection).

    SESSION@N is split here; resolve_view first tries the whole text as an id (an id may hold an `@`)."""
    cid = None if connection is None else parse_connection(connection)
    if session is None:
        return Address(None, cid)
    if session.endswith("…") and len(session) > 1:  # a prefix copied from a shortened session list
        session = session[:-1]
    if session == "":
        raise UserError("an empty session id: give an id, a prefix of one, `last`, or ID@N")
    m = _AT.fullmatch(session)
    if m is None:
        return Address(session, cid)
    at = parse_connection(m.group("connection"))
    if cid is not None and at != cid:
        raise UserError(f"{session} names connection {at} but --connection says {cid}: give one")
    return Address(m.group("session"), at, at=True)


def resolve_view(conn: sqlite3.Connection, session: str | None = None, connection: str | int | None = None) -> View:
    """SESSION (an id, a unique prefix, `last`, ID@N) and/or --connection N|last to a View; UserError if there
    is none, or when an id is in several connections and nothing says which."""
    if session is not None and "@" in session and _exists(conn, session, connection):
        address = Address(session, None if connection is None else parse_connection(connection))
    else:
        address = parse_address(session, connection)
    return resolve_address(conn, address)


def resolve_address(conn: sqlite3.Connection, address: Address) -> View:
    """An Address to a View (see resolve_view)."""
    cid = _connection_id(conn, address.connection) if address.connection is not None else None
    if address.session is None:
        if cid is None:
            raise UserError("which session? give a session id, a prefix of one, `last`, ID@N, or --connection N")
        return _view(conn, cid, None)
    if address.session == "last":
        sid, home = _last_session(conn, cid)
        return _view(conn, home, sid)
    sid = _match_session(conn, address.session, cid)
    if cid is not None:
        if conn.execute("SELECT 1 FROM sessions WHERE session_id = ? AND connection_id = ?", (sid, cid)).fetchone():
            return _view(conn, cid, sid)
        raise UserError(f"session {sid} is not in connection {cid}", hint="`acp-relay show` lists the sessions")
    homes = sorted(
        r[0] for r in conn.execute("SELECT DISTINCT connection_id FROM sessions WHERE session_id = ?", (sid,))
    )
    if len(homes) > 1:
        raise UserError(
            f"{sid} is in connections {', '.join(str(h) for h in homes)}: say {sid}@N",
            hint=f"{sid}@{homes[-1]} is the newest; `acp-relay show` lists them",
        )
    return _view(conn, homes[0], sid)


def _exists(conn: sqlite3.Connection, sid: str, connection: str | int | None) -> bool:
    if connection is None:
        return conn.execute("SELECT 1 FROM sessions WHERE session_id = ? LIMIT 1", (sid,)).fetchone() is not None
    cid = _connection_id(conn, parse_connection(connection))
    return (
        conn.execute("SELECT 1 FROM sessions WHERE session_id = ? AND connection_id = ?", (sid, cid)).fetchone()
        is not None
    )


def _connection_id(conn: sqlite3.Connection, connection: int | str) -> int:
    if connection == "last":
        cid = conn.execute("SELECT max(id) FROM connections").fetchone()[0]
        if cid is None:
            raise UserError("no connections recorded yet", hint="record one with `acp-relay run -- AGENT...`")
        return int(cid)
    if conn.execute("SELECT 1 FROM connections WHERE id = ?", (connection,)).fetchone() is None:
        raise UserError(f"no connection {connection}", hint="`acp-relay show` lists the connections (CONN)")
    return int(connection)


def session_id_for(conn: sqlite3.Connection, text: str) -> str:
    """SESSION as the commands take it (see resolve_view) to a session id; UserError if none or ambiguous."""
    view = resolve_view(conn, text)
    assert view.session_id is not None
    return view.session_id


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
        raise UserError(
            "no sessions recorded yet" if cid is None else f"connection {cid} has no session",
            hint="`acp-relay show` lists the sessions",
        )
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
        raise UserError(f"no session matches {text!r}{where}", hint="`acp-relay show` lists the sessions")
    if len(found) > 1:
        more = ", ..." if len(found) > 5 else ""
        raise UserError(
            f"{text!r} matches several sessions: {', '.join(found[:5])}{more}",
            hint="give more of the id; `acp-relay show` lists the sessions",
        )
    return found[0]


def _view(conn: sqlite3.Connection, cid: int, sid: str | None, notes: tuple[str, ...] = ()) -> View:
    version = conn.execute("SELECT protocol_version FROM connections WHERE id = ?", (cid,)).fetchone()[0]
    return View(cid, sid, 0.0, version, notes)


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
