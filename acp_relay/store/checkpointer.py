"""The recorder's WAL checkpoints, on a thread of their own beside the writer.

With SQLite's automatic checkpoint, the commit that crosses 1,000 WAL pages copies them into the database
inline (read back from the WAL, written to the database, two fsyncs): the writer thread, which sets the
pace of a flood, waits for it. Here the writer's connection has autocheckpoint off and the writer wakes
this thread every CHECKPOINT_BYTES of frames instead; its own connection runs a PASSIVE checkpoint (it
never waits for a lock and never blocks the writer) while the writer goes on, and SQLite lets go of the GIL
while it copies. The WAL starts over from its beginning only when a write transaction begins with every
page copied, which never happens while the writer commits during the checkpoints: so once one is done,
the writer copies the tail committed meanwhile itself (a megabyte or two) before its next transaction.
When this thread falls behind (the WAL past WAL_LIMIT_PAGES: a starved CPU), the writer
checkpoints inline again, so the WAL stays bounded as before. A checkpoint still copying when twice
CHECKPOINT_BYTES more have been committed (the thread starved of CPU mid-copy) makes the writer wait for it:
the writer is off the wire's path, and nothing else bounds the WAL while a copy is under way.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from . import db

CHECKPOINT_BYTES = 8 << 20  # frames written between two checkpoints (SQLite's default is 1,000 pages)
WAL_LIMIT_PAGES = 4000  # past this many WAL pages not yet copied, the writer checkpoints inline


class Checkpointer:
    """Copies the WAL into the database when woken; `behind` tells the writer to do it itself."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.behind = False
        self.failed = False
        self.running = False
        self.tail_due = False  # a checkpoint is done: the writer copies what was committed meanwhile
        self.checkpointed_at = 0  # the recorder's byte count at the last checkpoint
        self._wake = threading.Event()
        self._copied = threading.Event()  # set whenever no checkpoint is under way on the thread
        self._copied.set()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="acp-relay-checkpoint", daemon=True)

    def start(self) -> None:
        if self._thread.ident is None:
            self._thread.start()

    def wake(self) -> None:
        self._copied.clear()
        self.running = True
        self._wake.set()

    @property
    def idle(self) -> bool:
        """Neither checkpointing nor waiting for the writer to copy the tail of its last checkpoint."""
        return not (self.running or self.tail_due)

    def stop(self) -> None:
        """Finish the checkpoint under way, close the connection (before the writer's, whose close then
        checkpoints the rest and removes the WAL)."""
        if self._thread.is_alive():
            self._stop = True
            self._wake.set()
            self._thread.join()

    # -- the writer's side: called on the writer thread, with the writer's connection ----------------------
    def before_transaction(self, conn: sqlite3.Connection) -> None:
        """Copy the tail a finished checkpoint left, so that this transaction starts the WAL over."""
        if self.tail_due:
            self.tail_due = False
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            except sqlite3.Error:  # a checkpoint that fails costs the WAL's size, never frames
                pass

    def after_commit(self, conn: sqlite3.Connection, total: int) -> None:
        """`total` bytes recorded so far: every CHECKPOINT_BYTES, wake the thread, or checkpoint here when it
        has fallen behind."""
        if self.running and total - self.checkpointed_at >= 2 * CHECKPOINT_BYTES:
            self._copied.wait()  # a starved checkpoint: wait for it rather than let the WAL grow without bound
        if total - self.checkpointed_at < CHECKPOINT_BYTES or not self.idle:
            return
        self.checkpointed_at = total
        if not self.behind:
            self.wake()
            return
        try:
            _, log, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            self.behind = self.failed or log - copied > 0
        except sqlite3.Error:
            pass

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(self.path, timeout=db.BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        except sqlite3.Error:
            self.failed = self.behind = True
            self.running = False
            self._copied.set()
            return
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stop:
                    return
                try:
                    _, log, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    self.behind = log - copied > WAL_LIMIT_PAGES
                    self.tail_due = True
                except sqlite3.Error:
                    pass
                self.running = False
                self._copied.set()
        finally:
            self.running = False
            self._copied.set()
            conn.close()
