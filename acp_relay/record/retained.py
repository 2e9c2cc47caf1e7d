"""What the recorder has taken but not stored yet, kept raw, so that a close that gives up (another
writer's lock held past close_stall()) can put it in a journal segment instead of losing it; and the room
reserved for what the connection's last row should say, should the disk fill before it is written.

Every item queued since the last Mark whose batches are written is retained, with that Mark (where the
wire was then: record/rowbuilder.Position). Not thread-safe by itself: the Recorder calls it under its lock.
"""

from __future__ import annotations

import collections
import os
import time
from pathlib import Path
from typing import Any, NamedTuple

from ..protocol.jsonrpc import A2C, C2A, ERR
from ..store.db import private_dir
from . import journal
from .rowbuilder import Gap, Item, Position, Resync

_CODES = {C2A: 0, A2C: 1, ERR: 2}  # journal stream codes; NET is a transport record


class Mark(NamedTuple):
    """Where the wire was once the indexing thread had taken `items` items and submitted `batches` batches."""

    batches: int
    items: int
    at: Position


_START = Mark(0, 0, Position(0, [((), None, 0)] * 3, [False] * 3, [0, 0, 0]))


class Retention:
    """The retained items and the Marks not yet written."""

    def __init__(self) -> None:
        self._items: collections.deque[Item] = collections.deque()
        self._base = 0  # number of the first retained item (items count from 0 in queue order)
        self._marks: collections.deque[Mark] = collections.deque()
        self._stored = _START

    def keep(self, item: Item) -> None:
        self._items.append(item)

    def mark(self, mark: Mark, written: int) -> None:
        self._marks.append(mark)
        self.forget(written)

    def stored(self, written: int) -> Mark:
        """The newest Mark whose batches (`written` of them are) are written."""
        while self._marks and self._marks[0].batches <= written:
            self._stored = self._marks.popleft()
        return self._stored

    def forget(self, written: int) -> None:
        """Drop the retained items a written Mark covers."""
        mark = self.stored(written)
        while self._base < mark.items and self._items:
            self._items.popleft()
            self._base += 1

    def unstored(self, written: int) -> tuple[Position, list[Item]]:
        """Where the stored part ends, and every item after it."""
        mark = self.stored(written)
        return mark.at, list(self._items)[max(0, mark.items - self._base) :]


def records(at: Position, items: list[Item], final: dict[str, Any], now: float, mono: float) -> list[journal.Record]:
    """The journal records of what is not stored: each stream's held line, the items, and a Close."""
    out: list[journal.Record] = []
    for code, (parts, big, n) in enumerate(at.held):
        held = bytes(big[:n]) if big is not None else b"".join(parts)
        if held:
            out.append(journal.Chunk(journal.STREAMS[code], held, now, mono))
    for stream, chunk, ts, t in items:
        if isinstance(chunk, Gap):
            out.append(journal.Gap(stream, chunk.lines, chunk.ends_line, ts, t))
        elif isinstance(chunk, Resync):
            out.append(journal.State(chunk.seq, chunk.mid, chunk.bytes, ts, t))
        elif stream not in _CODES:
            if chunk:
                out.append(journal.Transport(chunk, ts, t))
        elif not chunk:
            out.append(journal.Eof(stream, ts, t))
        else:
            out.append(journal.Chunk(stream, chunk, ts, t))
    out.append(journal.Close(final, now, mono))
    return out


def frames_waiting(at: Position, recs: list[journal.Record]) -> int:
    """Frames the records complete past `at` (counted as the wire counts them)."""
    count = journal.WireCount(at.seq, list(at.mid))
    for r in recs:
        match r:
            case journal.Chunk(stream, data, _, _):
                count.data(_CODES[stream], data)
            case journal.Gap(stream, lines, ends, _, _):
                count.gap(_CODES[stream], lines, ends)
            case journal.State(seq, mid, _, _, _):
                count.seq, count.mid = seq, list(mid)
            case journal.Eof(stream, _, _):
                count.eof(_CODES[stream])
    return count.seq - at.seq


def next_segment(db: Path, relay_pid: int) -> Path:
    """The path of this relay's next journal segment."""
    taken = [n for n, _ in journal.segments(db, relay_pid).get(relay_pid, [])]
    return journal.segment_path(db, relay_pid, max(taken, default=-1) + 1)


def write_segment(path: Path, head: dict[str, Any], at: Position, recs: list[journal.Record], mono: float) -> None:
    """A new journal segment at `path` holding `recs`, written and synced; OSError (and no file) when it
    cannot be."""
    state = {"seq": at.seq, "mid": list(at.mid), "bytes": at.bytes}
    try:
        fd = journal.create_segment(path, head, state, time.time(), mono)
        try:
            journal.write_all(fd, [piece for r in recs for piece in journal.encode(r)])
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        try:
            path.unlink()
        except OSError:
            pass
        raise


# -- the connection's last row, when the database cannot take it ------------------------------------------
RESERVE = 64 << 10  # bytes set aside at the start for a segment holding the row (its fields, no frame)


def reserve_path(db: Path, relay_pid: int, recorder_pid: int) -> Path:
    return Path(f"{db}.row-{relay_pid}-{recorder_pid}")


def reserve(db: Path, relay_pid: int) -> int | None:
    """Room for the segment keep_row writes, taken while the disk has it (a full disk refuses a new file's
    first block): a 0600 file of RESERVE allocated bytes, beside the database; its descriptor, or None."""
    path = reserve_path(db, relay_pid, os.getpid())
    try:
        private_dir(path)  # the database may not be made yet
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        os.posix_fallocate(fd, 0, RESERVE)
    except OSError:
        release(db, relay_pid, fd)
        return None
    return fd


def stale_reserves(db: Path) -> list[tuple[Path, int, int]]:
    """The reserved rooms beside the database: (path, relay pid, recorder pid)."""
    prefix = f"{db.name}.row-"
    try:
        names = [n for n in os.listdir(db.parent) if n.startswith(prefix)]
    except OSError:
        return []
    found = []
    for name in names:
        relay, _, recorder = name[len(prefix) :].partition("-")
        if relay.isdigit() and recorder.isdigit():
            found.append((db.parent / name, int(relay), int(recorder)))
    return found


def release(db: Path, relay_pid: int, fd: int | None) -> None:
    """Give the reserved room back (its file goes; after keep_row renamed it, there is none)."""
    if fd is None:
        return
    os.close(fd)
    try:
        reserve_path(db, relay_pid, os.getpid()).unlink()
    except OSError:
        pass


def keep_row(
    db: Path, relay_pid: int, fd: int | None, head: dict[str, Any], at: Position, close: journal.Close
) -> Path:
    """The next journal segment, holding `head`, where the wire ended (`at`) and `close` (the row's fields):
    written in the reserved room and renamed into place when there is room, else as a new file. OSError
    when neither can be written."""
    path = next_segment(db, relay_pid)
    data = b"".join(
        journal.encode(journal.Head(head, close.ts, close.mono))
        + journal.encode(journal.State(at.seq, at.mid, at.bytes, close.ts, close.mono))
        + journal.encode(close)
    )
    if fd is not None and len(data) <= RESERVE:
        try:
            if os.pwrite(fd, data, 0) == len(data):
                os.ftruncate(fd, len(data))
                os.fsync(fd)
                os.rename(reserve_path(db, relay_pid, os.getpid()), path)
                return path
        except OSError:
            pass
    write_segment(path, head, at, [close], close.mono)
    return path
