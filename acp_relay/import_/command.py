"""`acp-relay import`: bring captures in (our exports, acp-devtools SessionExport v1, conductor traces)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
from ..render.text import clean, counted
from ..store.imports import DuplicateImport, read_sqlite, sha256, write_captures

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


def import_file(
    conn: sqlite3.Connection, path: Path, label: str | None, note: Callable[[str], None]
) -> list[tuple[dict[str, Any], str]]:
    """Import one file in one transaction. Returns, per connection imported, its --json record and its line
    to print (file names and session ids escaped in the line: both come from outside)."""
    name = clean(str(path))
    try:
        if path.stat().st_size > MAX_FILE:
            raise ImportFailed(f"{name}: over the import limit of {MAX_FILE} bytes")
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
            note(f"{name}: {clean(text)}")
    try:
        results = write_captures(conn, captures, digest=sha256(data), source=str(path), label=label or path.name)
    except DuplicateImport as exc:
        raise ImportFailed(f"{name}: {clean(str(exc))}") from None
    except (RecursionError, MemoryError, ValueError, TypeError, OverflowError, sqlite3.IntegrityError) as exc:
        raise ImportFailed(f"{name}: could not be imported ({type(exc).__name__}: {clean(str(exc))[:200]})") from None
    fmt = captures[0][0].format
    return [
        (
            {
                "file": str(path),
                "format": fmt,
                "connection": r.connection_id,
                "frames": r.frames,
                "sessions": list(r.sessions),
                "redacted": r.redacted,
            },
            f"imported {name} ({fmt}): connection {r.connection_id}, {r.frames} frames, session "
            + (", ".join(clean(s) for s in r.sessions) or "no session")
            + f"; redacted: {counted(r.redacted, 'value')}",
        )
        for r in results
    ]
