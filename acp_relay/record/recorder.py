"""The one database writer of a relay: the Recorder, run inside the recorder child process.

record/child.py decodes the chunks the relay sends through its pipe (record/pipe.py) and put()s each one
here, with the times it was read. Two threads do the rest: the indexing thread frames, classifies,
correlates and redacts the queued chunks into batches of row parameters, and the writer thread inserts each
batch in one transaction, at least every COMMIT_INTERVAL (SQLite releases the GIL while it works, so the
two overlap). The SQL is store/writer.py's. When the database is broken, frames are counted as unrecorded
and dropped; forwarding never notices.
"""

from __future__ import annotations

import collections
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from ..protocol.framing import LineFramer
from ..protocol.jsonrpc import A2C, C2A, ERR, NET
from ..protocol.redact import WALK_FROM, Policy, redact_argv, redact_line, watched_keys_in
from ..protocol.tracker import Frame, Tracker
from ..store import db, writer
from ..store.checkpointer import CHECKPOINT_BYTES, Checkpointer
from ..store.liveness import mark_interrupted
from ..store.writer import (
    CACHE_KB,
    QUICK_WIDTH,
    Batch,
    _redacted_quick_row,
    frame_rows,
    is_busy,
    json_or_null,
    redact_frame,
    transport_row,
)
from . import journal

COMMIT_INTERVAL = 0.1
# The chunks read from the relay and not yet indexed (and those being indexed). Part of what a frozen disk
# leaves room for (README Reliability); 4 MiB saved 4 MB of the recorder's peak when it stays full (a
# file-fed child) but no measurable RSS in floods, and would cost a freeze 4 MiB of frames.
MAX_QUEUE_BYTES = 8 << 20
SUB_BATCH_BYTES = 1 << 20
STDERR_TAIL_LINES = 20
WATCH_CHUNK_SHIFT = WALK_FROM.bit_length() - 1  # a chunk is scanned whole when its frames average < WALK_FROM
FILE_CHECK_INTERVAL = 1.0  # seconds between looks at whether the database file is still ours
CLOSE_STALL = 15.0  # once closing, seconds without progress before the recorder gives up (ACP_RELAY_CLOSE_STALL)
_EOF = b""  # a chunk of b"" marks EOF on its stream


def close_stall() -> float:
    """CLOSE_STALL, or ACP_RELAY_CLOSE_STALL (seconds; tests shorten it)."""
    try:
        return max(0.1, float(os.environ["ACP_RELAY_CLOSE_STALL"]))
    except (KeyError, ValueError):
        return CLOSE_STALL


def from_config(
    path: Path, config: dict[str, Any], warn: Callable[[str], None], relay_pid: int, **options: Any
) -> Recorder:
    """A Recorder for a relay's config (the child's argument, or a journal segment's Head)."""
    p = config.get("policy") or {}
    return Recorder(
        path,
        argv=config.get("argv") or [f"(relay {relay_pid})"],
        cwd=config.get("cwd") or "",
        label=config.get("label"),
        warn=warn,
        policy=Policy(enabled=p.get("enabled", True), paths=p.get("paths", []), regexes=p.get("regexes", [])),
        relay_pid=relay_pid,
        **options,
    )


