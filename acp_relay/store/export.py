"""Copy one session out of a database: into a standalone acp-relay database, or as frames for a file format.

The standalone copy has the same schema (made by the same migrations) and the same row ids, so `show`,
`stats`, `replay` and the rest work on it directly. Frames go through the export's redaction policy on
the way: the stored copy was redacted with the recording's policy, which may have been `--no-redact`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ..protocol.captures import Captured
from ..protocol.jsonrpc import loads_or_none
from ..protocol.redact import redact_argv, redact_frame, redact_line, shape_maybe_in_text
from . import db
from .filters import Filters, where_clause
from .rows import BIG_RAW, SELECT_FRAMES, FrameRow, frame_factory, read_raw
from .views import View, session_extra_ids

FRAME_COPY = (
    "id",
    "connection_id",
    "seq",
    "direction",
    "ts",
    "mono",
    "length",
    "parse",
    "kind",
    "method",
    "rpc_id",
    "session_id",
    "update_kind",
    "details",
    "raw",
)
CHUNK = 500


def export_ids(conn: sqlite3.Connection, view: View) -> list[int]:
    """The frames an export carries: those `show SESSION` lists, and the connection's frames that belong to
    no session (lines that are not JSON-RPC, stray output): a bug report needs them. Other sessions of the
    same connection stay out. Ids only: no frame's bytes are read to find them."""
    where, params = where_clause(conn, view, Filters())
    args: list[Any]
    if view.session_id is None:
        scope, args = "f.connection_id = ?", [view.connection_id]
    else:
        extra = ", ".join(map(str, session_extra_ids(conn, view.session_id, view.connection_id)))
        scope = "((f.session_id = ? AND f.connection_id = ?)" + (f" OR f.id IN ({extra}))" if extra else ")")
        args = [view.session_id, view.connection_id]
    ids = {r[0] for r in conn.execute(f"SELECT f.id FROM frames f WHERE {scope} AND {where}", (*args, *params))}
    ids.update(
        r[0]
        for r in conn.execute(
            "SELECT id FROM frames WHERE session_id IS NULL AND connection_id = ?", (view.connection_id,)
        )
    )
    return sorted(ids)


def iter_rows(conn: sqlite3.Connection, ids: list[int]) -> Iterator[FrameRow]:
    """Frames by id, in id order, one at a time: a big frame's bytes are read with blob I/O (frame_factory),
    and no row is held while the next is read."""
    for i in range(0, len(ids), CHUNK):
        chunk = ids[i : i + CHUNK]
        cur = conn.cursor()
        cur.row_factory = frame_factory
        cur.execute(f"{SELECT_FRAMES} WHERE f.id IN ({', '.join('?' * len(chunk))}) ORDER BY f.id", chunk)
        row = cur.fetchone()
        while row is not None:
            yield row
            del row
            row = cur.fetchone()


def captured_frames(
    conn: sqlite3.Connection, view: View, policy: Any, *, messages: bool = True
) -> Iterator[tuple[Captured, str, Any]]:
    """(frame, kind, parsed message) for each exported frame of the view, redacted under `policy`, one at a
    time (the caller drops each before asking for the next). Without `messages` the message is None and
    each frame is parsed once, by redaction (a second parse of a 64 MiB frame costs a second or so)."""
    for f in iter_rows(conn, export_ids(conn, view)):
        msg = f.message() if messages else None
        # redact_frame parses the frame itself when it is not handed a message (a frame that is not JSON has
        # no method: None)
        raw, changed = (
            redact_frame(f.raw, policy, f.method) if msg is None else redact_frame(f.raw, policy, f.method, msg)
        )
        c = Captured(f.direction, f.ts, raw, f.mono, bool(f.unterminated), bool(changed))
        kind = f.kind
        del f, raw
        if changed and messages:
            msg = loads_or_none(c.raw)
        yield c, kind, msg
        del c, msg


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    """The stored columns (generated ones cannot be inserted, and table_xinfo marks them hidden 2 or 3)."""
    return [r[1] for r in conn.execute(f"PRAGMA table_xinfo({table})") if r[6] not in (2, 3)]


