"""The one database writer of a relay: the Recorder, run inside the recorder child process.

record/child.py decodes the chunks the relay sends through its pipe (record/pipe.py) and put()s each one
here, with the times it was read. The Recorder coordinates named parts on two threads of its own: the
indexing thread runs the row builder (record/rowbuilder.py: framing, classification, correlation and
redaction into batches of row parameters, no I/O); the writer thread hands each batch to the database
writer (record/dbwriter.py: the one connection, one transaction a batch, at least every COMMIT_INTERVAL;
SQLite releases the GIL while it works, so the two overlap), which has the WAL checkpointed
(store/checkpointer.py). What is taken but not stored is retained (record/retained.py), so that a close
that gives up puts it in a journal segment. When the database is broken, frames are counted as
unrecorded and dropped; forwarding never notices.
"""

from __future__ import annotations

import collections
import logging
import os
import queue
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from ..protocol.jsonrpc import A2C, C2A, ERR
from ..protocol.redact import Policy
from ..protocol.tracker import Tracker
from ..protocol.words import counted
from ..store.writer import Batch
from . import journal, retained
from .dbwriter import DbWriter, Identity
from .retained import Mark, Retention
from .rowbuilder import Gap, Item, Position, Resync, RowBuilder

log = logging.getLogger(__name__)

COMMIT_INTERVAL = 0.1
# The chunks read from the relay and not yet indexed (and those being indexed). Part of what a frozen disk
# leaves room for (docs/recording.md, Reliability); 4 MiB saved 4 MB of the recorder's peak when it stays full (a
# file-fed child) but no measurable RSS in floods, and would cost a freeze 4 MiB of frames.
MAX_QUEUE_BYTES = 8 << 20
SUB_BATCH_BYTES = 1 << 20  # queued bytes that wake the indexing thread before its COMMIT_INTERVAL tick
CLOSE_STALL = 15.0  # once closing, seconds without progress before the recorder gives up (ACP_RELAY_CLOSE_STALL)
_EOF = b""  # a chunk of b"" marks EOF on its stream


def close_stall() -> float:
    """CLOSE_STALL, or ACP_RELAY_CLOSE_STALL (seconds; tests shorten it)."""
    try:
        return max(0.1, float(os.environ["ACP_RELAY_CLOSE_STALL"]))
    except (KeyError, ValueError):
        return CLOSE_STALL


def from_config(path: Path, config: dict[str, Any], relay_pid: int, **options: Any) -> Recorder:
    """A Recorder for a relay's config (the child's argument, or a journal segment's Head)."""
    p = config.get("policy") or {}
    return Recorder(
        path,
        argv=config.get("argv") or [f"(relay {relay_pid})"],
        cwd=config.get("cwd") or "",
        label=config.get("label"),
        policy=Policy(enabled=p.get("enabled", True), paths=p.get("paths", []), regexes=p.get("regexes", [])),
        relay_pid=relay_pid,
        **options,
    )


