"""`acp-relay import`: bring captures in (our exports, acp-devtools SessionExport v1, conductor traces)."""

from __future__ import annotations

import logging
import os
import sqlite3
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from ..protocol.captures import (
    MAX_FILE,
    Capture,
    FormatError,
    detect,
    read_conductor_trace,
    read_devtools,
    read_ndjson,
    validate,
)
from ..render.text import Style, clean, counted, dumps_line
from ..store.imports import DuplicateImport, read_sqlite, sha256, write_captures

log = logging.getLogger(__name__)

Stderr = list[tuple[float, float, bytes, int]]


class ImportFailed(Exception):
    """One file could not be imported: the message names the file (and the line, when there is one)."""


def read_capture(path: Path, data: bytes) -> list[tuple[Capture, Stderr]]:
    """Parse a file in whichever format it is and check it against the declared shape (FormatError when it
    is none of them, is damaged, or holds what no recording can)."""
    captures = _read(path, data)
    for cap, _ in captures:
        validate(cap)
    return captures


def _read(path: Path, data: bytes) -> list[tuple[Capture, Stderr]]:
    fmt = detect(data)
    if fmt == "sqlite":
        return read_sqlite(path)
    if fmt == "ndjson":
        return [(read_ndjson(data), [])]
    if fmt == "acp-devtools":
        return [(read_devtools(data), [])]
    # The trace has no wall clock; the file's modification time is when its last event was written.
    cap = read_conductor_trace(data, 0.0)
    last = max(c.ts for c in cap.frames)
    start = os.stat(path).st_mtime - last
    for c in cap.frames:
        c.ts += start
    return [(cap, [])]


@dataclass
class Imported:
    """One connection brought in: from which file, in which format, with how many frames and sessions."""

    file: str
    format: str
    connection: int
    frames: int
    sessions: list[str]
    redacted: int


def compute(conn: sqlite3.Connection, path: Path, *, label: str | None = None) -> list[Imported]:
    """Import one file in one transaction (`conn` writable): a connection per capture it holds, labelled
    `label` or the file's name. ImportFailed names the file when it cannot be; what a reader noticed on the
    way (a field it could not keep) is logged, file names escaped."""
    name = clean(str(path))
    try:
        if path.stat().st_size > MAX_FILE:
            raise ImportFailed(f"{name}: over the import limit of {counted(MAX_FILE, 'byte')}")
        data = path.read_bytes()
    except OSError as exc:
        raise ImportFailed(f"{name}: cannot read it ({exc.strerror})") from None
    try:
        captures = read_capture(path, data)
    except FormatError as exc:
        raise ImportFailed(f"{name}: {clean(str(exc))}") from None
    except (RecursionError, MemoryError, ValueError, TypeError, OverflowError) as exc:  # a crafted file
        raise ImportFailed(f"{name}: not a capture this version can read ({type(exc).__name__})") from None
    for cap, _ in captures:
        for text in cap.notes:
            log.info("%s: %s", name, text)
    try:
        results = write_captures(conn, captures, digest=sha256(data), source=str(path), label=label or path.name)
    except DuplicateImport as exc:
        raise ImportFailed(f"{name}: {clean(str(exc))}") from None
    except (RecursionError, MemoryError, ValueError, TypeError, OverflowError, sqlite3.IntegrityError) as exc:
        raise ImportFailed(f"{name}: could not be imported ({type(exc).__name__}: {clean(str(exc))[:200]})") from None
    fmt = captures[0][0].format
    return [Imported(str(path), fmt, r.connection_id, r.frames, list(r.sessions), r.redacted) for r in results]


def render(imported: list[Imported], out: IO[bytes], style: Style | None = None) -> None:
    """A line per connection imported (file names and session ids escaped: both come from outside)."""
    for i in imported:
        line = (
            f"imported {clean(i.file)} ({i.format}): connection {i.connection}, {counted(i.frames, 'frame')}, session "
            + (", ".join(clean(s) for s in i.sessions) or "no session")
            + f"; redacted: {counted(i.redacted, 'value')}"
        )
        out.write(line.encode("utf-8", "replace") + b"\n")


def render_json(imported: list[Imported], out: IO[bytes]) -> None:
    """--json: an object per connection imported."""
    for i in imported:
        out.write(dumps_line(asdict(i)))