def export_sqlite(src: sqlite3.Connection, view: View, dest: Path, policy: Any) -> int:
    """Write the view's connection row, frames, batch members, stderr and sessions rows (a session's, or a
    whole connection's) into a new database at `dest` (which must not exist yet). Returns the frame count."""
    out = db.connect(dest)
    total = 0
    try:
        # One self-contained file to attach to a bug report; set before the copy, so that the frames are
        # written once (a fresh file's new pages need no rollback journal), not to the WAL and then again.
        out.execute("PRAGMA journal_mode = DELETE")
        out.execute("BEGIN IMMEDIATE")
        total += _copy_connection(src, out, view, policy)
        out.execute("COMMIT")
    except BaseException:
        if out.in_transaction:
            out.execute("ROLLBACK")
        raise
    finally:
        out.close()
    db._secure_files(dest)
    return total


def _connection_record(record: dict[str, Any], policy: Any) -> dict[str, Any]:
    """The connection row under the export's policy: its command line, stderr tail and the columns read
    from messages (client and agent info, unanswered requests) redacted, the policy described."""
    if not policy.enabled:
        return record
    if isinstance(loads_or_none(record.get("argv")), list):
        record["argv"] = orjson.dumps(redact_argv(loads_or_none(record["argv"]))[0]).decode()
    if isinstance(record.get("stderr_tail"), str):
        record["stderr_tail"] = redact_line(record["stderr_tail"].encode(), policy)[0].decode("utf-8", "replace")
    for key in record.keys() & (_TEXT_COLUMNS | _JSON_COLUMNS):
        record[key] = _scrub(record[key], policy, json=key in _JSON_COLUMNS)
    # The patterns themselves may spell the secret (--redact re:hunter2): only how many there were.
    described = {**policy.describe(), "at": "export"}
    described["paths"], described["regexes"] = len(policy.paths), len(policy.regexes)
    record["redaction"] = orjson.dumps(described).decode()
    return record


def _copy_connection(src: sqlite3.Connection, out: sqlite3.Connection, view: View, policy: Any) -> int:
    cid = view.connection_id
    ccols = _columns(src, "connections")
    row = src.execute(f"SELECT {', '.join(ccols)} FROM connections WHERE id = ?", (cid,)).fetchone()
    ids = export_ids(src, view)
    record = _connection_record(dict(zip(ccols, row, strict=True)), policy)
    record["frames"] = len(ids)
    out.execute(
        f"INSERT INTO connections ({', '.join(record)}) VALUES ({', '.join('?' * len(record))})",
        list(record.values()),
    )
    insert = f"INSERT INTO frames ({', '.join(FRAME_COPY)}) VALUES ({', '.join('?' * len(FRAME_COPY))})"
    bcols = _columns(src, "batch_messages")
    for i in range(0, len(ids), CHUNK):
        chunk = ids[i : i + CHUNK]
        marks = ", ".join("?" * len(chunk))
        out.executemany(insert, _copied_rows(src, chunk, policy))
        out.executemany(
            f"INSERT INTO batch_messages ({', '.join(bcols)}) VALUES ({', '.join('?' * len(bcols))})",
            _scrubbed(
                src.execute(f"SELECT {', '.join(bcols)} FROM batch_messages WHERE frame_id IN ({marks})", chunk),
                bcols,
                policy,
            ),
        )
    out.executemany(
        "INSERT INTO stderr (id, connection_id, ts, mono, raw, unterminated) VALUES (?, ?, ?, ?, ?, ?)",
        (
            (*r[:4], redact_line(bytes(r[4]), policy)[0], r[5])
            for r in src.execute(
                "SELECT id, connection_id, ts, mono, raw, unterminated FROM stderr WHERE connection_id = ?", (cid,)
            )
        ),
    )
    if "transport_events" in {r[0] for r in src.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}:
        tcols = _columns(src, "transport_events")  # header values were redacted before they were stored
        out.executemany(
            f"INSERT INTO transport_events ({', '.join(tcols)}) VALUES ({', '.join('?' * len(tcols))})",
            _scrubbed(
                src.execute(f"SELECT {', '.join(tcols)} FROM transport_events WHERE connection_id = ?", (cid,)),
                tcols,
                policy,
            ),
        )
    scols = _columns(src, "sessions")
    out.executemany(
        f"INSERT INTO sessions ({', '.join(scols)}) VALUES ({', '.join('?' * len(scols))})",
        _scrubbed(
            src.execute(
                f"SELECT {', '.join(scols)} FROM sessions WHERE connection_id = ? AND (? IS NULL OR session_id = ?)",
                (cid, view.session_id, view.session_id),
            ),
            scols,
            policy,
        ),
    )
    return len(ids)


