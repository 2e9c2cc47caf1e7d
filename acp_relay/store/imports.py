"""Write an imported capture as an ordinary connection, indexed exactly as the relay indexes what it records.

Every frame goes through the relay's Tracker and its row builder (writer.frame_rows), so an imported
capture has the same index columns, sessions and connection info as a recording, and every command works
on it. One transaction per file: a file that fails half way leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from ..protocol.captures import MAX_FILE, Capture, Captured, FormatError, short
from ..protocol.jsonrpc import loads_or_none
from ..protocol.redact import Policy, redact_argv, redact_line
from ..protocol.tracker import Frame, Tracker
from ..protocol.words import counted
from .db import readonly_uri
from .writer import (
    INSERT_BATCH_MESSAGE,
    INSERT_FRAME,
    INSERT_STDERR,
    backfill_sessions,
    finish_connection,
    frame_rows,
    json_or_null,
    open_connection,
    session_rows,
    upsert_sessions,
)

CHUNK = 5000  # frames per executemany
READ_SECONDS = 60  # the most reading an imported SQLite file may take


class DuplicateImport(Exception):
    """The same file (by content) was imported before."""

    def __init__(self, connection_id: int, source: str) -> None:
        super().__init__(f"already imported (connection {connection_id}, from {source})")
        self.connection_id = connection_id


@dataclass
class ImportResult:
    connection_id: int
    frames: int
    sessions: list[str]
    rebuilt: int
    redacted: int = 0  # values the import's policy replaced (frames, stderr lines, the command line)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def find_import(conn: sqlite3.Connection, digest: str) -> tuple[int, str] | None:
    row = conn.execute(
        "SELECT i.connection_id, i.source FROM imports i JOIN connections c ON c.id = i.connection_id "
        "WHERE i.sha256 = ? LIMIT 1",
        (digest,),
    ).fetchone()
    return (row[0], row[1]) if row else None


def write_captures(
    conn: sqlite3.Connection,
    captures: list[tuple[Capture, list[tuple[float, float, bytes, int]]]],
    *,
    digest: str,
    source: str,
    label: str | None,
    policy: Policy | None = None,
) -> list[ImportResult]:
    """Insert each capture (with its stderr lines) as a connection with status `imported`, all in one
    transaction: rolled back whole on any error, and refused when the same file came in before. Every
    frame, stderr line and command line goes through `policy` (the recorder's default when None), as if
    the traffic had come through `acp-relay run`."""
    policy = Policy() if policy is None else policy
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = find_import(conn, digest)
        if found is not None:
            raise DuplicateImport(*found)
        results = [
            _write(conn, cap, digest=digest, source=source, label=label, stderr=err, policy=policy)
            for cap, err in captures
        ]
        conn.execute("COMMIT")
        return results
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _write(
    conn: sqlite3.Connection,
    cap: Capture,
    *,
    digest: str,
    source: str,
    label: str | None,
    stderr: list[tuple[float, float, bytes, int]],
    policy: Policy,
) -> ImportResult:
    redacted = 0
    if policy.enabled and cap.argv:
        cap.argv, redacted = redact_argv(cap.argv)
    if policy.enabled:
        lines = [(ts, mono, *redact_line(raw, policy), unterminated) for ts, mono, raw, unterminated in stderr]
        redacted += sum(r[3] for r in lines)
        stderr = [(ts, mono, raw, unterminated) for ts, mono, raw, _, unterminated in lines]
    cid, started = _new_connection(conn, cap, source, label)
    tracker = Tracker(policy)  # redacts each frame before it indexes it: every column from the stored copy
    pending: list[Frame] = []
    totals = {"c2a": 0, "a2c": 0}
    rebuilt = 0
    for c in cap.frames:
        frame = _index(tracker, c, started)
        redacted += frame.redacted - int(c.redacted)
        totals[c.direction] += len(c.raw) + (0 if c.unterminated else 1)
        rebuilt += c.rebuilt
        pending.append(frame)
        if len(pending) >= CHUNK:
            _flush(conn, cid, tracker, pending)
            pending = []
    _flush(conn, cid, tracker, pending)
    if stderr:
        conn.executemany(INSERT_STDERR, [(cid, *row) for row in stderr])
    upsert_sessions(conn, session_rows(cid, tracker.sessions.values()))
    info = tracker.info
    finish_connection(
        conn,
        cid,
        {
            "frames": len(cap.frames),
            "bytes_c2a": totals["c2a"],
            "bytes_a2c": totals["a2c"],
            "bytes_stderr": sum(len(r[2]) + 1 for r in stderr),
            "protocol_version": info.protocol_version,
            "client_info": json_or_null(info.client_info),
            "agent_info": json_or_null(info.agent_info),
            "unanswered": json_or_null(tracker.unanswered() or None),
            "stderr_tail": b"\n".join(r[2] for r in stderr[-20:]).decode("utf-8", "replace") or None,
        },
    )
    conn.execute(
        "INSERT INTO imports (connection_id, sha256, source, format, imported_at, frames, rebuilt) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (cid, digest, source, cap.format, time.time(), len(cap.frames), rebuilt),
    )
    return ImportResult(cid, len(cap.frames), list(tracker.sessions), rebuilt, redacted)


def _new_connection(conn: sqlite3.Connection, cap: Capture, source: str, label: str | None) -> tuple[int, float]:
    """The imported connection's row (status `imported`); its id and start time (the first frame's when the
    capture has none)."""
    started = cap.started_at if cap.started_at is not None else min((f.ts for f in cap.frames), default=time.time())
    cid = open_connection(
        conn,
        started_at=started,
        ended_at=cap.ended_at if cap.ended_at is not None else max((f.ts for f in cap.frames), default=started),
        argv=cap.argv or [f"(imported from {source})"],
        cwd=None,
        label=label,
        status="imported",
        redaction={"imported": cap.format},
    )
    return cid, started


def _index(tracker: Tracker, c: Captured, started: float) -> Frame:
    mono = c.mono if c.mono is not None else c.ts - started
    frame = tracker.index_line(c.direction, c.raw, c.ts, mono, c.unterminated)
    frame.redacted += int(c.redacted)  # values redacted here (by the tracker), and flagged before the export
    if c.rebuilt and len(frame.index.messages) == 1:  # flagged in details, beside unterminated and redacted
        frame.index.messages[0].details = {**(frame.index.messages[0].details or {}), "rebuilt": 1}
    for m in frame.index.messages:
        m.message = None
    return frame


def _flush(conn: sqlite3.Connection, cid: int, tracker: Tracker, frames: list[Frame]) -> None:
    """The recorder's statements (see Recorder._insert), the session back-fill of requests included."""
    rows, members = frame_rows(cid, frames)
    if rows:
        conn.executemany(INSERT_FRAME, rows)
    if members:
        conn.executemany(INSERT_BATCH_MESSAGE, members)
    if tracker.backfill:
        backfill_sessions(conn, [(sid, cid, seq) for seq, sid in tracker.backfill])
        tracker.backfill = []


