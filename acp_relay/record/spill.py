"""The relay's spill journal segment: what its feeder appends while the recorder's pipe stays full.

The feeder (record/feeder.py) decides when to spill; this part owns the segment file: created with the
connection's config and where the wire is (record/journal.py's HEADER and STATE), appended to a writev
batch at a time, bounded by journal_limit(), removed once the recorder has acknowledged all of it.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import journal

log = logging.getLogger(__name__)
JOURNAL_BATCH = 512  # records the feeder appends to the journal in one writev (at most; IOV_MAX is 1024)
JOURNAL_BATCH_BYTES = 1 << 20  # or this many bytes

Pending = tuple[list[bytes], int, Any]  # a record's pieces, its code and payload (for counting once written)


class Segment:
    """The segment being appended to (`fd` -1: none), its size and what the recorder was told of it."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        existing = journal.segments(db_path, os.getpid()).get(os.getpid(), [])
        self.number = max((n for n, _ in existing), default=0)  # an older relay with our pid left some
        self.fd = -1
        self.size = 0  # bytes written to it
        self.marked = 0  # bytes the recorder has been told of (a MARK record)
        self.pending: list[Pending] = []  # records for it, written a batch at once
        self.pending_bytes = 0
        self.paths: list[Path] = []  # segments created and not yet removed
        self.disk_since = 0.0  # when the journal call under way began (0: none)
        self._create_failed = False

    def open_next(self, head: dict[str, Any], state: dict[str, Any], ts: float, mono: float) -> None:
        """A new segment; on failure `fd` stays -1 (said once: it is retried each time the pipe stays full)."""
        self.number += 1
        path = journal.segment_path(self.db_path, os.getpid(), self.number)
        self.size = self.marked = 0
        self.disk_since = time.monotonic()
        try:
            self.fd = journal.create_segment(path, head, state, ts, mono)
            self.size = self.marked = os.fstat(self.fd).st_size
            self.paths.append(path)
        except OSError as exc:
            self.fd = -1
            if not self._create_failed:
                self._create_failed = True
                log.warning(f"cannot create the spill journal {path} ({exc.strerror}); frames are counted, not kept")
        finally:
            self.disk_since = 0.0

    def has_room(self, size: int) -> bool:
        return self.fd >= 0 and self.size + self.pending_bytes + size <= journal.journal_limit()

    def add(self, record: list[bytes], code: int, payload: Any) -> bool:
        """Queue one record for the segment; True when a batch is full and should be written."""
        self.pending.append((record, code, payload))
        self.pending_bytes += len(record[0]) + len(record[1])
        return len(self.pending) >= JOURNAL_BATCH or self.pending_bytes >= JOURNAL_BATCH_BYTES

    def write(self, count: Callable[[int, Any], None]) -> tuple[list[Pending], OSError | None]:
        """The pending records in one writev; `count(code, payload)` for each written whole (not GAPs).
        On a write error the segment is cut after the last whole record and (the records not written,
        the error) is returned."""
        pending, want = self.pending, self.pending_bytes
        self.pending, self.pending_bytes = [], 0
        if not pending:
            return [], None
        failure: OSError | None = None
        self.disk_since = time.monotonic()
        try:
            try:
                n = os.writev(self.fd, [b for record, _, _ in pending for b in record])
                if n < want:
                    failure = OSError(errno.ENOSPC, "short write")
            except OSError as exc:
                n, failure = 0, exc
            kept = 0
            for record, code, payload in pending:
                size = len(record[0]) + len(record[1])
                if size > n:
                    break
                n -= size
                self.size += size
                kept += 1
                if code != journal.GAP:
                    count(code, payload)
            if failure is not None:
                try:
                    os.ftruncate(self.fd, self.size)  # no torn record in the middle
                except OSError:
                    pass
            return pending[kept:], failure
        finally:
            self.disk_since = 0.0

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def mark(self) -> list[bytes]:
        """The MARK record telling the recorder how far the segment goes."""
        self.marked = self.size
        return journal.record(journal.MARK, journal.MARK_BODY.pack(self.number, self.size), time.time(), 0.0)

    def read_to_end(self, number: int, offset: int) -> bool:
        """The recorder acknowledged segment `number` up to `offset`: whether that is all of this one."""
        return number == self.number and offset >= self.size

    def remove(self) -> None:
        """Close and delete the current segment (the recorder has stored all of it)."""
        self.close()
        path = journal.segment_path(self.db_path, os.getpid(), self.number)
        try:
            os.unlink(path)
            self.paths.remove(path)
        except (OSError, ValueError):
            pass
