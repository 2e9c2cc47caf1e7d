"""`acp-relay search`: full-text search over what people read in every recorded session (grep's exit codes).

`compute` brings the index up to date and returns the hits lazily (a big match set is never held whole);
`render` and `render_json` print them and say how many there were.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO

from ..protocol.searchtext import MARKERS
from ..protocol.words import counted
from ..render import frames as fmt
from ..store.queries import FrameRow, UserError, View, resolve_view
from ..store.search import MessageHit, SearchError, search, search_messages, update_index


@dataclass
class FrameHit:
    """A frame whose own text matches, and the snippet that matched (MARKERS around each match)."""

    frame: FrameRow
    snippet: str


Hit = FrameHit | MessageHit


def compute(
    conn: sqlite3.Connection,
    pattern: str,
    *,
    session: str | None = None,
    connection: int | str | None = None,
    method: str | None = None,
    limit: int | None = None,
) -> Iterator[Hit]:
    """The frames (then the messages, joined from their chunks) that match PATTERN, in recorded order, within
    SESSION or a connection when given. `conn` must be writable: the index is brought up to date first."""
    if not pattern.strip():
        raise UserError("give a word, a phrase or an FTS5 query to search for")
    view = resolve_view(conn, session, connection) if session is not None or connection is not None else None
    update_index(conn)
    return _hits(conn, pattern, view, method, limit)


def _hits(
    conn: sqlite3.Connection, pattern: str, view: View | None, method: str | None, limit: int | None
) -> Iterator[Hit]:
    try:
        matched = 0
        for f, snippet in search(conn, pattern, view=view, method=method, limit=limit):
            matched += 1
            yield FrameHit(f, snippet)
            del f  # not held while the next one is read
        left = None if limit is None else limit - matched
        if method is None and (left is None or left > 0):  # a message is no method's frame
            yield from search_messages(conn, pattern, view=view, limit=left)
    except SearchError as exc:  # the query itself (FTS5 syntax): the database errors are the CLI's to say
        raise UserError(f"search failed: {exc}") from None


def render(hits: Iterable[Hit], out: IO[bytes], style: fmt.Style | None = None) -> int:
    """Each hit as `show` prints its frame, with its session id and the snippet (matches highlighted on a
    terminal only); returns how many were printed (grep's exit status: 1 for none)."""
    style = style or fmt.Style()
    matched = 0
    for hit in hits:
        matched += 1
        if isinstance(hit, MessageHit):
            out.write(_message_lines(hit, style))
            continue
        f = hit.frame
        head = style.paint(fmt.clean(f.session_id or "-"), "35")
        out.write(f"{head}  {fmt.frame_line(f, 0.0, style)}\n".encode("utf-8", "replace"))
        out.write(f"    {_highlight(hit.snippet, style)}\n".encode("utf-8", "replace"))
    return matched


def render_json(hits: Iterable[Hit], out: IO[bytes]) -> int:
    """--json: an object per hit (a frame's record as `show --json` has it, or a joined message); how many."""
    matched = 0
    for hit in hits:
        matched += 1
        if isinstance(hit, MessageHit):
            record = {"session_id": hit.session_id, "connection_id": hit.connection_id, "message": hit.message_id}
            record |= {"update_kind": hit.update_kind, "frames": hit.frames, "snippet": _plain(hit.snippet)}
            out.write(fmt.dumps_line(record))
        else:
            out.write(fmt.dumps_line({**fmt.frame_record(hit.frame, 0.0), "snippet": _plain(hit.snippet)}))
    return matched


def _message_lines(hit: MessageHit, style: fmt.Style) -> bytes:
    """A message found only once its chunks are joined: where it is, the frames it came in, the snippet."""
    frames = f"frame {hit.frames[0]}" if len(hit.frames) == 1 else f"frames {hit.frames[0]}-{hit.frames[-1]}"
    name = f"{hit.update_kind} {hit.message_id}" if hit.message_id else hit.update_kind
    head = style.paint(fmt.clean(hit.session_id), "35")
    line = f"{head}  {fmt.clean(name)} ({frames}, {counted(len(hit.frames), 'chunk')} joined)"
    return f"{line}\n    {_highlight(hit.snippet, style)}\n".encode("utf-8", "replace")


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
