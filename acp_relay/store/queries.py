"""Read what the relay recorded: the session listing, a session's or connection's frames, one frame, follow.

Query functions take a read-only sqlite3 connection and yield rows as SQLite hands them over: a session can
hold millions of frames, so nothing here loads a whole session. Each query is shaped for an index of
migrations 001/002 (see the comments there). Formatting lives in `render/`; the commands
are thin layers over both.
"""

from __future__ import annotations

import heapq
import itertools
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from ..protocol.classify import RESULT_SESSION_METHODS
from ..protocol.jsonrpc import loads
from . import db
from .liveness import pid_alive

FRAME_COLUMNS = (
    "id",
    "connection_id",
    "seq",
    "direction",
    "ts",
    "mono",
    "length",
    "raw",
    "parse",
    "unterminated",
    "kind",
    "method",
    "rpc_id",
    "session_id",
    "update_kind",
    "message_id",
    "tool_call_id",
    "terminal_id",
    "plan_id",
    "compaction_id",
    "sender_session_id",
    "recipient_session_id",
    "child_session_id",
    "request_seq",
    "latency_ms",
    "error_code",
)
MEMBER_COLUMNS = (
    "idx",
    "kind",
    "method",
    "rpc_id",
    "session_id",
    "update_kind",
    "message_id",
    "tool_call_id",
    "terminal_id",
    "plan_id",
    "compaction_id",
    "sender_session_id",
    "recipient_session_id",
    "child_session_id",
    "request_seq",
    "latency_ms",
    "error_code",
)
_SELECT = "SELECT " + ", ".join(f"f.{c}" for c in FRAME_COLUMNS) + " FROM frames f"
KINDS = ("request", "notification", "response", "error", "batch", "invalid")
KIND_ALIASES = {
    "req": "request",
    "notif": "notification",
    "notify": "notification",
    "result": "response",
    "resp": "response",
    "err": "error",
}
DIRECTIONS = {"c2a": "c2a", "a2c": "a2c", "editor": "c2a", "agent": "a2c", "in": "c2a", "out": "a2c"}
DEFAULT_LIST_LIMIT = 30
FOLLOW_INTERVAL = 0.2


class ShowError(Exception):
    """A problem the user can fix (no database, unknown session, bad option): one line, exit status 1."""


class FrameRow(NamedTuple):
    """One row of `frames`, column for column."""

    id: int
    connection_id: int
    seq: int
    direction: str
    ts: float
    mono: float
    length: int
    raw: bytes
    parse: str
    unterminated: int
    kind: str
    method: str | None
    rpc_id: Any
    session_id: str | None
    update_kind: str | None
    message_id: str | None
    tool_call_id: str | None
    terminal_id: str | None
    plan_id: str | None
    compaction_id: str | None
    sender_session_id: str | None
    recipient_session_id: str | None
    child_session_id: str | None
    request_seq: int | None
    latency_ms: float | None
    error_code: int | None

    def message(self) -> Any:
        """The parsed JSON value (None when the frame is not JSON)."""
        if self.kind == "invalid" and self.parse != "not_jsonrpc" and self.parse != "cr":
            return None
        try:
            return loads(self.raw[:-1] if self.raw.endswith(b"\r") else self.raw)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return None


