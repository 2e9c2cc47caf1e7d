"""`acp-relay search`: full-text search over what people read in every recorded session (grep's exit codes)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import IO

from ..protocol.errors import DB_UNUSABLE
from ..protocol.searchtext import MARKERS
from ..render import frames as fmt
from ..store import db as dbmod
from ..store.queries import UserError, resolve_view
from ..store.search import MessageHit, SearchError, search, search_messages, update_index


def run_search(
    path: Path,
    pattern: str,
    where: tuple[str | None, int | str | None],
    method: str | None,
    limit: int | None,
    out: IO[bytes],
    style: fmt.Style,
    *,
    as_json: bool = False,
) -> int:
    """Bring the index up to date, then print each matching frame as `show` does, with its session id and a
    snippet of the text that matched; `where` is (--session, --connection), both optional. 0 when something matched, 1 when nothing did; UserError otherwise."""
    if not path.exists():
        raise UserError(f"no database at {path}")
    if not pattern.strip():
        raise UserError("give a word, a phrase or an FTS5 query to search for")
    try:
        conn = dbmod.connect(path, create=False)
    except sqlite3.Error as exc:
        raise UserError(f"cannot open {path}: {exc}", DB_UNUSABLE) from None
    try:
        session, connection = where
        view = resolve_view(conn, session, connection) if session is not None or connection is not None else None
        update_index(conn)
        matched = 0
        for f, snippet in search(conn, pattern, view=view, method=method, limit=limit):
            matched += 1
            if as_json:
                out.write(fmt.dumps_line({**fmt.frame_record(f, 0.0), "snippet": _plain(snippet)}))
                continue
            head = style.paint(fmt.clean(f.session_id or "-"), "35")
            out.write(f"{head}  {fmt.frame_line(f, 0.0, style)}\n".encode("utf-8", "replace"))
            out.write(f"    {_highlight(snippet, style)}\n".encode("utf-8", "replace"))
        left = None if limit is None else limit - matched
        if method is None and (left is None or left > 0):  # a message is no method's frame
            for hit in search_messages(conn, pattern, view=view, limit=left):
                matched += 1
                _message(out, hit, style, as_json)
        return 0 if matched else 1
    except SearchError as exc:  # the query itself (FTS5 syntax): the database errors are the CLI's to say
        raise UserError(f"search failed: {exc}") from None
    finally:
        conn.close()


def _message(out: IO[bytes], hit: MessageHit, style: fmt.Style, as_json: bool) -> None:
    """A message found only once its chunks are joined: where it is, the frames it came in, the snippet."""
    if as_json:
        record = {"session_id": hit.session_id, "connection_id": hit.connection_id, "message": hit.message_id}
        record |= {"update_kind": hit.update_kind, "frames": hit.frames, "snippet": _plain(hit.snippet)}
        out.write(fmt.dumps_line(record))
        return
    frames = f"frame {hit.frames[0]}" if len(hit.frames) == 1 else f"frames {hit.frames[0]}-{hit.frames[-1]}"
    name = f"{hit.update_kind} {hit.message_id}" if hit.message_id else hit.update_kind
    head = style.paint(hit.session_id, "35")
    line = f"{head}  {fmt.clean(name)} ({frames}, {len(hit.frames)} chunks joined)"
    out.write(f"{line}\n    {_highlight(hit.snippet, style)}\n".encode("utf-8", "replace"))


def _plain(snippet: str) -> str:
    for m in MARKERS:
        snippet = snippet.replace(m, "")
    return snippet


def _highlight(snippet: str, style: fmt.Style) -> str:
    """The snippet on one line, escaped (it is recorded text), matches in bold red on a terminal only."""
    text = fmt.clean(snippet)
    start, end = MARKERS
    if style.color:
        return text.replace(start, "\x1b[1;31m").replace(end, "\x1b[0m")
    return text.replace(start, "").replace(end, "")
