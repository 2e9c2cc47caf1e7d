"""The full-text index behind `acp-relay search`: SQLite FTS5, created and kept current through sqlite-utils.

A derived index, in three tables that sqlite-utils creates idempotently the first time someone searches
(not a migration: every relay runs the migrations when it opens a database, and a database nobody searches
should carry no index at all; the index can be dropped and is rebuilt from `frames`):

- `search_text (frame_id INTEGER PRIMARY KEY, text)`: the readable text of each frame that has some
  (protocol/searchtext.py decides what that is);
- `search_text_fts`: its FTS5 index (`Table.enable_fts`, external content, kept current by the triggers
  sqlite-utils installs: an insert into `search_text` is indexed in the same statement);
- `search_progress`: the last frame id looked at (row 1 for frames, row 2 for messages);
- `search_messages` and `search_messages_fts`: each streamed message whole (its chunks joined, in order:
  `p` + `ong` is `pong`), with the frames it came in, so text split across chunks is found too.

The relay's write path pays nothing: frames recorded since the last search are indexed when the next search
runs, in chunks of their own short transactions (a relay writing at the same time waits a moment at most).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..protocol import vocab
from ..protocol.jsonrpc import loads
from ..protocol.searchtext import MARKERS, MAX_TEXT, TEXT_UPDATES, message_text
from .queries import FRAME_COLUMNS, FrameRow, View

TEXT = "search_text"
FTS = "search_text_fts"
PROGRESS = "search_progress"
MESSAGES = "search_messages"
MESSAGES_FTS = "search_messages_fts"
CHUNK = 20_000  # frames read per transaction
TOKENIZE = "unicode61 remove_diacritics 2"
# The fast path's SQLite JSON functions hold a parse of the whole frame (about 8 bytes a byte: a 64 MiB
# chunk took 490 MB); bigger chunks go through message_text, whose parse costs about their size.
FAST_MAX = 1 << 20

# The frames that can hold text (the rest are skipped without reading their bytes).
_CANDIDATES = (
    "(kind IN ('error', 'batch') "
    f"OR (kind = 'request' AND method IN ('{vocab.PROMPT}', '{vocab.REQUEST_PERMISSION}')) "
    f"OR (kind = 'response' AND method = '{vocab.TERMINAL_OUTPUT}') "
    f"OR (kind = 'notification' AND method = '{vocab.UPDATE}' AND update_kind IN ({{}})))"
).format(", ".join(f"'{u}'" for u in TEXT_UPDATES))
# Most frames of a session are message and thought chunks with one text block: SQLite's JSON functions take
# their text without a trip through Python (the same text message_text would give). Every other candidate
# goes through message_text. `t` is the frame as text: SQLite 3.45+ would read a BLOB as JSONB.
_CHUNKS = tuple(sorted(vocab.MESSAGE_CHUNKS))
_FAST = (
    f"kind = 'notification' AND method = '{vocab.UPDATE}' AND update_kind IN ({{}}) AND coalesce(json_valid(t) "
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


_NAMES = (TEXT, FTS, PROGRESS, MESSAGES, MESSAGES_FTS)


def ensure_index(conn: sqlite3.Connection) -> None:
    """Create the index tables through sqlite-utils if they are not there yet (a no-op once they are). An
    index made before messages were indexed gets their tables, and indexes messages from the first frame.

    sqlite-utils is imported only then: a later search must answer in well under a second, and importing it
    costs a tenth of that on a busy machine."""
    if _exists(conn):
        return
    import sqlite_utils

    sdb = sqlite_utils.Database(conn)
    conn.execute("BEGIN IMMEDIATE")
    try:
        names = _present(conn)  # another search may have made them while we waited for the lock
        if TEXT not in names:
            text = sdb.table(TEXT)
            text.create({"frame_id": int, "text": str}, pk="frame_id")
            # External content, so the text is stored once; the insert/update/delete triggers keep it current.
            text.enable_fts(["text"], fts_version="FTS5", create_triggers=True, tokenize=TOKENIZE)
            progress = sdb.table(PROGRESS)
            progress.create({"id": int, "last_frame_id": int}, pk="id")
            progress.insert({"id": 1, "last_frame_id": 0})
        if MESSAGES not in names:
            messages = sdb.table(MESSAGES)
            columns = {"id": int, "connection_id": int, "session_id": str, "update_kind": str, "message_id": str}
            columns |= {"first_frame_id": int, "last_frame_id": int, "open": int, "text": str}
            messages.create(columns, pk="id")
            messages.create_index(["connection_id", "session_id", "open"])
            messages.enable_fts(["text"], fts_version="FTS5", create_triggers=True, tokenize=TOKENIZE)
            sdb.table(PROGRESS).insert({"id": 2, "last_frame_id": 0}, replace=True)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _present(conn: sqlite3.Connection) -> set[str]:
    marks = ", ".join("?" * len(_NAMES))
    return {r[0] for r in conn.execute(f"SELECT name FROM sqlite_master WHERE name IN ({marks})", _NAMES)}


def _exists(conn: sqlite3.Connection) -> bool:
    return len(_present(conn)) == len(_NAMES)


def _progress(conn: sqlite3.Connection, which: int = 1) -> int:
    row = conn.execute(f"SELECT last_frame_id FROM {PROGRESS} WHERE id = ?", (which,)).fetchone()
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
    _index_messages(conn, top)
    return seen


# What ends a streamed message in a session: any other session/update, or the editor's next prompt.
_CHUNK_KINDS = ", ".join(f"'{u}'" for u in _CHUNKS)
_MESSAGE_FRAMES = (
    "SELECT f.id, f.connection_id, f.session_id, f.update_kind, f.message_id, s.text FROM frames f "
    f"LEFT JOIN {TEXT} s ON s.frame_id = f.id AND f.update_kind IN ({_CHUNK_KINDS}) "
    "WHERE f.id > ? AND f.id <= ? AND f.session_id IS NOT NULL AND f.kind IN ('notification', 'request') "
    f"AND f.method IN ('{vocab.UPDATE}', '{vocab.PROMPT}') ORDER BY f.id"
)


def _index_messages(conn: sqlite3.Connection, top: int) -> None:
    """Join the chunks indexed so far into whole messages (search_messages), a range of frames at a time: a
    run of one chunk kind and message id in one session is one message; any other update or a prompt ends
    it. Each message is written once per range (not once per chunk: FTS re-indexes a row on every update)."""
    last = _progress(conn, 2)
    if top < last:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(f"DELETE FROM {MESSAGES} WHERE first_frame_id > ?", (top,))
        conn.execute(f"UPDATE {PROGRESS} SET last_frame_id = ? WHERE id = 2", (top,))
        conn.execute("COMMIT")
        last = top
    while last < top:
        hi = min(last + CHUNK, top)
        conn.execute("BEGIN IMMEDIATE")
        try:
            lo = max(last, _progress(conn, 2))
            folder = _MessageFolder(conn)
            for row in conn.execute(_MESSAGE_FRAMES, (lo, hi)).fetchall():
                folder.feed(*row)
            folder.write()
            conn.execute(f"UPDATE {PROGRESS} SET last_frame_id = max(last_frame_id, ?) WHERE id = 2", (hi,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        last = hi


class _MessageFolder:
    """The open message of each session while a range of frames is folded (see _index_messages)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.open: dict[tuple[int, str], dict[str, Any] | None] = {}
        self.done: list[dict[str, Any]] = []

    def _current(self, key: tuple[int, str]) -> dict[str, Any] | None:
        if key not in self.open:
            row = self.conn.execute(
                f"SELECT id, update_kind, message_id, first_frame_id, last_frame_id FROM {MESSAGES} "
                "WHERE connection_id = ? AND session_id = ? AND open = 1",
                key,
            ).fetchone()
            self.open[key] = (
                None
                if row is None
                else {"id": row[0], "kind": row[1], "mid": row[2], "first": row[3], "last": row[4], "add": []}
            )
        return self.open[key]

    def feed(self, fid: int, cid: int, sid: str, kind: str | None, mid: str | None, text: str | None) -> None:
        key = (cid, sid)
        cur = self._current(key)
        if cur is not None and text is not None and cur["kind"] == kind and cur["mid"] == mid:
            cur["add"].append(text)
            cur["last"] = fid
            return
        if cur is not None:
            cur["open"] = 0
            self.done.append(cur)
        fresh: dict[str, Any] = {"id": None, "cid": cid, "sid": sid, "kind": kind, "mid": mid, "first": fid}
        self.open[key] = None if text is None else fresh | {"last": fid, "add": [text]}

    def write(self) -> None:
        for m in self.done + [m for m in self.open.values() if m is not None]:
            still = m.get("open", 1)
            if m["id"] is None:
                self.conn.execute(
                    f"INSERT INTO {MESSAGES} (connection_id, session_id, update_kind, message_id, first_frame_id, "
                    "last_frame_id, open, text) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (m["cid"], m["sid"], m["kind"], m["mid"], m["first"], m["last"], still, "".join(m["add"])),
                )
            elif m["add"] or not still:
                self.conn.execute(
                    f"UPDATE {MESSAGES} SET text = text || ?, last_frame_id = ?, open = ? WHERE id = ?",
                    ("".join(m["add"]), m["last"], still, m["id"]),
                )


