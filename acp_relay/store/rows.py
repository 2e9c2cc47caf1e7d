"""What every read of a recording shares: its columns, FrameRow, UserError, and opening it read-only.

Each query of the read side (queries, sessions, views, filters) is shaped for an index of migrations
001/002 (see the comments there).
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from ..protocol.errors import DB_UNUSABLE, UserError
from ..protocol.jsonrpc import STORED_JSON, loads_or_none, stored_id
from . import db

# The index columns frames and batch members share (the `messages` view's), after their own.
INDEX_COLUMNS = (
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
    *INDEX_COLUMNS,
    "redacted",
    "details",
)
MEMBER_COLUMNS = ("idx", *INDEX_COLUMNS)
# A frame over BIG_RAW bytes is selected as NULL and read by frame_factory with incremental blob I/O, straight
# into one bytes object: a SELECT of a 64 MiB value holds SQLite's copy beside Python's, twice its size.
BIG_RAW = 1 << 20
_SELECTED = {"raw": f"CASE WHEN f.length > {BIG_RAW} THEN NULL ELSE f.raw END"}
SELECT_FRAMES = "SELECT " + ", ".join(_SELECTED.get(c, f"f.{c}") for c in FRAME_COLUMNS) + " FROM frames f"
_RAW = FRAME_COLUMNS.index("raw")
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


# Every command's user error (exit status 2 unless it says otherwise); ShowError is its old name, kept so
# code written against it still works.
ShowError = UserError


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
    redacted: int = 0  # values the stored copy lost to redaction (0: the bytes are the wire's)
    details: str | None = None  # the index's JSON extras (wire_length of a redacted frame among them)

    @property
    def wire_length(self) -> int:
        """The forwarded line's length: the stored one, unless redaction changed the stored copy."""
        if self.redacted and self.details:
            value = loads_or_none(self.details)
            if isinstance(value, dict) and isinstance(value.get("wire_length"), int):
                return int(value["wire_length"])
        return self.length

    def message(self) -> Any:
        """The parsed JSON value (None when the frame is not JSON)."""
        if self.kind == "invalid" and self.parse != "not_jsonrpc" and self.parse != "cr":
            return None
        return loads_or_none(self.raw[:-1] if self.raw.endswith(b"\r") else self.raw)


def frame_factory(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> FrameRow:
    if row[_RAW] is None:  # a big frame (SELECT_FRAMES)
        row = (*row[:_RAW], read_raw(cursor.connection, row[0]), *row[_RAW + 1 :])
    f = FrameRow(*row)
    if isinstance(f.rpc_id, str) and f.rpc_id.startswith(STORED_JSON):  # a wide int, a boolean (see store_id)
        return f._replace(rpc_id=stored_id(f.rpc_id))
    return f


def read_raw(conn: sqlite3.Connection, frame_id: int) -> bytes:
    """A frame's stored bytes, read with incremental blob I/O (one copy, Python's); b"" if it is gone."""
    try:
        with conn.blobopen("frames", "raw", frame_id, readonly=True) as blob:
            return blob.read()
    except sqlite3.OperationalError:  # not a blob or text value (a crafted file); a plain read says what is there
        row = conn.execute("SELECT raw FROM frames WHERE id = ?", (frame_id,)).fetchone()
        value = row[0] if row else b""
        return value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogateescape")


# -- opening ----------------------------------------------------------------------------------------------
def no_database(path: str | os.PathLike[str]) -> UserError:
    """The one error for a database that is not there, for every command that reads or changes one."""
    return UserError(f"no database at {path}", hint="record one with `acp-relay run -- AGENT...`, or pass --db PATH")


def open_db(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """Open a recording read-only (a relay may be writing it); a clear UserError when it is not there."""
    path = Path(path)
    if not path.exists():
        raise no_database(path)
    try:
        conn = db.connect(path, readonly=True)
        conn.execute("SELECT id, session_id FROM frames LIMIT 0")
        conn.execute("SELECT id FROM sessions LIMIT 0")
    except sqlite3.DatabaseError as exc:
        raise UserError(f"{path} is not an acp-relay database ({exc})", DB_UNUSABLE) from None
    conn.create_function("regexp", 2, _regexp, deterministic=True)
    return conn


def database_file(conn: sqlite3.Connection) -> str | None:
    """The file an open connection reads (None in memory): for a reader that opens it again elsewhere (diff
    folds B in a forked child, which must not use its parent's connection)."""
    for _seq, name, file in conn.execute("PRAGMA database_list"):
        if name == "main":
            return str(file) or None
    return None


def wait_for_db(
    path: str | os.PathLike[str], *, interval: float = 0.2, sleep: Callable[[float], None] = time.sleep
) -> sqlite3.Connection:
    """open_db once the database exists and holds the schema (`show -f` started before the first relay); at
    once a UserError when what is there can never be one (a FIFO, a device: db.check_files)."""
    while True:
        try:
            db.check_files(path)
        except sqlite3.DatabaseError as exc:
            raise UserError(f"{path} is not an acp-relay database ({exc})", DB_UNUSABLE) from None
        if Path(path).exists():
            try:
                return open_db(path)
            except UserError:
                pass  # created, but its schema is still being written
        sleep(interval)


@contextmanager
def reading(path: str | os.PathLike[str], error: type[Exception]) -> Iterator[sqlite3.Connection]:
    """open_db for a command's loader: closed on the way out, and a UserError (no database, no such
    session) raised as the command's own error type."""
    try:
        conn = open_db(path)
    except UserError as exc:
        raise _as(error, exc) from None
    try:
        yield conn
    except UserError as exc:
        raise _as(error, exc) from None
    finally:
        conn.close()


def _as(error: type[Exception], exc: UserError) -> Exception:
    """`exc` as the command's error type, keeping its exit status and hint when that type is a UserError."""
    if isinstance(exc, error):
        return exc
    return error(str(exc), exc.status, exc.hint) if issubclass(error, UserError) else error(str(exc))


_PATTERNS: dict[str, re.Pattern[bytes]] = {}


def compile_grep(pattern: str) -> re.Pattern[bytes]:
    """A bytes regex: --grep searches the exact recorded bytes, invalid UTF-8 included."""
    try:
        return _PATTERNS.setdefault(pattern, re.compile(pattern.encode("utf-8")))
    except re.error as exc:
        raise UserError(f"--grep: bad regular expression {pattern!r}: {exc}") from None


def _regexp(pattern: str, value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, str):
        value = value.encode("utf-8")
    return compile_grep(pattern).search(value) is not None
