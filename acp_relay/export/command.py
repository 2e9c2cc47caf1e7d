"""`acp-relay export`: a session or a connection as a standalone database, our ndjson, or an acp-devtools
SessionExport. `compute` writes the file (or returns the document's chunks), `render` prints a document."""

from __future__ import annotations

import os
import shlex
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .. import __version__
from ..fdio import UnsafeTarget, check_target, publish, write_chunks_atomically
from ..protocol.captures import ExportInfo, devtools_message, ndjson_chunks, write_devtools
from ..protocol.jsonrpc import loads_or_none
from ..protocol.redact import Policy
from ..render.text import Style, clean, counted, escape_json
from ..store.export import captured_frames, export_sqlite
from ..store.pages import connection_row, session_row
from ..store.queries import UserError, View, resolve_view

FORMATS = ("sqlite", "ndjson", "acp-devtools")
SUFFIX = {"sqlite": ".db", "ndjson": ".ndjson", "acp-devtools": ".json"}


@dataclass
class Exported:
    """What an export wrote: `output` is the file; None when the document is `chunks`, made as they are read
    (a text format without -o: for stdout, a frame at a time, never whole in memory)."""

    what: str  # `session ID@N` or the connection's name, escaped
    output: str | None
    frames: int | None = None  # a sqlite export counts them
    chunks: Iterator[bytes] | None = None


def compute(
    conn: sqlite3.Connection,
    session: str | None = None,
    connection: int | str | None = None,
    *,
    fmt: str = "sqlite",
    output: str | None = None,
    policy: Policy | None = None,
    force: bool = False,
) -> Exported:
    """Export SESSION, or with `connection` alone a whole connection (every frame, all its sessions), in `fmt`
    (FORMATS), redacted again by `policy`. A sqlite export, or a text one with `output`, is written here, whole
    or not at all, by fdio.check_target's rule (a new file; with `force` a regular file replaced; never a
    link, a device or a FIFO); a text one without is returned as its chunks."""
    policy = policy or Policy()
    view = resolve_view(conn, session if session is not None or connection is not None else "last", connection)
    what = clean(f"session {view.session_id}@{view.connection_id}" if view.session_id else view.name)
    if fmt == "sqlite":
        default = _safe(view.session_id) if view.session_id else f"connection-{view.connection_id}"
        dest = Path(output or f"{default}.acp-relay.db")
        if dest == Path("-"):
            raise UserError("a sqlite export is a file: give -o FILE (or use --format ndjson for stdout)")
        with _refused():
            frames = _write_sqlite(conn, view, dest, policy, force)
        return Exported(what, str(dest), frames)
    chunks = _escaped(_ndjson(conn, view, policy) if fmt == "ndjson" else _devtools(conn, view, policy))
    if output is None or output == "-":
        return Exported(what, None, chunks=chunks)
    with _refused():
        write_chunks_atomically(output, chunks, force=force)
    return Exported(what, output)


def render(exported: Exported, out: IO[bytes], style: Style | None = None) -> None:
    """The document, when it was not written to a file: its chunks as they are made."""
    if exported.chunks is None:
        return
    for chunk in exported.chunks:
        out.write(chunk)
        del chunk  # not held while the next one is made
    out.flush()


def summary(exported: Exported) -> str | None:
    """The line said on stderr once a file is written (None for stdout: the document is the output)."""
    if exported.output is None:
        return None
    frames = f" ({counted(exported.frames, 'frame')})" if exported.frames is not None else ""
    return f"exported {exported.what}{frames} to {exported.output}"


def _write_sqlite(conn: sqlite3.Connection, view: View, dest: Path, policy: Policy, force: bool) -> int:
    """The database made in a private temporary file beside `dest`, then published there (fdio.publish)."""
    check_target(dest, force=force)  # before anything is made: nothing is created beside a refused path
    try:
        fd, tmp = tempfile.mkstemp(prefix=".acp-relay-", suffix=".tmp", dir=dest.parent)
    except OSError as exc:
        raise UserError(f"cannot create {dest}: {exc.strerror}") from None
    os.close(fd)
    try:
        frames = export_sqlite(conn, view, Path(tmp), policy)
        publish(tmp, dest, force=force)
    finally:
        for leftover in (tmp, tmp + "-journal", tmp + "-wal", tmp + "-shm"):
            try:
                os.unlink(leftover)
            except FileNotFoundError:
                pass
    return frames


@contextmanager
def _refused() -> Iterator[None]:
    """A path the rule refuses (fdio.check_target) as the user's error."""
    try:
        yield
    except UnsafeTarget as exc:
        raise UserError(str(exc)) from None


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