class Recorder:
    """Owns the write connection. Thread-safe put(); indexing and writing run on two threads of their own."""

    def __init__(
        self,
        path: Path,
        *,
        argv: list[str],
        cwd: str,
        label: str | None,
        warn: Callable[[str], None],
        policy: Policy | None = None,
        relay_pid: int | None = None,
        max_queue_bytes: int = MAX_QUEUE_BYTES,
        resume: int | None = None,
        quiet: bool = False,
        transport: str = "stdio",
        endpoint: str | None = None,
    ) -> None:
        self.transport, self.endpoint = transport, endpoint
        self._net: list[tuple[Any, ...]] = []  # transport events waiting for the next batch
        self.relay_pid = relay_pid or os.getpid()
        self.policy = policy or Policy()
        self.path = path
        self.argv, self.cwd, self.label = argv, cwd, label
        self.warn = warn
        self.max_queue_bytes = max_queue_bytes
        self.started = time.monotonic()
        self.tracker = Tracker()
        self.stderr_framer = LineFramer()
        self.stderr_tail: collections.deque[bytes] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self.conn: sqlite3.Connection | None = None
        self.connection_id: int | None = None
        self.quiet = quiet  # no count of frames not recorded on stderr (the caller says it)
        self.resume = resume  # an existing connection to add to (a journal's recovery), not a new one
        self.skip_through = 0  # with resume: frames up to this seq are stored already
        self.frames = 0
        self.unrecorded = 0
        self.final_unrecorded: int | None = None  # the exact count written in the row at close
        # Streams whose current line lost bytes before it reached us (a GAP, or a journal that starts
        # inside a line): its bytes up to the next newline are skipped, and it counts as a frame not recorded.
        self._skip = {C2A: False, A2C: False, ERR: False}
        self.bytes = {C2A: 0, A2C: 0, ERR: 0}
        self._warned: set[str] = set()
        self._queue: collections.deque[tuple[str, bytes, float, float]] = collections.deque()
        self._queued_bytes = 0  # queued and being processed: the bound covers both
        self._taken = 0  # of which the writer has taken (being processed)
        self._progress = 0.0  # monotonic time of the writer's last success
        self._cond = threading.Condition()
        self._stopping = False
        self._final: dict[str, Any] = {}
        self._wire_seq = 0
        self._thread = threading.Thread(target=self._run, name="acp-relay-recorder", daemon=True)
        self._batches: queue.Queue[Batch | None] = queue.Queue(maxsize=2)
        self._writer = threading.Thread(target=self._write_loop, name="acp-relay-writer", daemon=True)
        self._checkpointer = Checkpointer(path)
        self._checkpointed_at = 0  # sum(self.bytes) at the last checkpoint
        self._writing = False  # inside a transaction (a big one takes long, and is progress)
        self._inode = -1  # the database file's, to notice it deleted under us
        self._looked_at = 0.0
        # What is not stored yet, kept raw so that a close that gives up (another writer's lock held past
        # close_stall()) can put it in a journal segment instead of losing it: every item queued since the
        # last Mark whose batches are written, and that Mark (where the wire was then).
        self.journal_head: dict[str, Any] | None = None  # set by the recorder child: it may give up that way
        self.spilled: Path | None = None  # the segment a close that gave up wrote
        self._retained: collections.deque[tuple[str, Any, float, float]] = collections.deque()
        self._retained_base = 0  # number of the first retained item (items count from 0 in queue order)
        self._items_base = 0  # number of the first item of the list being processed
        self._submitted = 0  # batches handed to the writer thread, and written (stored, or counted lost)
        self._written = 0
        self._marks: collections.deque[Mark] = collections.deque()
        self._stored = Mark(0, 0, 0, [((), None, 0)] * 3, [False] * 3, [0, 0, 0])
        self._given_up = False

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

    def _enqueue(self, item: tuple[str, Any, float, float], size: int) -> None:
        chunk = item[1]
        with self._cond:
            while self._queued_bytes > self.max_queue_bytes and not self._stopping:
                self._cond.wait(0.05)
            self._queue.append(item)
            self._retained.append(item)
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
        waited, last, commits, cpu = 0.0, time.monotonic(), self._progress, self._indexing_cpu()
        while self._thread.is_alive() and waited <= stall:
            self._thread.join(0.1)
            now, used = time.monotonic(), self._indexing_cpu()
            if self._writing or self._progress != commits or used > cpu + 0.0005:
                waited = 0.0
            else:
                waited += min(now - last, 0.15)  # a longer step is time we were not scheduled
            last, commits, cpu = now, self._progress, used
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
            self._given_up = True  # the writer stops retrying, and nothing more is reported from here
            mark = self._stored_mark()
            items = list(self._retained)[max(0, mark.items - self._retained_base) :]
        if self.journal_head is None:
            self._warn_once("timeout", "the database did not drain in time; some frames were not recorded")
            return
        count = journal.WireCount(mark.seq, list(mark.mid))
        now, mono = time.time(), time.monotonic() - self.started
        pieces: list[bytes] = []
        for code, (parts, big, n) in enumerate(mark.held):
            held = bytes(big[:n]) if big is not None else b"".join(parts)
            if held:
                pieces += journal.record(code, held, now, mono)
                count.data(code, held)
        for stream, chunk, ts, at in items:
            code = _CODES.get(stream, -1)
            if isinstance(chunk, Gap):
                pieces += journal.record(journal.GAP, journal.GAP_BODY.pack(code, *chunk), ts, at)
                count.gap(code, *chunk)
            elif isinstance(chunk, Resync):
                state = {"seq": chunk.seq, "mid": chunk.mid, "bytes": chunk.bytes}
                pieces += journal.record(journal.STATE, orjson.dumps(state), ts, at)
                count.seq, count.mid = chunk.seq, list(chunk.mid)
            elif code < 0:
                pieces += journal.record(journal.TRANSPORT, chunk, ts, at) if chunk else []
            elif not chunk:
                pieces += journal.record(journal.EOF_BASE + code, b"", ts, at)
                count.eof(code)
            else:
                pieces += journal.record(code, chunk, ts, at)
                count.data(code, chunk)
        pieces += journal.record(journal.CLOSE, orjson.dumps(self._final), now, mono)
        waiting = count.seq - mark.seq
        taken = [n for n, _ in journal.segments(self.path, self.relay_pid).get(self.relay_pid, [])]
        path = journal.segment_path(self.path, self.relay_pid, max(taken, default=-1) + 1)
        state = {"seq": mark.seq, "mid": list(mark.mid), "bytes": mark.bytes}
        try:
            fd = journal.create_segment(path, self.journal_head, state, now, mono)
            try:
                journal.write_all(fd, pieces)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            try:
                path.unlink()
            except OSError:
                pass
            self.warn(
                f"the database stayed locked past the close wait and the journal {path} cannot be written "
                f"({exc}); {waiting} frames were not recorded"
            )
            return
        self.spilled = path
        self.warn(
            f"the database stayed locked past the close wait: {waiting} frames wait in the journal {path}; "
            f"store them with `acp-relay recover --db {self.path}` once it is free (the next relay start does it too)"
        )

    def _stored_mark(self) -> Mark:
        """The newest Mark whose batches the writer has written (self._cond held)."""
        while self._marks and self._marks[0].batches <= self._written:
            self._stored = self._marks.popleft()
        return self._stored

    def _mark(self, done: int) -> None:
        """The indexing thread has taken `done` items of the list it is processing, and submitted batches
        for all it could: remember where the wire is, so the retained items before it can go once written."""
        framers = (self.tracker.framers[C2A], self.tracker.framers[A2C], self.stderr_framer)
        held = [_held(f) for f in framers]
        mark = Mark(
            self._submitted,
            self._items_base + done,
            self.tracker.seq,
            held,
            [self._skip[C2A], self._skip[A2C], self._skip[ERR]],
            [self.bytes[s] - f.pending for s, f in zip((C2A, A2C, ERR), framers, strict=True)],
        )
        with self._cond:
            self._marks.append(mark)
            self._forget()

    def _forget(self) -> None:
        """Drop the retained items a written Mark covers (self._cond held)."""
        mark = self._stored_mark()
        while self._retained_base < mark.items and self._retained:
            self._retained.popleft()
            self._retained_base += 1

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
        self._finish()

    def _open(self) -> None:
        """Open the database and add this connection's row, waiting out other writers' locks."""
        while True:
            try:
                if self.conn is None:
                    self.conn = db.connect(self.path)
                    self._inode = os.stat(self.path).st_ino
                    self.conn.execute("PRAGMA wal_autocheckpoint = 0")  # the checkpointer's job, not the commit's
                    self._checkpointer.start()
                if self.resume is not None:
                    self._resume(self.conn, self.resume)
                    return
                self.conn.execute("BEGIN IMMEDIATE")
                mark_interrupted(self.conn)
                self.connection_id = writer.open_connection(
                    self.conn,
                    started_at=time.time(),
                    argv=redact_argv(self.argv)[0] if self.policy.enabled else self.argv,
                    cwd=self.cwd,
                    label=self.label,
                    relay_pid=self.relay_pid,
                    recorder_pid=os.getpid(),
                    redaction=self.policy.describe(),
                    transport=self.transport,
                    endpoint=self.endpoint,
                )
                self.conn.execute("COMMIT")
                self._progress = time.monotonic()
                return
            except (sqlite3.Error, OSError) as exc:
                if is_busy(exc):
                    self._rollback()
                    self._warn_once("busy", f"the database is busy ({exc}); queuing frames until it frees up")
                    if self._given_up:  # close gave up waiting for the lock (see _give_up)
                        self._broken(f"the database {self.path} stayed locked")
                        return
                    time.sleep(0.05)
                    continue
                self._broken(f"cannot open the database {self.path}: {exc}")
                return

    def _resume(self, conn: sqlite3.Connection, cid: int) -> None:
        """Add to connection `cid`: frames it holds already are not stored twice (see Resync)."""
        row = writer.connection_bytes(conn, cid)
        if row is None:
            raise sqlite3.DatabaseError(f"no connection {cid}")
        self.bytes = {C2A: row[0], A2C: row[1], ERR: row[2]}
        _, self.skip_through = writer.stored_frames(conn, cid)
        self.connection_id = cid
        self._progress = time.monotonic()

    def _rollback(self) -> None:
        try:
            if self.conn is not None and self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
                self.conn.execute(f"PRAGMA cache_size = -{CACHE_KB}")  # as _insert leaves it at commit
        except sqlite3.Error:
            pass

    def _broken(self, message: str) -> None:
        self._warn_once("broken", f"{message}; forwarding goes on without recording")
        self._rollback()
        self.conn = None

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            self.warn(message)

    def _process(self, items: list[tuple[str, bytes, float, float]]) -> None:
        rows: list[tuple[Any, ...]] = []
        members: list[tuple[Any, ...]] = []
        stderr_rows: list[tuple[Any, ...]] = []
        size = 0
        tracker = self.tracker
        cid = self.connection_id or 0
        policy = self.policy
        might_apply = policy.might_apply if policy.enabled else None
        might_apply_one = policy.might_apply_one if policy.enabled else None
        # might_apply_without_keys by method, asked once per method (0.4 us a call, on every frame of a flood)
        keyless = _PerMethod(policy.might_apply_without_keys)
        dumps = orjson.dumps
        skip = self._skip
        skip_through = self.skip_through
        for i, (stream, chunk, ts, mono) in enumerate(items):
            if type(chunk) is not bytes:
                self._control(stream, chunk)
                continue
            if stream == NET:  # a transport event (JSON), not a frame: a row of transport_events
                if chunk:
                    self._net.append(transport_row(cid, chunk, ts, mono))
                continue
            if skip[stream]:
                rest = self._skip_lost_line(stream, chunk)
                if rest is None:
                    continue
                chunk = rest
            if stream == ERR:
                self.bytes[ERR] += len(chunk)
                lines = [(line, 0) for line in self.stderr_framer.feed(chunk)] if chunk else []
                if not chunk:
                    last = self.stderr_framer.finish()
                    lines = [] if last is None else [(last, 1)]
                for line, unterminated in lines:
                    if policy.enabled:
                        line, _ = redact_line(line, policy)
                    self.stderr_tail.append(line)
                    stderr_rows.append((cid, ts, mono, line, unterminated))
                continue
            self.bytes[stream] += len(chunk)
            carried = tracker.framers[stream].pending  # the first line completed may have begun earlier
            new = tracker.feed_rows(stream, chunk, ts, mono) if chunk else tracker.eof(stream, ts, mono)
            # Small frames: one scan of the chunk for the keys redaction watches instead of one per frame
            # (a call per frame is most of a 200 B frame's scan). Not for big ones, whose parsed keys are
            # looked at instead of their bytes (see redact.WALK_FROM).
            clean = (
                bool(chunk)
                and might_apply_one is not None
                and len(new) << WATCH_CHUNK_SHIFT > len(chunk)
                and not watched_keys_in(chunk)
            )
            if skip_through and new:  # a recovery: what the recorder had stored already stays as it is
                new = [f for f in new if (f.seq if isinstance(f, Frame) else f[0]) > skip_through]
            first = new[0] if carried and new else None  # its bytes were not all in this chunk
            # QuickRows of this chunk (one direction, ts and mono) that follow each other in seq with the
            # same method, session, update kind and details go into one run: a row of QUICK_WIDTH whose
            # raw is the list of their bytes (see writer.insert_runs). `run` is the open one's list.
            run: list[bytes] | None = None
            run_seq = 0
            run_key: tuple[Any, ...] = ()
            for f in new:
                if not isinstance(f, Frame):  # a QuickRow: a plain notification (the bulk of a flood)
                    if might_apply_one is not None and (
                        keyless[f[5]] if clean and f is not first else might_apply_one(f[4], f[5], f[9])
                    ):
                        rows.append(_redacted_quick_row(f, policy))
                        run = None
                    elif run is not None and f[0] == run_seq and (f[5], f[6], f[7], f[8]) == run_key:
                        run.append(f[4])
                        run_seq += 1
                    else:
                        run = [f[4]]
                        run_seq, run_key = f[0] + 1, (f[5], f[6], f[7], f[8])
                        details = None if f[8] is None else dumps(f[8]).decode()
                        rows.append((f[0], f[1], f[2], f[3], run, f[5], f[6], f[7], details))
                    continue
                run = None
                ms = f.index.messages
                # A frame that is not JSON-RPC (invalid UTF-8, a cut line, stray output) gets the text rules.
                if might_apply is not None and (
                    not ms
                    or might_apply(
                        f.raw,
                        tuple(m.method for m in ms),
                        [m.message for m in ms] if f.index.kind == "batch" else ms[0].message,
                    )
                ):
                    redact_frame(f, policy)
                for m in ms:
                    m.message = None  # tracked and redacted: the parsed copy (as big as the frame) can go
                frame_rows(cid, [f], rows, members)
            size += len(chunk)
            if size >= SUB_BATCH_BYTES:
                self._submit(self._prepare(rows, members, stderr_rows))
                self._mark(i + 1)
                rows, members, stderr_rows, size = [], [], [], 0
        if rows or stderr_rows or tracker.dirty_sessions or tracker.info_dirty or tracker.backfill or self._net:
            self._submit(self._prepare(rows, members, stderr_rows))

    def _control(self, stream: str, item: Any) -> None:
        """A Gap or a Resync: the stream's pending partial line is lost; seq goes on as the wire's."""
        framer = self.stderr_framer if stream == ERR else self.tracker.framers[stream]
        if isinstance(item, Gap):
            framer.finish()
            if stream != ERR:
                self.tracker.seq += item.lines
            self._skip[stream] = not item.ends_line
            return
        self.tracker.seq = item.seq
        if item.bytes is not None:
            self.bytes = dict(zip((C2A, A2C, ERR), item.bytes, strict=False))
        for s, mid in zip((C2A, A2C, ERR), item.mid, strict=False):
            (self.stderr_framer if s == ERR else self.tracker.framers[s]).finish()
            self._skip[s] = bool(mid)

    def _skip_lost_line(self, stream: str, chunk: bytes) -> bytes | None:
        """Drop the rest of a line that lost bytes (it is one frame, not recorded); None when the whole
        chunk was part of it. At EOF (b"") the line ends there."""
        end = chunk.find(b"\n") if chunk else -1
        if chunk and end < 0:
            self.bytes[stream] += len(chunk)
            return None
        self._skip[stream] = False
        if stream != ERR:
            self.tracker.seq += 1
        if not chunk:
            return chunk
        self.bytes[stream] += end + 1
        rest = chunk[end + 1 :]
        return rest or None

    def _prepare(
        self, rows: list[tuple[Any, ...]], members: list[tuple[Any, ...]], stderr_rows: list[tuple[Any, ...]]
    ) -> Batch:
        """Everything one transaction writes, taken from the tracker now: the writer thread inserts it while
        this thread indexes the next chunks (SQLite lets go of the GIL while it works)."""
        cid = self.connection_id or 0
        tracker = self.tracker
        sessions = writer.session_rows(cid, (tracker.sessions[k] for k in tracker.dirty_sessions))
        info = tracker.info
        frames = sum(len(r[4]) if len(r) == QUICK_WIDTH else 1 for r in rows)
        update = (
            frames,
            self.bytes[C2A],
            self.bytes[A2C],
            self.bytes[ERR],
            info.protocol_version,
            json_or_null(self._redacted_info("params", "clientInfo", info.client_info)),
            json_or_null(self._redacted_info("result", "agentInfo", info.agent_info)),
            cid,
        )
        backfill = [(sid, cid, seq) for seq, sid in tracker.backfill]
        net, self._net = self._net, []
        batch = Batch(rows, members, stderr_rows, backfill, sessions, update, net, frames)
        tracker.backfill = []
        tracker.dirty_sessions = set()
        tracker.info_dirty = False
        return batch

    def _redacted_info(self, member: str, key: str, value: Any) -> Any:
        """clientInfo / agentInfo as the stored initialize frame has them: the tracker read them from the
        message before redaction, and the connection row must not keep what the frame's copy lost."""
        if value is None:
            return None
        try:
            out, _ = self.policy.apply({"method": "initialize", member: {key: value}})
            return out[member][key]
        except Exception:  # a policy failure withholds the value, as it does a frame
            return {"acp-relay": "withheld: redaction failed"}

    def _submit(self, batch: Batch) -> None:
        """Hand a batch to the writer thread (a short queue: when SQLite falls behind, indexing waits)."""
        if not self._writer.is_alive():
            self._writer.start()
        self._submitted += 1
        self._batches.put(batch)

    def _write_loop(self) -> None:
        while (batch := self._batches.get()) is not None:
            self._write(batch)
            with self._cond:
                self._written += 1
                self._forget()

    def _write(self, batch: Batch) -> None:
        """Insert one batch in one transaction; retry while another writer holds the lock."""
        n = batch.frames
        if self.conn is None or self.connection_id is None:
            self.unrecorded += n
            return
        while True:
            try:
                self._insert(batch)
                self._checkpoint()
                self.frames += n
                self._progress = time.monotonic()
                if self._progress - self._looked_at > FILE_CHECK_INTERVAL:
                    self._check_file(batch)
                return
            except Exception as exc:
                self._rollback()
                if is_busy(exc):
                    # Wait for the lock (the queue fills, then the relay spills to its journal). Once closing,
                    # close()'s stall rule decides how long: when it gives up, this batch is in its journal.
                    if self._given_up:
                        return
                    self._warn_once("busy", f"the database is busy ({exc}); queuing frames until it frees up")
                    continue
                self.unrecorded += n
                self._warn_once("write", f"cannot write to {self.path}: {exc}; counting frames not recorded")
                return

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
            default=self.tracker.seq,
        )
        why = f"the database file was deleted or replaced during the session; frames up to seq {seq} went with it"
        self.warn(f"{self.path}: {why}; recording goes on in a new database there")
        self._checkpointer.stop()
        try:
            self.conn.close() if self.conn is not None else None
            self.conn = db.connect(self.path)
            self.conn.execute("PRAGMA wal_autocheckpoint = 0")
            self._inode = os.stat(self.path).st_ino
            writer.open_connection(
                self.conn,
                connection_id=self.connection_id,
                started_at=time.time(),
                argv=self.argv,
                cwd=self.cwd,
                label=self.label,
                relay_pid=self.relay_pid,
                recorder_pid=os.getpid(),
                redaction=self.policy.describe(),
                error=why,
            )
            writer.finish_connection(
                self.conn,
                self.connection_id,
                {"bytes_c2a": self.bytes[C2A], "bytes_a2c": self.bytes[A2C], "bytes_stderr": self.bytes[ERR]},
            )
            self._final.setdefault("error", why)
            self._checkpointer = Checkpointer(self.path)
            self._checkpointer.start()
        except (sqlite3.Error, OSError) as exc:
            self._broken(f"cannot make a new database at {self.path}: {exc}")

    def _insert(self, batch: Batch) -> None:
        assert self.conn is not None
        conn = self.conn
        if self._checkpointer.tail_due:  # so that this transaction starts the WAL over (see checkpointer.py)
            self._checkpointer.tail_due = False
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            except sqlite3.Error:  # a checkpoint that fails costs the WAL's size, never frames
                pass
        try:
            writer.insert_batch(conn, int(self.connection_id or 0), batch, self._set_writing)
        finally:
            self._writing = False

    def _set_writing(self, on: bool) -> None:
        self._writing = on

    def _checkpoint(self) -> None:
        """Every CHECKPOINT_BYTES: wake the checkpointer, or checkpoint here when it has fallen behind."""
        total = sum(self.bytes.values())
        ck = self._checkpointer
        if total - self._checkpointed_at < CHECKPOINT_BYTES or not ck.idle:
            return
        self._checkpointed_at = total
        if not ck.behind:
            ck.wake()
            return
        assert self.conn is not None
        try:
            _, log, copied = self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            ck.behind = ck.failed or log - copied > 0
        except sqlite3.Error:
            pass

    def _finish(self) -> None:
        self._checkpointer.stop()
        if self._given_up:  # close's journal segment holds what is not stored, and says so
            return
        final = self._final
        if self.conn is None or self.connection_id is None:
            self._report_unrecorded(self.tracker.seq - self.frames)
            return
        tail = b"\n".join(self.stderr_tail).decode("utf-8", "replace") or None
        try:
            stored, _ = writer.stored_frames(self.conn, self.connection_id)
        except sqlite3.Error:
            stored = self.frames
        # Exact: every line the wire carried has a seq (lost ones too: GAPs count them), so what is not in
        # the table is the difference, whatever lost it (a bound, a dead recorder, a failed write).
        unrecorded = max(0, max(self.tracker.seq, self._wire_seq) - stored)
        fields = {
            "ended_at": final.get("ended_at") or time.time(),
            "status": final.get("status", "ended"),
            "exit_code": final.get("exit_code"),
            "exit_signal": final.get("exit_signal"),
            "closed_by": final.get("closed_by"),
            "error": final.get("error"),
            "agent_pid": final.get("agent_pid"),
            "unanswered": json_or_null(self.tracker.unanswered() or None),
            "stderr_tail": tail,
            "recorder_rss_kb": _peak_rss_kb(),
            "frames_unrecorded": unrecorded,
        }
        if self.resume is not None:  # a recovery adds to a row: it keeps what the recorder had written
            fields = {k: v for k, v in fields.items() if v is not None and k not in ("recorder_rss_kb", "unanswered")}
        try:
            writer.finish_connection(self.conn, self.connection_id, fields)
            self.final_unrecorded = unrecorded
        except sqlite3.Error as exc:
            self._warn_once("final", f"could not write the connection's final row: {exc}")
        self._report_unrecorded(unrecorded)
        try:
            self.conn.close()
        except sqlite3.Error:
            pass
        db._secure_files(self.path)

    def _report_unrecorded(self, n: int) -> None:
        """The one count of frames not recorded on stderr: the row's (or, with no row, the same difference)."""
        if n > 0 and not self.quiet:
            where = f" (connection {self.connection_id})" if self.connection_id is not None else ""
            self.warn(f"{n} frames were not recorded{where}")


