"""`acp-relay export`: a session or a connection as a standalone database, our ndjson, or an acp-devtools
SessionExport."""

from __future__ import annotations

import os
import shlex
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from .. import __version__
from ..fdio import write_chunks_atomically
from ..protocol.captures import ExportInfo, devtools_message, ndjson_chunks, write_devtools
from ..protocol.jsonrpc import loads_or_none
from ..protocol.redact import Policy
from ..render.text import clean, counted, escape_json
from ..store.export import captured_frames, create_private, export_sqlite
from ..store.pages import connection_row, session_row
from ..store.queries import UserError, View, resolve_view

FORMATS = ("sqlite", "ndjson", "acp-devtools")
SUFFIX = {"sqlite": ".db", "ndjson": ".ndjson", "acp-devtools": ".json"}


def run_export(
    conn: sqlite3.Connection,
    session: str | None,
    connection: int | str | None,
    fmt: str,
    output: str | None,
    policy: Policy,
    note: Callable[[str], None],
    out: IO[bytes],
) -> int:
    """Write the export of SESSION, or with -c alone a whole connection (every frame, all its sessions);
    returns the exit status. Text formats go to stdout when no -o is given."""
    view = resolve_view(conn, session if session is not None or connection is not None else "last", connection)
    what = clean(f"session {view.session_id}@{view.connection_id}" if view.session_id else view.name)
    if fmt == "sqlite":
        default = _safe(view.session_id) if view.session_id else f"connection-{view.connection_id}"
        dest = Path(output or f"{default}.acp-relay.db")
        if dest == Path("-"):
            raise UserError("a sqlite export is a file: give -o FILE (or use --format ndjson for stdout)")
        os.close(_create(dest))
        try:
            frames = export_sqlite(conn, view, dest, policy)
        except BaseException:
            dest.unlink(missing_ok=True)
            raise
        note(f"exported {what} ({counted(frames, 'frame')}) to {dest}")
        return 0
    chunks = _escaped(_ndjson(conn, view, policy) if fmt == "ndjson" else _devtools(conn, view, policy))
    if output is None or output == "-":
        for chunk in chunks:
            out.write(chunk)
            del chunk  # not held while the next one is made
        out.flush()
    else:
        try:
            write_chunks_atomically(output, chunks, overwrite=False)
        except FileExistsError:
            raise UserError(f"{output} already exists (an export never overwrites a file)") from None
        note(f"exported {what} to {output}")
    return 0


def _create(path: Path) -> int:
    try:
        return create_private(path)
    except FileExistsError:
        raise UserError(f"{path} already exists (an export never overwrites a file)") from None
    except OSError as exc:
        raise UserError(f"cannot create {path}: {exc.strerror}") from None


def _safe(sid: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in sid)[:80] or "session"


def _escaped(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """Each chunk made safe to `cat` (escape_json): chunks end between characters, so this is the whole
    document's escaping."""
    for chunk in chunks:
        yield escape_json(chunk)
        del chunk


def _ndjson(conn: sqlite3.Connection, view: View, policy: Policy) -> Iterator[bytes]:
    """The ndjson export a frame at a time (each frame's line in chunks)."""
    seq = 0
    for c, _, _ in captured_frames(conn, view, policy, messages=False):  # not enumerate(): it holds the last item
        seq += 1  # noqa: SIM113 (enumerate holds the previous item while the next is made)
        yield from ndjson_chunks(seq, c)
        del c


def _devtools(conn: sqlite3.Connection, view: View, policy: Policy) -> Iterator[bytes]:
    """The acp-devtools SessionExport, a message at a time."""
    c, s = connection_row(conn, view.connection_id), session_row(conn, view)
    info = ExportInfo(
        id=view.connection_id,
        name=s.get("title") or c.get("label") or view.session_id,
        agent_command=_command(c.get("argv")),
        client_name=_client(c.get("client_info")),
        started_at=c["started_at"],
        ended_at=c["ended_at"],
    )
    return write_devtools(info, _messages(conn, view, policy), int(time.time() * 1000), __version__)


def _messages(conn: sqlite3.Connection, view: View, policy: Policy) -> Iterator[dict[str, Any]]:
    seq = 0
    for c, kind, msg in captured_frames(conn, view, policy):  # not enumerate(): see _ndjson
        seq += 1  # noqa: SIM113 (enumerate holds the previous item while the next is made)
        yield devtools_message(seq, c, kind, msg)
        del c, msg


def _command(argv: str | None) -> str | None:
    args = loads_or_none(argv)
    return shlex.join(str(a) for a in args) if isinstance(args, list) and args else None


def _client(info: str | None) -> str | None:
    value = loads_or_none(info)
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("title"), str):
        return value["title"]
    name, version = value.get("name"), value.get("version")
    return (
        f"{name} {version}"
        if isinstance(name, str) and isinstance(version, str)
        else name
        if isinstance(name, str)
        else None
    )