# -- reading an acp-relay SQLite export ------------------------------------------------------------------
TABLES = ("connections", "frames", "stderr")
_SLACK = 1 << 20  # what a row may hold beside its largest value (SQLite's limit applies to a whole row)


class _Budget:
    """The bytes a read may still take: what the file and its write-ahead log hold. SQLite stores every
    value once and does not compress, so an honest file never yields more; a crafted one (a default value
    read in every row, say) is stopped at the file's size, before its next value is kept."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        wal = f"{os.fspath(path)}-wal"
        self.size = os.stat(path).st_size + (os.stat(wal).st_size if os.path.exists(wal) else 0)
        self.left = self.size

    def take(self, *values: Any, length: Any = 0) -> None:
        """Count the text and blob values of a row, and `length` more (a value SQLite read for us)."""
        self.left -= sum(len(v) for v in values if isinstance(v, (bytes, str)))
        self.left -= length if isinstance(length, int) else 0
        if self.left < 0:
            raise FormatError(
                f"reading it would make more than the file holds ({counted(self.size, 'byte', grouped=True)}; a crafted file?)"
            )


# The columns a read takes from each table; frames' two flags besides, which our own schema generates from
# `details` (so they are read from `details` the way it does when generated, whatever the file declares).
READ = {
    "connections": ("id", "started_at", "ended_at", "argv"),
    "frames": ("connection_id", "seq", "direction", "ts", "mono", "raw", "details"),
    "stderr": ("id", "connection_id", "ts", "mono", "raw", "unterminated"),
}
FLAGS = ("unterminated", "redacted")


def _check_schema(src: sqlite3.Connection) -> dict[str, str]:
    """The three tables must be ordinary tables, and every column read stored as written: a view or a
    virtual table reads what its definition says (a recursive view never ends), a generated column computes
    its value on each read (a zeroblob of any size from a few bytes of schema). The SQL that reads each of
    frames' flags is returned."""
    rows = src.execute("SELECT name, type, sql FROM sqlite_master WHERE name IN (?, ?, ?)", TABLES).fetchall()
    if {name: kind for name, kind, _ in rows} != dict.fromkeys(TABLES, "table"):
        raise FormatError("not an acp-relay database (connections, frames and stderr must be tables)")
    flags = dict.fromkeys(FLAGS, "")
    for name, _, sql in rows:
        if not isinstance(sql, str) or sql.lstrip().upper().startswith("CREATE VIRTUAL"):
            raise FormatError(f"not an acp-relay database ({name} is a virtual table)")
        for col in src.execute(f"PRAGMA table_xinfo({name})").fetchall():
            column, hidden = str(col[1]).lower(), col[6]  # hidden 2, 3: generated (virtual, stored)
            if name == "frames" and column in flags:
                flags[column] = f"coalesce(json_extract(details, '$.{column}'), 0)" if hidden else column
            elif hidden and column in READ[name]:
                raise FormatError(f"not an acp-relay database ({name}.{column} is a generated column)")
    return {flag: sql or "0" for flag, sql in flags.items()}