class Recorder:
    """Owns the write path. Thread-safe put(); indexing and writing run on two threads of their own."""

    def __init__(
        self,
        path: Path,
        *,
        argv: list[str],
        cwd: str,
        label: str | None,
        policy: Policy | None = None,
        relay_pid: int | None = None,
        max_queue_bytes: int = MAX_QUEUE_BYTES,
        resume: int | None = None,
        quiet: bool = False,
        transport: str = "stdio",
        endpoint: str | None = None,
    ) -> None:
        self.path = path
        self.relay_pid = relay_pid or os.getpid()
        self.policy = policy or Policy()
        self.max_queue_bytes = max_queue_bytes
        self.started = time.monotonic()
        self.rows = RowBuilder(self.policy)
        who = Identity(argv, cwd, label, self.relay_pid, self.policy, transport, endpoint)
        self.writer = DbWriter(path, who, self.rows, resume=resume, quiet=quiet)
        self._queue: collections.deque[Item] = collections.deque()
        self._queued_bytes = 0  # queued and being processed: the bound covers both
        self._taken = 0  # of which the writer has taken (being processed)
        self._cond = threading.Condition()
        self._stopping = False
        self._final: dict[str, Any] = {}
        self._wire_seq = 0
        self._thread = threading.Thread(target=self._run, name="acp-relay-recorder", daemon=True)
        self._batches: queue.Queue[Batch | None] = queue.Queue(maxsize=2)
        self._writer = threading.Thread(target=self._write_loop, name="acp-relay-writer", daemon=True)
        self.journal_head: dict[str, Any] | None = None  # set by the recorder child: its close may give up
        self.spilled: Path | None = None  # the segment a close that gave up wrote
        self._retention = Retention()
        self._items_base = 0  # number of the first item of the list being processed
        self._submitted = 0  # batches handed to the writer thread, and written (stored, or counted lost)
        self._written = 0
        self._reserved: int | None = None  # the room retained.reserve took for the last row

    # -- the parts' state, as callers and tests read it -------------------------------------------------------
    @property
    def tracker(self) -> Tracker:
        return self.rows.tracker

    @tracker.setter
    def tracker(self, tracker: Tracker) -> None:
        self.rows.tracker = tracker

    @property
    def conn(self) -> sqlite3.Connection | None:
        return self.writer.conn

    @conn.setter
    def conn(self, conn: sqlite3.Connection | None) -> None:
        self.writer.conn = conn

    @property
    def connection_id(self) -> int | None:
        return self.writer.connection_id

    @connection_id.setter
    def connection_id(self, cid: int | None) -> None:
        self.writer.connection_id = cid

    @property
    def frames(self) -> int:
        return self.writer.frames

    @frames.setter
    def frames(self, n: int) -> None:
        self.writer.frames = n

    @property
    def unrecorded(self) -> int:
        return self.writer.unrecorded

    @property
    def final_unrecorded(self) -> int | None:
        return self.writer.final_unrecorded

    # -- producer side (the child's pipe reader) ------------------------------------------------------------
    def put(self, stream: str, chunk: bytes, ts: float | None = None, mono: float | None = None) -> None:
        """Queue a chunk as read (with the times it was read, when the reader knows them better).
        Blocks only while the queue is over its byte bound."""
        if ts is None or mono is None:
            ts, mono = time.time(), time.monotonic() - self.started
        self._enqueue((stream, chunk, ts, mono), len(chunk))

    def gap(self, stream: str, lines: int, ends_line: bool, ts: float, mono: float) -> None:
        """The relay dropped bytes of `stream` here (its bounds were reached): they ended `lines` lines, and
        ended on a newline or not. The wire's seq goes on counting them."""
        self._enqueue((stream, Gap(lines, ends_line), ts, mono), 0)

    def resync(self, seq: int, mid: list[bool], sizes: list[int] | None = None) -> None:
        """What follows starts where the wire had completed `seq` frames, inside a line on the streams `mid`
        says (a journal segment's STATE): for a recovery, whose earlier bytes are gone. `sizes`: each
        stream's bytes before it, when the segment knows them."""
        self._enqueue((C2A, Resync(seq, mid, sizes), 0.0, 0.0), 0)

    def _enqueue(self, item: Item, size: int) -> None:
        chunk = item[1]
        with self._cond:
            while self._queued_bytes > self.max_queue_bytes and not self._stopping:
                self._cond.wait(0.05)
            self._queue.append(item)
            self._retention.keep(item)
            self._queued_bytes += size
            # Group commit: small traffic waits for the writer's COMMIT_INTERVAL tick instead of waking it
            # (and costing a transaction) per chunk; a full sub-batch or an EOF wakes it at once.
            if self._queued_bytes - self._taken >= SUB_BATCH_BYTES or not chunk:
                self._cond.notify_all()

    def eof(self, stream: str) -> None:
        self.put(stream, _EOF)

    # -- lifecycle --------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the writer; it opens the database on its own thread, so the agent starts at once."""
        self._thread.start()

    def record_spawn(self, agent_pid: int | None) -> None:
        self._final["agent_pid"] = agent_pid

    def close(self, *, stall: float | None = None, wire_seq: int | None = None, **final: Any) -> bool:
        """Drain what is queued, write the connection's last row, and stop the thread.

        Waits as long as the recorder makes progress (a commit, a transaction under way, or CPU used by the
        indexing thread: one 64 MiB line on a machine whose CPUs other work takes is minutes of indexing
        with no commit), but gives up after `stall` seconds of waiting without any (another process's lock
        held on): the relay has exited by then and this process finishes alone. Time in which this process
        did not run (its CPU taken by others, SIGSTOP) is not counted as waiting.
        """
        stall = close_stall() if stall is None else stall
        self._final.update(final)
        self._wire_seq = wire_seq or 0  # frames the wire carried, when the caller knows better than the tracker
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        w = self.writer
        waited, last, commits, cpu = 0.0, time.monotonic(), w.progress, self._indexing_cpu()
        while self._thread.is_alive() and waited <= stall:
            self._thread.join(0.1)
            now, used = time.monotonic(), self._indexing_cpu()
            if w.writing or w.progress != commits or used > cpu + 0.0005:
                waited = 0.0
            else:
                waited += min(now - last, 0.15)  # a longer step is time we were not scheduled
            last, commits, cpu = now, w.progress, used
        if self._thread.is_alive():
            self._give_up()
            return False
        return True

    def _give_up(self) -> None:
        """Close waited in vain: what is not stored goes to a journal segment (when this recorder has a
        journal_head) for `acp-relay recover` or the next relay start, and stderr says how many frames wait
        there. Without one (a recovery's recorder: its source segments stay), or when the segment cannot be
        written, say what was not recorded."""
        with self._cond:
            self.writer.given_up = True  # the writer stops retrying, and nothing more is reported from here
            at, items = self._retention.unstored(self._written)
        self._release()
        if self.journal_head is None:
            self.writer.warn_once("timeout", "the database did not drain in time; some frames were not recorded")
            return
        mono = time.monotonic() - self.started
        recs = retained.records(at, items, self._final, time.time(), mono)
        waiting = retained.frames_waiting(at, recs)
        path = retained.next_segment(self.path, self.relay_pid)
        try:
            retained.write_segment(path, self.journal_head, at, recs, mono)
        except OSError as exc:
            log.warning(
                f"the database stayed locked past the close wait and the journal {path} cannot be written "
                f"({exc}); {counted(waiting, 'frame')} {'was' if waiting == 1 else 'were'} not recorded"
            )
            return
        self.spilled = path
        log.warning(
            f"the database stayed locked past the close wait: {counted(waiting, 'frame')} {'waits' if waiting == 1 else 'wait'} in the journal {path}; "
            f"store them with `acp-relay recover --db {self.path}` once it is free (the next relay start does it too)"
        )

    def _mark(self, done: int) -> None:
        """The indexing thread has taken `done` items of the list it is processing, and submitted batches
        for all it could: remember where the wire is, so the retained items before it can go once written."""
        mark = Mark(self._submitted, self._items_base + done, self.rows.position())
        with self._cond:
            self._retention.mark(mark, self._written)

    def _indexing_cpu(self) -> float:
        """CPU seconds the indexing thread has used (0 once it has ended)."""
        try:
            return time.clock_gettime(time.pthread_getcpuclockid(self._thread.ident or 0))
        except (OSError, AttributeError):
            return 0.0

    # -- indexing thread ---------------------------------------------------------------------------------------
    def _run(self) -> None:
        self._open()
        while True:
            with self._cond:
                if not self._queue and not self._stopping:
                    self._cond.wait(COMMIT_INTERVAL)
                # In the order given: the wire's (the relay's pumps queue each chunk before forwarding it,
                # record/pipe.py), and the seq it counts for a journal is the order it sent them in.
                items = list(self._queue)
                self._queue.clear()
                self._taken = self._queued_bytes
                stopping = self._stopping
            if items:
                self._process(items)
                self._mark(len(items))
                self._items_base += len(items)
                items = []  # drop the chunk references before the bytes are counted free
            with self._cond:
                self._queued_bytes -= self._taken  # only now are those chunks' bytes free
                self._taken = 0
                self._cond.notify_all()
            if stopping and not self._queue:
                break
        if self._writer.is_alive():
            self._batches.put(None)
            self._writer.join()
        self.writer.finish(self._final, self._wire_seq)
        if self.writer.unwritten is not None:
            self._keep_row(*self.writer.unwritten)
        self._release()

    def _keep_row(self, carried: int, fields: dict[str, Any]) -> None:
        """The connection's last row could not be written (a full disk, a read-only file): what it should say
        goes in a journal segment of this relay's, holding no frame, only where the wire ended (`carried`
        frames, each stream's bytes) and the row's fields, so that `acp-relay recover` or the next relay
        start writes the row exactly (frames_unrecorded: what the wire carried less what is stored). It is
        written in the room reserved at the start (retained.reserve), so a full disk still takes it.
        Without a journal_head (a recovery's recorder) its source segments stay instead."""
        if self.journal_head is None:
            return
        sizes = [self.rows.bytes[s] for s in (C2A, A2C, ERR)]
        at = Position(carried, [((), None, 0)] * 3, [False] * 3, sizes)
        close = journal.Close(fields, time.time(), time.monotonic() - self.started)
        with self._cond:
            fd, self._reserved = self._reserved, None
        try:
            path = retained.keep_row(self.path, self.relay_pid, fd, self.journal_head, at, close)
        except OSError as exc:
            log.warning(f"the connection's row can be neither finished nor kept beside the database ({exc})")
            return
        finally:
            retained.release(self.path, self.relay_pid, fd)
        self.spilled = path
        log.warning(
            f"the connection's row waits in the journal {path}; `acp-relay recover --db {self.path}` writes it "
            "once the database can be written (the next relay start does it too)"
        )

    def _release(self) -> None:
        """The reserved room, once the row is written (or the close gave up): its file goes."""
        with self._cond:
            fd, self._reserved = self._reserved, None
        retained.release(self.path, self.relay_pid, fd)

    def _open(self) -> None:
        if self.journal_head is not None:  # a recorder child's: room for its last row, should the disk fill
            fd = retained.reserve(self.path, self.relay_pid)
            with self._cond:
                self._reserved, fd = (fd, None) if not self.writer.given_up else (None, fd)
            retained.release(self.path, self.relay_pid, fd)
        self.writer.open()

    def _process(self, items: list[Item]) -> None:
        """Index `items` into batches for the writer, marking where the wire is after each sub-batch."""
        for batch, done in self.rows.build(items, self.connection_id or 0):
            self._submit(batch)
            if done is not None:
                self._mark(done)

    def _submit(self, batch: Batch) -> None:
        """Hand a batch to the writer thread (a short queue: when SQLite falls behind, indexing waits)."""
        if not self._writer.is_alive():
            self._writer.start()
        self._submitted += 1
        self._batches.put(batch)

    def _insert(self, batch: Batch) -> None:
        self.writer.insert(batch)

    def _write_loop(self) -> None:
        while (batch := self._batches.get()) is not None:
            self.writer.write(batch)
            with self._cond:
                self._written += 1
                self._retention.forget(self._written)