_COPIED = ", ".join(f"CASE WHEN length > {BIG_RAW} THEN NULL ELSE raw END" if c == "raw" else c for c in FRAME_COPY)


def _copied_rows(src: sqlite3.Connection, ids: list[int], policy: Any) -> Iterator[tuple[Any, ...]]:
    """The frames' rows to insert, redacted, one at a time (a big frame's bytes read with blob I/O, as
    frame_factory does): never a chunk of big frames in memory at once."""
    cur = src.execute(f"SELECT {_COPIED} FROM frames WHERE id IN ({', '.join('?' * len(ids))})", ids)
    row = cur.fetchone()
    while row is not None:
        if row[-1] is None:
            row = (*row[:-1], read_raw(src, row[0]))
        new = _redacted_row(row, policy)
        del row
        yield new
        del new
        row = cur.fetchone()


# The columns copied from the source that hold what a message said (the rest are numbers, times and the
# relay's own words): a recording made with --no-redact has them as sent, and an export redacts.
_TEXT_COLUMNS = frozenset(
    {"method", "rpc_id", "session_id", "update_kind", "cwd", "title", "parent_session_id", "acp_session_id"}
    | {"acp_connection_id", "label", "error"}
)
_JSON_COLUMNS = frozenset({"details", "client_info", "agent_info", "unanswered"})


def _scrub(value: Any, policy: Any, json: bool = False) -> Any:
    """A copied column's value under the export's policy: text as any string of a frame is (shapes, the
    user's regexes), JSON text as the message part it came from. Unchanged when the policy finds nothing."""
    if not policy.enabled or not isinstance(value, str):
        return value
    parsed = loads_or_none(value) if json else value
    if json and parsed is None:
        return value
    new, n = policy.apply(parsed)
    return value if not n else (orjson.dumps(new).decode() if json else new)


def _scrubbed(rows: Any, columns: list[str], policy: Any) -> Iterator[tuple[Any, ...]]:
    """Rows of a copied table with their message-derived columns (_TEXT_COLUMNS, _JSON_COLUMNS) scrubbed."""
    at = _derived_at(columns)
    for row in rows:
        yield _scrub_row(row, at, policy)


def _derived_at(columns: list[str] | tuple[str, ...]) -> list[tuple[int, bool]]:
    """Where a table's message-derived columns are, and which hold JSON."""
    return [(i, c in _JSON_COLUMNS) for i, c in enumerate(columns) if c in _TEXT_COLUMNS or c in _JSON_COLUMNS]


def _scrub_row(row: tuple[Any, ...], at: list[tuple[int, bool]], policy: Any) -> tuple[Any, ...]:
    if not policy.enabled:
        return row
    if not (policy.paths or policy.regexes):  # only a shape can be there: one test of all the text
        texts = [v for v in (row[i] for i, _ in at) if type(v) is str]
        if not texts or not shape_maybe_in_text("\n".join(texts)):
            return row
    out = list(row)
    for i, json in at:
        out[i] = _scrub(row[i], policy, json)
    return tuple(out)


_FRAME_AT = _derived_at(FRAME_COPY)


def _redacted_row(row: tuple[Any, ...], policy: Any) -> tuple[Any, ...]:
    raw = bytes(row[-1])
    new, changed = redact_frame(raw, policy, row[9])  # parsed there, once (a frame not JSON has no method)
    row = _scrub_row(row, _FRAME_AT, policy)  # its columns: a --no-redact recording has them as sent
    if not changed:
        return row
    details = orjson.loads(row[13]) if row[13] else {}
    details["redacted"] = details.get("redacted", 0) + changed
    details.setdefault("wire_length", row[6])
    return (*row[:6], len(new), *row[7:13], orjson.dumps(details).decode(), new)