class _PerMethod(dict[str, bool]):
    """A function of a method name, each answer kept (the policy does not change while a batch is indexed)."""

    def __init__(self, fn: Callable[[str], bool]) -> None:
        super().__init__()
        self.fn = fn

    def __missing__(self, method: str) -> bool:
        self[method] = hit = self.fn(method)
        return hit


class Gap(NamedTuple):
    """Bytes the relay dropped on a stream: the lines they ended, and whether they ended on a newline."""

    lines: int
    ends_line: bool


class Resync(NamedTuple):
    """Frames completed on the wire so far, and which streams (c2a, a2c, stderr) are inside a line; and
    when known (a segment written by a close that gave up) the bytes of each stream that came before."""

    seq: int
    mid: list[bool]
    bytes: list[int] | None = None


class Mark(NamedTuple):
    """Where the wire was once the indexing thread had taken `items` items and submitted `batches`
    batches: the seq, each stream's line held unfinished (LineFramer parts, or its big buffer and the
    length then: it only grows), whether it was skipping a lost line, and its bytes before that line."""

    batches: int
    items: int
    seq: int
    held: list[tuple[tuple[bytes, ...], bytearray | None, int]]
    mid: list[bool]
    bytes: list[int]


_CODES = {C2A: 0, A2C: 1, ERR: 2}  # journal stream codes; NET is a transport record


def _held(framer: LineFramer) -> tuple[tuple[bytes, ...], bytearray | None, int]:
    """A reference to the unfinished line a framer holds, cheap enough to take at every Mark."""
    big = framer._big
    return (tuple(framer._parts), big, len(big)) if big is not None else (tuple(framer._parts), None, 0)


def _peak_rss_kb() -> int | None:
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    except (ImportError, OSError):
        return None