def _frame_factory(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> FrameRow:
    return FrameRow(*row)


# -- opening ----------------------------------------------------------------------------------------------
def open_db(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """Open a recording read-only (a relay may be writing it); a clear ShowError when it is not there."""
    path = Path(path)
    if not path.exists():
        raise ShowError(f"no database at {path} (record one with `acp-relay run`, or pass --db PATH)")
    try:
        conn = db.connect(path, readonly=True)
        conn.execute("SELECT id, session_id FROM frames LIMIT 0")
        conn.execute("SELECT id FROM sessions LIMIT 0")
    except sqlite3.DatabaseError as exc:
        raise ShowError(f"{path} is not an acp-relay database ({exc})") from None
    conn.create_function("regexp", 2, _regexp, deterministic=True)
    return conn


_PATTERNS: dict[str, re.Pattern[bytes]] = {}


def compile_grep(pattern: str) -> re.Pattern[bytes]:
    """A bytes regex: --grep searches the exact recorded bytes, invalid UTF-8 included."""
    try:
        return _PATTERNS.setdefault(pattern, re.compile(pattern.encode("utf-8")))
    except re.error as exc:
        raise ShowError(f"--grep: bad regular expression {pattern!r}: {exc}") from None


def _regexp(pattern: str, value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, str):
        value = value.encode("utf-8")
    return compile_grep(pattern).search(value) is not None


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

    @property
    def anomalies(self) -> int:
        return self.invalid + self.errors + self.unanswered

    def to_json(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["anomalies"] = self.anomalies
        return d


def _name(info: str | None) -> str | None:
    try:
        value = orjson.loads(info) if info else None
    except orjson.JSONDecodeError:
        return None
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
    try:
        args = orjson.loads(argv) if argv else []
    except orjson.JSONDecodeError:
        args = []
    return os.path.basename(args[0]) if args and isinstance(args[0], str) else "?"


def ended_text(status: str | None, exit_code: int | None, exit_signal: int | None) -> str:
    """How a connection ended, in a few words."""
    if status == "running":
        return "running"
    if status == "spawn_failed":
        return "spawn failed"
    if status == "interrupted":
        return "interrupted"
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


def _summary(conn: sqlite3.Connection, c: tuple[Any, ...], s: tuple[Any, ...] | None) -> SessionSummary:
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
        nframes,
        unanswered_json,
        label,
    ) = c
    session_id = s[2] if s else None
    counts: dict[tuple[str, str | None], int] = {}
    for kind, method, n in conn.execute(
        "SELECT kind, method, count(*) FROM frames WHERE session_id IS ? AND connection_id = ? GROUP BY kind, method",
        (session_id, cid),
    ):
        counts[(kind, method)] = n
    invalid = sum(n for (k, _), n in counts.items() if k == "invalid")
    if s is not None:
        invalid = conn.execute(
            "SELECT count(*) FROM frames WHERE session_id IS NULL AND connection_id = ? AND kind = 'invalid'", (cid,)
        ).fetchone()[0]
    errors = sum(n for (k, _), n in counts.items() if k == "error")
    turns = counts.get(("request", "session/prompt"), 0)
    if status == "running":
        requests = sum(n for (k, _), n in counts.items() if k == "request")
        answers = sum(
            n
            for (k, m), n in counts.items()
            if k in ("response", "error") and m is not None and (s is None or m not in RESULT_SESSION_METHODS)
        )
        unanswered = max(0, requests - answers)
    else:
        unanswered = sum(1 for p in _unanswered(unanswered_json) if p.get("session_id") == session_id)
    if s is not None:
        started, last_seen = s[0], s[4]
        duration: float | None = last_seen - started
        frames = sum(counts.values()) + len(_extra_ids(conn, session_id, cid))  # as `show SESSION` lists them
    else:
        started = started_at
        duration = None if ended_at is None else ended_at - started_at
        frames = nframes
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
        origin=s[5] if s else None,
        title=s[6] if s else None,
        label=label,
    )


def _unanswered(text: str | None) -> list[dict[str, Any]]:
    """Entries of connections.unanswered ({"c2a": [...], "a2c": [...]}); empty when absent or malformed."""
    try:
        value = orjson.loads(text) if text else None
    except orjson.JSONDecodeError:
        return []
    if not isinstance(value, dict):
        return []
    return [p for items in value.values() if isinstance(items, list) for p in items if isinstance(p, dict)]


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
    notes = ()
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


def _extra_ids(conn: sqlite3.Connection, sid: str, cid: int) -> list[int]:
    ids = {r[0] for r in conn.execute(_INITIALIZE, (cid,))}
    ids.update(r[0] for r in _creating_requests(conn, sid, cid))
    ids.update(r[0] for r in conn.execute(_BATCHES, (sid, cid)))
    return sorted(ids)


# -- filters ----------------------------------------------------------------------------------------------
_DURATION = re.compile(r"^\+?(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)?$")
_UNITS = {None: 1.0, "s": 1.0, "ms": 0.001, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class TimeBound:
    """--since/--until: seconds on the shown time axis (relative), or a wall-clock instant (absolute)."""

    value: float
    absolute: bool


def parse_time(text: str) -> TimeBound:
    """`12.5`, `+90s`, `2m`, `-0.5` (relative to the shown time 0), or an ISO date/time in local time."""
    t = text.strip()
    neg = t.startswith("-")
    m = _DURATION.match(t[1:] if neg else t)
    if m:
        value = float(m.group(1)) * _UNITS[m.group(2)]
        return TimeBound(-value if neg else value, False)
    try:
        dt = datetime.fromisoformat(t)
    except ValueError:
        raise ShowError(
            f"cannot read the time {text!r}: give seconds as shown (12.5, 90s, 2m) or a date "
            "and time (2026-01-31T14:05:00)"
        ) from None
    return TimeBound(dt.timestamp(), True)


@dataclass(frozen=True)
class Filters:
    """Combinable frame filters (all must match; several values of one option are alternatives)."""

    methods: tuple[str, ...] = ()  # globs on the method (a response's is its request's)
    direction: str | None = None  # c2a | a2c
    kinds: tuple[str, ...] = ()
    updates: tuple[str, ...] = ()  # globs on the session/update variant
    grep: str | None = None  # regex over the raw bytes
    since: TimeBound | None = None
    until: TimeBound | None = None
    errors: bool = False  # error responses, invalid or flagged frames, requests left unanswered

    @classmethod
    def build(
        cls,
        *,
        methods: Iterable[str] = (),
        direction: str | None = None,
        kinds: Iterable[str] = (),
        updates: Iterable[str] = (),
        grep: str | None = None,
        since: str | None = None,
        until: str | None = None,
        errors: bool = False,
    ) -> Filters:
        """From command-line text, checking each value (ShowError on a bad one)."""
        norm_kinds = []
        for k in kinds:
            k2 = KIND_ALIASES.get(k.lower(), k.lower())
            if k2 not in KINDS:
                raise ShowError(f"--kind must be one of {', '.join(KINDS)}, not {k!r}")
            norm_kinds.append(k2)
        d = None
        if direction is not None:
            d = DIRECTIONS.get(direction.lower())
            if d is None:
                raise ShowError(
                    f"--direction must be c2a (editor to agent) or a2c (agent to editor), not {direction!r}"
                )
        if grep is not None:
            compile_grep(grep)
        return cls(
            tuple(methods),
            d,
            tuple(norm_kinds),
            tuple(updates),
            grep,
            parse_time(since) if since else None,
            parse_time(until) if until else None,
            errors,
        )

    @property
    def active(self) -> bool:
        return bool(
            self.methods
            or self.direction
            or self.kinds
            or self.updates
            or self.grep
            or self.since
            or self.until
            or self.errors
        )


def _message_conditions(flt: Filters, p: str) -> tuple[list[str], list[Any]]:
    """Conditions on one message's index columns, for a frame (p='+f.') or a batch member (p='b.')."""
    conds: list[str] = []
    params: list[Any] = []
    if flt.kinds:
        conds.append(f"{p}kind IN ({', '.join('?' * len(flt.kinds))})")
        params += flt.kinds
    if flt.methods:
        conds.append("(" + " OR ".join(f"{p}method GLOB ?" for _ in flt.methods) + ")")
        params += flt.methods
    if flt.updates:
        conds.append("(" + " OR ".join(f"{p}update_kind GLOB ?" for _ in flt.updates) + ")")
        params += flt.updates
    return conds, params


def _where(conn: sqlite3.Connection, view: View, flt: Filters) -> tuple[str, list[Any]]:
    """The filters as one SQL condition. Columns carry a unary + so no filter steals the view's index."""
    parts: list[str] = []
    params: list[Any] = []
    conds, cparams = _message_conditions(flt, "+f.")
    if conds:
        mconds, mparams = _message_conditions(flt, "b.")
        parts.append(
            f"(({' AND '.join(conds)}) OR (+f.kind = 'batch' AND EXISTS (SELECT 1 FROM batch_messages b "
            f"WHERE b.frame_id = f.id AND {' AND '.join(mconds)})))"
        )
        params += cparams + mparams
    if flt.direction:
        parts.append("+f.direction = ?")
        params.append(flt.direction)
    for bound, op in ((flt.since, ">="), (flt.until, "<=")):
        if bound is not None:
            if bound.absolute:
                parts.append(f"+f.ts {op} ?")
                params.append(bound.value)
            else:
                parts.append(f"+f.mono {op} ?")
                params.append(view.base + bound.value)
    if flt.errors:
        pending = sorted(
            {
                p["seq"]
                for p in _unanswered(
                    conn.execute("SELECT unanswered FROM connections WHERE id = ?", (view.connection_id,)).fetchone()[0]
                )
                if isinstance(p.get("seq"), int) and (view.session_id is None or p.get("session_id") == view.session_id)
            }
        )
        alts = [
            "+f.kind IN ('error', 'invalid')",
            "+f.parse != 'ok'",
            "+f.unterminated = 1",
            "(+f.kind = 'batch' AND EXISTS (SELECT 1 FROM batch_messages b WHERE b.frame_id = f.id "
            "AND b.kind IN ('error', 'invalid')))",
        ]
        if pending:
            alts.append(f"+f.seq IN ({', '.join(str(s) for s in pending)})")
        parts.append("(" + " OR ".join(alts) + ")")
    if flt.grep is not None:
        parts.append("f.raw REGEXP ?")
        params.append(flt.grep)
    return (" AND ".join(parts) or "1"), params


# -- frames -----------------------------------------------------------------------------------------------
def iter_frames(
    conn: sqlite3.Connection,
    view: View,
    flt: Filters | None = None,
    *,
    limit: int | None = None,
    tail: int | None = None,
    upto: int | None = None,
) -> Iterator[FrameRow]:
    """The view's frames in recorded order, filtered; `limit` keeps the first N, `tail` the last N.

    A session view is the session's frames in its connection, led by the connection's initialize exchange
    and the request that created the session. Streams: only `tail` holds N rows, to put them back in order.
    `upto` (a frame id) leaves out what was committed after a given moment (see follow()).
    """
    select = _SELECT
    flt = flt or Filters()
    if limit is not None and tail is not None:
        raise ShowError("--limit and --tail do not combine; use one")
    where, params = _where(conn, view, flt)
    if upto is not None:
        where += " AND f.id <= ?"
        params = [*params, upto]
    desc = tail is not None
    order = "DESC" if desc else "ASC"
    n = tail if desc else limit
    lim = "" if n is None else f" LIMIT {int(n)}"
    cur = conn.cursor()
    cur.row_factory = _frame_factory
    if view.session_id is None:
        rows: Iterable[FrameRow] = cur.execute(
            f"{select} WHERE f.connection_id = ? AND {where} ORDER BY f.seq {order}{lim}", (view.connection_id, *params)
        )
    else:
        main = cur.execute(
            f"{select} WHERE f.session_id = ? AND f.connection_id = ? AND {where} ORDER BY f.id {order}{lim}",
            (view.session_id, view.connection_id, *params),
        )
        extra_ids = _extra_ids(conn, view.session_id, view.connection_id)
        extra: Iterable[FrameRow] = ()
        if extra_ids:
            cur2 = conn.cursor()
            cur2.row_factory = _frame_factory
            extra = cur2.execute(
                f"{select} WHERE f.id IN ({', '.join(map(str, extra_ids))}) AND {where} ORDER BY f.id {order}{lim}",
                params,
            )
        rows = _merge_few(main, list(extra), desc)
    if n is not None:
        rows = itertools.islice(rows, n)
    if desc:
        yield from reversed(list(rows))
    else:
        yield from rows


def _merge_few(main: Iterable[FrameRow], few: list[FrameRow], desc: bool) -> Iterator[FrameRow]:
    """`main` merged by id with the few rows of `few` (ordered alike), each id once: for a long session a
    plain loop costs a third of heapq.merge with a key."""
    i, n = 0, len(few)
    for r in main:
        while i < n and (few[i].id > r.id if desc else few[i].id < r.id):
            yield few[i]
            i += 1
        if i < n and few[i].id == r.id:
            i += 1
        yield r
    yield from few[i:]


def connection_running(conn: sqlite3.Connection, cid: int) -> bool:
    """Still recording: status 'running' and, on this machine, the relay process still alive."""
    row = conn.execute(
        "SELECT status, coalesce(recorder_pid, relay_pid) FROM connections WHERE id = ?", (cid,)
    ).fetchone()
    if row is None or row[0] != "running":
        return False
    return not row[1] or pid_alive(row[1])  # a dead writer never got to write its last row


def max_frame_id(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT coalesce(max(id), 0) FROM frames").fetchone()[0]


def follow(
    conn: sqlite3.Connection,
    view: View,
    flt: Filters | None = None,
    *,
    limit: int | None = None,
    tail: int | None = None,
    interval: float = FOLLOW_INTERVAL,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[FrameRow]:
    """Like `tail -f`: what is there (limit/tail apply), then new frames as the relay commits them.

    Polls the read-only database every `interval` seconds for frames with id above the last one seen (a
    rowid range, so each poll costs only the new frames). Ends by itself once the connection is no longer
    running and nothing new arrived; Ctrl-C ends it too.
    """
    flt = flt or Filters()
    hi = max_frame_id(conn)
    yield from iter_frames(conn, view, flt, limit=limit, tail=tail, upto=hi)
    where, params = _where(conn, view, flt)
    if view.session_id is None:
        scope, sparams = "+f.connection_id = ?", [view.connection_id]
    else:
        scope = (
            "+f.connection_id = ? AND (+f.session_id = ? OR (+f.kind = 'batch' AND EXISTS (SELECT 1 FROM "
            "batch_messages b WHERE b.frame_id = f.id AND b.session_id = ?)))"
        )
        sparams = [view.connection_id, view.session_id, view.session_id]
    cur = conn.cursor()
    cur.row_factory = _frame_factory
    while True:
        running = connection_running(conn, view.connection_id)  # before reading: its last frames precede the status
        top = max_frame_id(conn)
        got = False
        if top > hi:
            for row in cur.execute(
                f"{_SELECT} WHERE f.id > ? AND f.id <= ? AND {scope} AND {where} ORDER BY f.id",
                (hi, top, *sparams, *params),
            ):
                got = True
                yield row
            hi = top
        if not got and not running:
            return
        if not got:
            sleep(interval)


def get_frame(conn: sqlite3.Connection, frame_id: int) -> FrameRow:
    cur = conn.cursor()
    cur.row_factory = _frame_factory
    row = cur.execute(f"{_SELECT} WHERE f.id = ?", (frame_id,)).fetchone()
    if row is None:
        raise ShowError(f"no frame {frame_id}")
    return row


def batch_members(conn: sqlite3.Connection, frame_id: int) -> list[dict[str, Any]]:
    """The index rows of a batch frame's members, in array order."""
    return [
        dict(zip(MEMBER_COLUMNS, r))
        for r in conn.execute(
            f"SELECT {', '.join(MEMBER_COLUMNS)} FROM batch_messages WHERE frame_id = ? ORDER BY idx", (frame_id,)
        )
    ]


def _answers(cur: sqlite3.Cursor, request: FrameRow) -> list[FrameRow]:
    """The response to a request frame: first among its session's later answers, else the connection's."""
    answers = (
        "AND f.id > ? AND +f.kind IN ('response', 'error') AND +f.request_seq = ? "
        "AND +f.direction != ? ORDER BY f.id LIMIT 1"
    )
    args = (request.id, request.seq, request.direction)
    if request.session_id is not None:
        found = cur.execute(
            f"{_SELECT} WHERE f.session_id = ? AND f.connection_id = ? {answers}",
            (request.session_id, request.connection_id, *args),
        ).fetchall()
        if found:
            return found
    return cur.execute(
        f"{_SELECT} WHERE f.connection_id = ? AND f.seq > ? {answers}", (request.connection_id, request.seq, *args)
    ).fetchall()


def related_frames(conn: sqlite3.Connection, frame: FrameRow) -> list[tuple[str, FrameRow]]:
    """A response's request, a request's response(s); for a batch, each member's. Labelled, no duplicates."""
    cur = conn.cursor()
    cur.row_factory = _frame_factory
    out: list[tuple[str, FrameRow]] = []
    seen = {frame.id}

    def add(label: str, rows: Iterable[FrameRow]) -> None:
        for r in rows:
            if r.id not in seen:
                seen.add(r.id)
                out.append((label, r))

    request_seqs = [frame.request_seq] if frame.request_seq is not None else []
    is_request = frame.kind == "request"
    if frame.kind == "batch":
        members = batch_members(conn, frame.id)
        request_seqs += [m["request_seq"] for m in members if m["request_seq"] is not None]
        is_request = any(m["kind"] == "request" for m in members)
    for seq in request_seqs:
        add("request", cur.execute(f"{_SELECT} WHERE f.connection_id = ? AND f.seq = ?", (frame.connection_id, seq)))
    if is_request:
        add("response", _answers(cur, frame))
        add(
            "response",
            cur.execute(
                f"{_SELECT} WHERE f.id IN (SELECT b.frame_id FROM batch_messages b JOIN frames g "
                "ON g.id = b.frame_id WHERE g.connection_id = ? AND b.request_seq = ?) ORDER BY f.id",
                (frame.connection_id, frame.seq),
            ).fetchall(),
        )
    return out


# -- for the materializer ---------------------------------------------------------------------------------
def iter_messages(conn: sqlite3.Connection, view: View) -> Iterator[tuple[FrameRow, Any, Any]]:
    """(frame, message, the request it answers or None) for every message of the view, batches unpacked.

    A frame that is not JSON comes once with message None. Only requests still waiting for their answer
    are kept, so memory follows the open requests, not the length of the session.
    """
    waiting: dict[int, list[dict[str, Any]]] = {}
    for f in iter_frames(conn, view):
        msg = f.message()
        if f.kind == "batch" and isinstance(msg, list):
            seqs = [m["request_seq"] for m in batch_members(conn, f.id)]
            members = list(zip(msg, seqs + [None] * (len(msg) - len(seqs))))
        elif msg is None:
            yield f, None, None
            continue
        else:
            members = [(msg, f.request_seq)]
        for m, request_seq in members:
            request = None
            if isinstance(m, dict) and "id" in m:
                if "method" in m:
                    waiting.setdefault(f.seq, []).append(m)
                elif request_seq is not None:
                    request = _take_request(conn, f.connection_id, request_seq, m.get("id"), waiting)
            yield f, m, request


def _take_request(
    conn: sqlite3.Connection, cid: int, seq: int, rpc_id: Any, waiting: dict[int, list[dict[str, Any]]]
) -> dict[str, Any] | None:
    """The request at `seq` with this id: from those seen, else read back (it is outside the view)."""
    if seq not in waiting:
        row = conn.execute("SELECT raw FROM frames WHERE connection_id = ? AND seq = ?", (cid, seq)).fetchone()
        try:
            value = loads(row[0]) if row else None
        except (ValueError, UnicodeDecodeError, RecursionError):
            value = None
        waiting[seq] = [x for x in (value if isinstance(value, list) else [value]) if isinstance(x, dict)]
    candidates = waiting[seq]
    for i, req in enumerate(candidates):
        if _same_id(req.get("id"), rpc_id):
            del candidates[i]
            if not candidates:
                del waiting[seq]
            return req
    return None


def _same_id(a: Any, b: Any) -> bool:
    """JSON-RPC ids match by type and value: 1 and "1" are different requests."""
    return type(a) is type(b) and a == b