def read_sqlite(path: str | os.PathLike[str]) -> list[tuple[Capture, list[tuple[float, float, bytes, int]]]]:
    """Each connection of an acp-relay database (an export), as a capture with its stderr lines.

    The file is untrusted, and its schema says what a read computes: the three tables must be tables of
    stored columns (_check_schema), no value may be longer than the file (SQLite's length limit), all the
    values read together no more than the file holds (_Budget), every query runs under a deadline
    (READ_SECONDS), and each value is checked for its type here and its range by captures.validate
    before anything is written."""
    try:
        budget = _Budget(path)
        src = sqlite3.connect(readonly_uri(path), uri=True)
    except (OSError, sqlite3.Error) as exc:
        raise FormatError(f"cannot open as SQLite: {exc}") from None
    src.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, min(budget.size, MAX_FILE) + _SLACK)
    deadline = time.monotonic() + READ_SECONDS
    src.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        out = []
        try:
            flags = _check_schema(src)
            conns = src.execute("SELECT id, started_at, ended_at, argv FROM connections ORDER BY id")
        except sqlite3.DatabaseError as exc:
            raise FormatError(f"not an acp-relay database ({exc})") from None
        for row in conns:
            budget.take(*row)
            cid, started_at, ended_at, argv = row
            cap, stderr = _read_connection(src, budget, flags, cid, started_at, ended_at, argv)
            if cap.frames or stderr:
                out.append((cap, stderr))
        if not out:
            raise FormatError("no connections with frames in the database")
        return out
    except sqlite3.OperationalError as exc:
        if "interrupted" in str(exc):
            raise FormatError(f"reading the database took over {READ_SECONDS} s (a crafted file?)") from None
        raise FormatError(f"the database is damaged or truncated ({exc})") from None
    except sqlite3.DataError as exc:  # SQLITE_TOOBIG: a value longer than the file
        raise FormatError(f"a value is longer than the file holds ({exc}; a crafted file?)") from None
    except sqlite3.DatabaseError as exc:
        raise FormatError(f"the database is damaged or truncated ({exc})") from None
    finally:
        src.close()


def _read_connection(
    src: sqlite3.Connection,
    budget: _Budget,
    flags: dict[str, str],
    cid: Any,
    started_at: Any,
    ended_at: Any,
    argv: Any,
) -> tuple[Capture, list[tuple[float, float, bytes, int]]]:
    """One connection's frames (as a capture) and stderr lines, each value's type checked and its size
    taken from the budget (a frame's details are read by SQLite, so they count too)."""
    where = f"connection {short(cid)}"
    for name, value in (("started_at", started_at), ("ended_at", ended_at)):
        if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)):
            raise FormatError(f"{where}: {name} must be a number, not {short(value)}")
    cap = Capture("sqlite", started_at=started_at, ended_at=ended_at)
    cap.argv = loads_or_none(argv) if isinstance(argv, str) else None
    for row in src.execute(
        f"SELECT seq, direction, ts, mono, raw, {flags['unterminated']}, {flags['redacted']}, "
        "coalesce(json_extract(details, '$.rebuilt'), 0), length(details) FROM frames WHERE connection_id = ? "
        "ORDER BY seq",
        (cid,),
    ):
        budget.take(*row[:-1], length=row[-1])
        seq, direction, ts, mono, raw, unterminated, redacted, rebuilt, _ = row
        if not isinstance(raw, bytes) or not isinstance(direction, str):
            raise FormatError(f"{where} frame {short(seq)}: raw must be a blob, direction text")
        if not isinstance(ts, (int, float)) or (mono is not None and not isinstance(mono, (int, float))):
            raise FormatError(f"{where} frame {short(seq)}: ts and mono must be numbers")
        cap.frames.append(Captured(direction, ts, raw, mono, bool(unterminated), bool(redacted), bool(rebuilt)))
    stderr: list[tuple[float, float, bytes, int]] = []
    for line in src.execute(
        "SELECT ts, mono, raw, unterminated FROM stderr WHERE connection_id = ? ORDER BY id", (cid,)
    ):
        budget.take(*line)
        ts, mono, raw, unterminated = line
        if not isinstance(raw, bytes) or not isinstance(ts, (int, float)) or not isinstance(mono, (int, float)):
            raise FormatError(f"{where}: a stderr line must be a blob with numeric times")
        stderr.append((ts, mono, raw, 1 if unterminated else 0))
    return cap, stderr
