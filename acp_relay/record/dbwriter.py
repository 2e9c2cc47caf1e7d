"""The recorder's database writer: the one write connection, its connection row, one Batch per transaction.

Runs on the Recorder's threads (record/recorder.py): open() and finish() on the indexing thread, write() on
the writer thread. It waits out other writers' locks (the relay spills meanwhile), counts the frames of a
batch it cannot store as unrecorded, notices the database file deleted under it, and has the WAL
checkpointed (store/checkpointer.py). The SQL is store/writer.py's.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import Any, NamedTuple

from ..protocol.jsonrpc import A2C, C2A, ERR
from ..protocol.redact import Policy, redact_argv
from ..protocol.words import counted
from ..store import db, writer
from ..store.checkpointer import Checkpointer
from ..store.writer import QUICK_WIDTH, Batch, is_busy, json_or_null
from .rowbuilder import RowBuilder

log = logging.getLogger(__name__)

FILE_CHECK_INTERVAL = 1.0  # seconds between looks at whether the database file is still ours


class Identity(NamedTuple):
    """What the connection row says of the relay."""

    argv: list[str]
    cwd: str
    label: str | None
    relay_pid: int
    policy: Policy
    transport: str = "stdio"
    endpoint: str | None = None


class DbWriter:
    """Owns the write connection and the connection row."""

    def __init__(
        self,
        path: Path,
        who: Identity,
        rows: RowBuilder,
        *,
        resume: int | None = None,
        quiet: bool = False,
    ) -> None:
        self.path, self.who, self.rows = path, who, rows
        self.resume = resume  # an existing connection to add to (a journal's recovery), not a new one
        self.quiet = quiet  # no count of frames not recorded on stderr (the caller says it)
        self.conn: sqlite3.Connection | None = None
        self.connection_id: int | None = None
        self.frames = 0
        self.unrecorded = 0
        self.final_unrecorded: int | None = None  # the exact count written in the row at close
        self.unwritten: tuple[int, dict[str, Any]] | None = None  # (wire frames, final fields) a failed close kept
        self.progress = 0.0  # monotonic time of the last success
        self.writing = False  # inside a transaction (a big one takes long, and is progress)
        self.given_up = False  # close gave up waiting: stop retrying, report nothing more
        self.checkpoints = Checkpointer(path)
        self._inode = -1  # the database file's, to notice it deleted under us
        self._looked_at = 0.0
        self._warned: set[str] = set()
        self.remade: str | None = None  # why the database was made over (the row's error, unless close says one)

    def open(self) -> None:
        """Open the database and add this connection's row, waiting out other writers' locks."""
        while True:
            try:
                if self.conn is None:
                    self.conn = writer.connect_writer(self.path)
                    self._inode = os.stat(self.path).st_ino
                    self.checkpoints.start()
                if self.resume is not None:
                    self._resume(self.conn, self.resume)
                    return
                who = self.who
                self.connection_id = writer.begin_connection(
                    self.conn,
                    started_at=time.time(),
                    argv=redact_argv(who.argv)[0] if who.policy.enabled else who.argv,
                    cwd=who.cwd,
                    label=who.label,
                    relay_pid=who.relay_pid,
                    recorder_pid=os.getpid(),
                    redaction=who.policy.describe(),
                    transport=who.transport,
                    endpoint=who.endpoint,
                )
                self.progress = time.monotonic()
                return
            except (sqlite3.Error, OSError) as exc:
                if not is_busy(exc):
                    self._broken(f"cannot open the database {self.path}: {exc}")
                    return
                self._rollback()
                self.warn_once("busy", f"the database is busy ({exc}); queuing frames until it frees up")
                if self.given_up:  # close gave up waiting for the lock
                    self._broken(f"the database {self.path} stayed locked")
                    return
                time.sleep(0.05)

    def _resume(self, conn: sqlite3.Connection, cid: int) -> None:
        """Add to connection `cid`: frames it holds already are not stored twice (see rowbuilder.Resync)."""
        row = writer.connection_bytes(conn, cid)
        if row is None:
            raise sqlite3.DatabaseError(f"no connection {cid}")
        self.rows.bytes = {C2A: row[0], A2C: row[1], ERR: row[2]}
        _, self.rows.skip_through = writer.stored_frames(conn, cid)
        self.connection_id = cid
        self.progress = time.monotonic()

    def write(self, batch: Batch) -> None:
        """Insert one batch in one transaction; retry while another writer holds the lock."""
        n = batch.frames
        if self.conn is None or self.connection_id is None:
            self.unrecorded += n
            return
        while True:
            try:
                self.insert(batch)
                self.checkpoints.after_commit(self.conn, sum(self.rows.bytes.values()))
                self.frames += n
                self.progress = time.monotonic()
                if self.progress - self._looked_at > FILE_CHECK_INTERVAL:
                    self._check_file(batch)
                return
            except Exception as exc:
                self._rollback()
                if not is_busy(exc):
                    self.unrecorded += n
                    self.warn_once("write", f"cannot write to {self.path}: {exc}; counting frames not recorded")
                    return
                # Wait for the lock (the queue fills, then the relay spills to its journal). Once closing,
                # close()'s stall rule decides how long: when it gives up, this batch is in its journal.
                if self.given_up:
                    return
                self.warn_once("busy", f"the database is busy ({exc}); queuing frames until it frees up")

    def insert(self, batch: Batch) -> None:
        assert self.conn is not None
        self.checkpoints.before_transaction(self.conn)
        try:
            writer.insert_batch(self.conn, int(self.connection_id or 0), batch, self._set_writing)
        finally:
            self.writing = False

    def _set_writing(self, on: bool) -> None:
        self.writing = on

    def _check_file(self, batch: Batch) -> None:
        """SQLite goes on writing into a database file someone deleted (or replaced) under it, and all of it
        would vanish at close: once a second, see that the path is still our file. If not, say so once and
        go on in a new database at the path, under the same connection id, the row saying what was lost."""
        self._looked_at = time.monotonic()
        try:
            same = os.stat(self.path).st_ino == self._inode
        except OSError:
            same = False
        if same or self.connection_id is None:
            return
        seq = max(
            (int(r[1] if len(r) != QUICK_WIDTH else r[0] + len(r[4]) - 1) for r in batch.rows),
            default=self.rows.tracker.seq,
        )
        why = f"the database file was deleted or replaced during the session; frames up to seq {seq} went with it"
        log.warning(f"{self.path}: {why}; recording goes on in a new database there")
        self.checkpoints.stop()
        try:
            self._reopen(why)
        except (sqlite3.Error, OSError) as exc:
            self._broken(f"cannot make a new database at {self.path}: {exc}")

    def _reopen(self, why: str) -> None:
        """A new database at the path, holding this connection's row (same id) and saying `why`."""
        assert self.connection_id is not None
        if self.conn is not None:
            self.conn.close()
        self.conn = writer.connect_writer(self.path)
        self._inode = os.stat(self.path).st_ino
        who, sizes = self.who, self.rows.bytes
        writer.open_connection(
            self.conn,
            connection_id=self.connection_id,
            started_at=time.time(),
            argv=who.argv,
            cwd=who.cwd,
            label=who.label,
            relay_pid=who.relay_pid,
            recorder_pid=os.getpid(),
            redaction=who.policy.describe(),
            error=why,
        )
        writer.finish_connection(
            self.conn,
            self.connection_id,
            {"bytes_c2a": sizes[C2A], "bytes_a2c": sizes[A2C], "bytes_stderr": sizes[ERR]},
        )
        self.remade = why
        done = self.checkpoints.checkpointed_at
        self.checkpoints = Checkpointer(self.path)
        self.checkpoints.checkpointed_at = done
        self.checkpoints.start()

    def finish(self, final: dict[str, Any], wire_seq: int) -> None:
        """Write the connection's last row, say how many frames were not recorded, close."""
        self.checkpoints.stop()
        if self.given_up:  # close's journal segment holds what is not stored, and says so
            return
        rows = self.rows
        if self.conn is None or self.connection_id is None:
            self.report_unrecorded(rows.tracker.seq - self.frames)
            return
        try:
            stored, _ = writer.stored_frames(self.conn, self.connection_id)
        except sqlite3.Error:
            stored = self.frames
        # Exact: every line the wire carried has a seq (lost ones too: GAPs count them), so what is not in
        # the table is the difference, whatever lost it (a bound, a dead recorder, a failed write).
        carried = max(rows.tracker.seq, wire_seq)
        unrecorded = max(0, carried - stored)
        fields = self._final_fields(final, unrecorded)
        try:
            writer.finish_connection(self.conn, self.connection_id, fields)
            self.final_unrecorded = unrecorded
        except sqlite3.Error as exc:  # a full disk, a read-only file: the Recorder keeps what it should say
            self.unwritten = (carried, {k: v for k, v in fields.items() if k != "frames_unrecorded"})
            self.warn_once("final", f"could not write the connection's final row: {exc}")
        self.report_unrecorded(unrecorded)
        try:
            self.conn.close()
        except sqlite3.Error:
            pass
        db._secure_files(self.path)

    def _final_fields(self, final: dict[str, Any], unrecorded: int) -> dict[str, Any]:
        fields = {
            "ended_at": final.get("ended_at") or time.time(),
            "status": final.get("status", "ended"),
            "exit_code": final.get("exit_code"),
            "exit_signal": final.get("exit_signal"),
            "closed_by": final.get("closed_by"),
            "error": final.get("error", self.remade),
            "agent_pid": final.get("agent_pid"),
            "unanswered": json_or_null(self.rows.tracker.unanswered() or None),
            "stderr_tail": self.rows.stderr_text(),
            "recorder_rss_kb": _peak_rss_kb(),
            "frames_unrecorded": unrecorded,
        }
        # What a recorder that could not write its row kept for the recovery (see Recorder._keep_row).
        given = {k: final[k] for k in ("recorder_rss_kb", "unanswered", "stderr_tail") if final.get(k) is not None}
        fields |= given
        if self.resume is not None:  # a recovery adds to a row: it keeps what the recorder had written
            mine = ("recorder_rss_kb", "unanswered")
            fields = {k: v for k, v in fields.items() if v is not None and (k in given or k not in mine)}
        return fields

    def report_unrecorded(self, n: int) -> None:
        """The one count of frames not recorded on stderr: the row's (or, with no row, the same difference)."""
        if n > 0 and not self.quiet:
            where = f" (connection {self.connection_id})" if self.connection_id is not None else ""
            log.warning(f"{counted(n, 'frame')} {'was' if n == 1 else 'were'} not recorded{where}")

    def _rollback(self) -> None:
        if self.conn is not None:
            writer.rollback(self.conn)

    def _broken(self, message: str) -> None:
        self.warn_once("broken", f"{message}; forwarding goes on without recording")
        self._rollback()
        self.conn = None

    def warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message)


def _peak_rss_kb() -> int | None:
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    except (ImportError, OSError):
        return None
