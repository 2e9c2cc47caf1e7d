"""The full-text index behind `acp-relay search`: SQLite FTS5, created and kept current through sqlite-utils.

A derived index, in three tables that sqlite-utils creates idempotently the first time someone searches
(not a migration: every relay runs the migrations when it opens a database, and a database nobody searches
should carry no index at all; the index can be dropped and is rebuilt from `frames`):

- `search_text (frame_id INTEGER PRIMARY KEY, text)`: the readable text of each frame that has some
  (protocol/searchtext.py decides what that is);
- `search_text_fts`: its FTS5 index (`Table.enable_fts`, external content, kept current by the triggers
  sqlite-utils installs: an insert into `search_text` is indexed in the same statement);
- `search_progress`: the last frame id looked at.

The relay's write path pays nothing: frames recorded since the last search are indexed when the next search
runs, in chunks of their own short transactions (a relay writing at the same time waits a moment at most).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

from ..protocol.jsonrpc import loads
from ..protocol.searchtext import MARKERS, MAX_TEXT, TEXT_UPDATES, message_text
from .queries import FRAME_COLUMNS, FrameRow, View

TEXT = "search_text"
FTS = "search_text_fts"
PROGRESS = "search_progress"
CHUNK = 20_000  # frames read per transaction
TOKENIZE = "unicode61 remove_diacritics 2"
# The fast path's SQLite JSON functions hold a parse of the whole frame (about 8 bytes a byte: a 64 MiB
# chunk took 490 MB); bigger chunks go through message_text, whose parse costs about their size.
FAST_MAX = 1 << 20

# The frames that can hold text (the rest are skipped without reading their bytes).
_CANDIDATES = (
    "(kind IN ('error', 'batch') "
    "OR (kind = 'request' AND method IN ('session/prompt', 'session/request_permission')) "
    "OR (kind = 'response' AND method = 'terminal/output') "
    "OR (kind = 'notification' AND method = 'session/update' AND update_kind IN ({})))"
).format(", ".join(f"'{u}'" for u in TEXT_UPDATES))
# Most frames of a session are message and thought chunks with one text block: SQLite's JSON functions take
# their text without a trip through Python (the same text message_text would give). Every other candidate
# goes through message_text. `t` is the frame as text: SQLite 3.45+ would read a BLOB as JSONB.
_CHUNKS = ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk")
_FAST = (
    "kind = 'notification' AND method = 'session/update' AND update_kind IN ({}) AND coalesce(json_valid(t) "
    "AND json_extract(t, '$.params.update.content.type') = 'text' "
    "AND json_type(t, '$.params.update.content.text') = 'text', 0)"
).format(", ".join(f"'{u}'" for u in _CHUNKS))
_FAST_INSERT = (
    f"INSERT INTO {TEXT} (frame_id, text) SELECT id, x FROM (SELECT id, replace(replace(substr("
    "json_extract(t, '$.params.update.content.text'), 1, {max}), char(57344), ''), char(57345), '') AS x "
    "FROM (SELECT id, kind, method, update_kind, CAST(raw AS TEXT) AS t FROM frames WHERE id > ? AND id <= ? "
    "AND update_kind IN ({chunks}) AND length <= {big}) WHERE {fast}) WHERE x != ''"
).format(max=MAX_TEXT, chunks=", ".join(f"'{u}'" for u in _CHUNKS), fast=_FAST, big=FAST_MAX)
# What the fast path did not take: the other candidates, and chunks it found no text in (none, usually).
_REST_SELECT = (
    f"SELECT id, kind, method, raw FROM frames f WHERE id > ? AND id <= ? AND {_CANDIDATES} "
    f"AND NOT EXISTS (SELECT 1 FROM {TEXT} s WHERE s.frame_id = f.id)"
)


def ensure_index(conn: sqlite3.Connection) -> None:
    """Create the index tables through sqlite-utils if they are not there yet (a no-op once they are).

    sqlite-utils is imported only then: a later search must answer in well under a second, and importing it
    costs a tenth of that on a busy machine."""
    if _exists(conn):
        return
    import sqlite_utils

    sdb = sqlite_utils.Database(conn)
    conn.execute("BEGIN IMMEDIATE")
    try:
        if not _exists(conn):  # another search may have made it while we waited for the lock
            text = sdb.table(TEXT)
            text.create({"frame_id": int, "text": str}, pk="frame_id")
            # External content, so the text is stored once; the insert/update/delete triggers keep it current.
            text.enable_fts(["text"], fts_version="FTS5", create_triggers=True, tokenize=TOKENIZE)
            progress = sdb.table(PROGRESS)
            progress.create({"id": int, "last_frame_id": int}, pk="id")
            progress.insert({"id": 1, "last_frame_id": 0})
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _exists(conn: sqlite3.Connection) -> bool:
    return (
        conn.execute(f"SELECT count(*) FROM sqlite_master WHERE name IN ('{TEXT}', '{FTS}', '{PROGRESS}')").fetchone()[
            0
        ]
        == 3
    )


def _progress(conn: sqlite3.Connection) -> int:
    row = conn.execute(f"SELECT last_frame_id FROM {PROGRESS} WHERE id = 1").fetchone()
    return row[0] if row else 0


def update_index(conn: sqlite3.Connection) -> int:
    """Index the frames recorded since the last search; returns how many frames were looked at."""
    ensure_index(conn)
    top = conn.execute("SELECT coalesce(max(id), 0) FROM frames").fetchone()[0]
    last = _progress(conn)
    if top < last:  # the newest frames were deleted (delete, prune): their ids may be used again
        _forget_after(conn, top)
        last = top
    seen = 0
    while last < top:
        hi = min(last + CHUNK, top)
        conn.execute("BEGIN IMMEDIATE")  # held for one chunk: a relay writing meanwhile waits a moment
        try:
            lo = max(last, _progress(conn))  # another search may have indexed some of these meanwhile
            if lo < hi:
                # Each insert is indexed at once by the triggers sqlite-utils installed with enable_fts.
                conn.execute(_FAST_INSERT, (lo, hi))
                rows = conn.execute(_REST_SELECT, (lo, hi)).fetchall()
                texts = [(fid, t) for fid, kind, method, raw in rows if (t := frame_text(conn, fid, kind, method, raw))]
                conn.executemany(f"INSERT INTO {TEXT} (frame_id, text) VALUES (?, ?)", texts)
            conn.execute(f"UPDATE {PROGRESS} SET last_frame_id = max(last_frame_id, ?) WHERE id = 1", (hi,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        seen += hi - last
        last = hi
    return seen


def _forget_after(conn: sqlite3.Connection, top: int) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(f"DELETE FROM {TEXT} WHERE frame_id > ?", (top,))
        conn.execute(f"UPDATE {PROGRESS} SET last_frame_id = ? WHERE id = 1", (top,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def frame_text(conn: sqlite3.Connection, frame_id: int, kind: str, method: str | None, raw: bytes) -> str:
    """The text of one frame: its message's, or each batch member's (a member answer by its request's method)."""
    try:
        msg = loads(raw[:-1] if raw.endswith(b"\r") else raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return ""
    if kind != "batch":
        return message_text(msg, method)
    if not isinstance(msg, list):
        return ""
    methods = dict(conn.execute("SELECT idx, method FROM batch_messages WHERE frame_id = ?", (frame_id,)).fetchall())
    return "\n".join(t for i, m in enumerate(msg) if (t := message_text(m, methods.get(i))))


# -- searching --------------------------------------------------------------------------------------------
class SearchError(Exception):
    """A query FTS5 cannot run (even once quoted)."""


def search(
    conn: sqlite3.Connection,
    query: str,
    *,
    view: View | None = None,
    method: str | None = None,
    limit: int | None = None,
) -> Iterator[tuple[FrameRow, str]]:
    """(frame, snippet) for each matching frame, in recorded order. The snippet marks matches with MARKERS.

    The query is FTS5 syntax (words, "phrases", prefix*, OR, NOT); one FTS5 cannot parse (a stray quote,
    `line-2`, read as a column filter) is searched again with each word quoted, as sqlite-utils quotes them.

    One statement: FTS5 hands out matches in rowid (frame id) order, so LIMIT stops early and nothing is
    sorted; a session's frames lie between its first and last frame id, a range FTS5 applies itself.
    (sqlite-utils' Table.search cannot join `frames` nor return snippet(), hence plain SQL here.)
    """
    ensure_index(conn)
    cols = ", ".join(f"f.{c}" for c in FRAME_COLUMNS)
    where, args = [f"{FTS} MATCH ?"], list[Any]()
    if view is not None:  # a session in its connection, or a whole connection
        scope = "f.connection_id = ?"
        sargs: list[Any] = [view.connection_id]
        if view.session_id is not None:
            scope = "f.session_id = ? AND f.connection_id = ?"
            sargs = [view.session_id, view.connection_id]
        lo, hi = conn.execute(f"SELECT min(id), max(id) FROM frames f WHERE {scope}", sargs).fetchone()
        where += [f"{FTS}.rowid BETWEEN ? AND ?", scope]
        args += [lo or 0, hi or 0, *sargs]
    if method is not None:
        where.append("f.method GLOB ?")
        args.append(method)
    sql = (
        f"SELECT {cols}, snippet({FTS}, 0, ?, ?, '...', 24) FROM {FTS} JOIN frames f ON f.id = {FTS}.rowid "
        f"WHERE {' AND '.join(where)} ORDER BY {FTS}.rowid" + ("" if limit is None else f" LIMIT {int(limit)}")
    )
    for q, quoted in ((query, False), (_quote(query), True)):
        try:
            cur = conn.execute(sql, (*MARKERS, q, *args))
            first = cur.fetchone()
        except sqlite3.OperationalError as exc:
            if quoted:
                raise SearchError(str(exc)) from None
            continue
        while first is not None:
            yield FrameRow(*first[:-1]), first[-1]
            first = cur.fetchone()
        return


def _quote(query: str) -> str:
    """Each word as an FTS5 string (the way sqlite-utils' quote_fts does it): no operators, no syntax."""
    return " ".join('"' + word.replace('"', '""') + '"' for word in query.split())