def _forget_after(conn: sqlite3.Connection, top: int) -> None:
    """Frames above `top` were deleted: their text goes, and messages are folded again from there."""
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


@dataclass
class MessageHit:
    """A streamed message whose whole text matches where none of its chunks does on its own."""

    connection_id: int
    session_id: str
    update_kind: str
    message_id: str | None
    frames: list[int]  # the ids of the chunk frames it came in
    snippet: str


def search_messages(
    conn: sqlite3.Connection, query: str, *, view: View | None = None, limit: int | None = None
) -> Iterator[MessageHit]:
    """The messages that match only once their chunks are joined (`p` + `ong` for `pong`), in recorded order."""
    ensure_index(conn)
    where, args = [f"{MESSAGES_FTS} MATCH ?"], list[Any]()
    if view is not None:
        where.append("m.connection_id = ?")
        args.append(view.connection_id)
        if view.session_id is not None:
            where.append("m.session_id = ?")
            args.append(view.session_id)
    sql = (
        f"SELECT m.id, m.connection_id, m.session_id, m.update_kind, m.message_id, m.first_frame_id, "
        f"m.last_frame_id, snippet({MESSAGES_FTS}, 0, ?, ?, '...', 24) FROM {MESSAGES_FTS} "
        f"JOIN {MESSAGES} m ON m.id = {MESSAGES_FTS}.rowid WHERE {' AND '.join(where)} ORDER BY m.first_frame_id"
    )
    own = (
        f"SELECT 1 FROM {FTS} JOIN frames f ON f.id = {FTS}.rowid WHERE {FTS} MATCH ? AND {FTS}.rowid BETWEEN ? AND ? "
        "AND f.connection_id = ? AND f.session_id = ? LIMIT 1"
    )
    found = 0
    for q, quoted in ((query, False), (_quote(query), True)):
        try:
            rows = conn.execute(sql, (*MARKERS, q, *args)).fetchall()
        except sqlite3.OperationalError as exc:
            if quoted:
                raise SearchError(str(exc)) from None
            continue
        for _mid, cid, sid, kind, message_id, lo, hi, snippet in rows:
            if conn.execute(own, (q, lo, hi, cid, sid)).fetchone():
                continue  # a chunk matched by itself: the frame search reports it
            ids = [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM frames WHERE id BETWEEN ? AND ? AND connection_id = ? AND session_id = ? "
                    "AND update_kind = ? AND message_id IS ? ORDER BY id",
                    (lo, hi, cid, sid, kind, message_id),
                )
            ]
            yield MessageHit(cid, sid, kind, message_id, ids, snippet)
            found += 1
            if limit is not None and found >= limit:
                return
        return


def _quote(query: str) -> str:
    """Each word as an FTS5 string (the way sqlite-utils' quote_fts does it): no operators, no syntax."""
    return " ".join('"' + word.replace('"', '""') + '"' for word in query.split())
