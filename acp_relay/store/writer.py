"""The one database writer of a relay: the Recorder, run inside the recorder child process.

record/child.py decodes the chunks the relay sends through its pipe (record/pipe.py) and put()s each one
here, with the times it was read. Two threads do the rest: the indexing thread frames, classifies,
correlates and redacts the queued chunks into batches of row parameters, and the writer thread inserts each
batch in one transaction, at least every COMMIT_INTERVAL (SQLite releases the GIL while it works, so the
two overlap). The queue is bounded in bytes: when the database falls behind, put() blocks, the child stops
reading its pipe, and the relay's bounded pipe queue is the backpressure of last resort. When the database
is broken, frames are counted as unrecorded and dropped; forwarding never notices.

Plain sqlite3 on purpose, not sqlite-utils (which prune and delete use): this is the hot path. Measured
on the development machine (50,000 rows of 200 bytes in 500-row transactions, WAL): executemany() of
this fixed INSERT with tuples takes 17 us a row, sqlite-utils' insert_all() 56 us (it needs a dict per
row and builds its SQL per batch), so plain sqlite3 keeps the recorder about three times faster here.
"""

from __future__ import annotations

import collections
import itertools
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from ..protocol.classify import RESULT_SESSION_METHODS
from ..protocol.framing import BIG_FRAME, LineFramer
from ..protocol.jsonrpc import A2C, C2A, ERR, NET, dumps, dumps_text, loads, may_hold_wide_int
from ..protocol.redact import WALK_FROM, Policy, watched_keys_in
from ..protocol.tracker import Frame, QuickRow, Tracker
from . import db
from .checkpointer import CHECKPOINT_BYTES, Checkpointer
from .liveness import mark_interrupted

COMMIT_INTERVAL = 0.1
MAX_QUEUE_BYTES = 8 << 20
SUB_BATCH_BYTES = 1 << 20
STDERR_TAIL_LINES = 20
WATCH_CHUNK_SHIFT = WALK_FROM.bit_length() - 1  # a chunk is scanned whole when its frames average < WALK_FROM
_EOF = b""  # a chunk of b"" marks EOF on its stream

INSERT_FRAME = (
    "INSERT INTO frames (connection_id, seq, direction, ts, mono, length, raw, parse, kind, method, rpc_id, "
    "session_id, update_kind, details) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
# A QuickRow's frame: 9 parameters instead of 14 (binding is a third of the insert's cost), the connection
# id a literal, and QUICK_ROWS frames per statement (each statement execution has a fixed cost as large as
# the binding of its row). Rows of QUICK_WIDTH use these, rows of INSERT_FRAME's 14 the other.
QUICK_WIDTH = 9
QUICK_ROWS = 32
_QUICK_VALUES = (
    "({{cid}}, ?{0}, ?{1}, ?{2}, ?{3}, length(?{4}), ?{4}, 'ok', 'notification', ?{5}, NULL, ?{6}, ?{7}, ?{8})"
)
_QUICK_INSERT = (
    "INSERT INTO frames (connection_id, seq, direction, ts, mono, length, raw, parse, kind, method, rpc_id, "
    "session_id, update_kind, details) VALUES "
)
INSERT_QUICK = _QUICK_INSERT + _QUICK_VALUES.format(*range(1, 10))
INSERT_QUICK_MANY = _QUICK_INSERT + ", ".join(
    _QUICK_VALUES.format(*range(i * QUICK_WIDTH + 1, i * QUICK_WIDTH + 10)) for i in range(QUICK_ROWS)
)
INSERT_BATCH_MESSAGE = (
    "INSERT INTO batch_messages (frame_id, idx, kind, method, rpc_id, session_id, update_kind, details) "
    "SELECT id, ?, ?, ?, ?, ?, ?, ? FROM frames WHERE connection_id = ? AND seq = ?"
)
# A request that learns its session from its result (session/new...): (session_id, connection_id, seq).
BACKFILL_FRAME = "UPDATE frames SET session_id = ? WHERE connection_id = ? AND seq = ? AND session_id IS NULL"
BACKFILL_MEMBER = (
    "UPDATE batch_messages SET session_id = ? WHERE frame_id = (SELECT id FROM frames WHERE connection_id = ? "
    "AND seq = ?) AND session_id IS NULL AND method IN ("
    + ", ".join(f"'{m}'" for m in sorted(RESULT_SESSION_METHODS))
    + ")"
)
UPSERT_SESSION = (
    "INSERT INTO sessions (session_id, connection_id, origin, first_seen, last_seen, cwd, title, parent_session_id) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (connection_id, session_id) DO UPDATE SET "
    "origin = excluded.origin, last_seen = excluded.last_seen, cwd = coalesce(excluded.cwd, cwd), "
    "title = excluded.title, parent_session_id = coalesce(excluded.parent_session_id, parent_session_id)"
)


def _is_busy(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))


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
        self.frames = 0
        self.unrecorded = 0
        self.bytes = {C2A: 0, A2C: 0, ERR: 0}
        self._warned: set[str] = set()
        self._queue: collections.deque[tuple[str, bytes, float, float]] = collections.deque()
        self._queued_bytes = 0  # queued and being processed: the bound covers both
        self._taken = 0  # of which the writer has taken (being processed)
        self._progress = 0.0  # monotonic time of the writer's last success
        self._cond = threading.Condition()
        self._stopping = False
        self._final: dict[str, Any] = {}
        self._thread = threading.Thread(target=self._run, name="acp-relay-recorder", daemon=True)
        self._batches: queue.Queue[Batch | None] = queue.Queue(maxsize=2)
        self._writer = threading.Thread(target=self._write_loop, name="acp-relay-writer", daemon=True)
        self._checkpointer = Checkpointer(path)
        self._checkpointed_at = 0  # sum(self.bytes) at the last checkpoint

    # -- producer side (the child's pipe reader) ------------------------------------------------------------
    def put(self, stream: str, chunk: bytes, ts: float | None = None, mono: float | None = None) -> None:
        """Queue a chunk as read (with the times it was read, when the reader knows them better).
        Blocks only while the queue is over its byte bound."""
        if ts is None or mono is None:
            ts, mono = time.time(), time.monotonic() - self.started
        item = (stream, chunk, ts, mono)
        with self._cond:
            while self._queued_bytes > self.max_queue_bytes and not self._stopping:
                self._cond.wait(0.05)
            self._queue.append(item)
            self._queued_bytes += len(chunk)
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

    def close(self, *, stall: float = 15.0, **final: Any) -> None:
        """Drain what is queued, write the connection's last row, and stop the thread.

        Waits as long as the writer makes progress (a long lock held by another process drains), but
        gives up after `stall` seconds without any: the relay must exit when the agent has.
        """
        self._final.update(final)
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        started = time.monotonic()
        while self._thread.is_alive():
            self._thread.join(0.1)
            if time.monotonic() - max(self._progress, started) > stall:
                break
        if self._thread.is_alive():
            self._warn_once("timeout", "acp-relay: the database did not drain in time; some frames were not recorded")

    # -- indexing thread ---------------------------------------------------------------------------------------
    def _run(self) -> None:
        self._open()
        last_commit = time.monotonic()
        while True:
            with self._cond:
                if not self._queue and not self._stopping:
                    self._cond.wait(COMMIT_INTERVAL)
                # Pumps record a chunk after forwarding it, so a reply may be queued before the request
                # that caused it; read times are causal, so order by them (stable: one stream stays in order).
                items = sorted(self._queue, key=_read_time)
                self._queue.clear()
                self._taken = self._queued_bytes
                stopping = self._stopping
            took = bool(items)
            if items:
                self._process(items)
                items = []  # drop the chunk references before the bytes are counted free
            with self._cond:
                self._queued_bytes -= self._taken  # only now are those chunks' bytes free
                self._taken = 0
                self._cond.notify_all()
            if took or stopping or time.monotonic() - last_commit >= COMMIT_INTERVAL:
                last_commit = time.monotonic()
            if stopping and not self._queue:
                break
        if self._writer.is_alive():
            self._batches.put(None)
            self._writer.join()
        self._finish()

    def _open(self) -> None:
        """Open the database and add this connection's row, waiting out other writers' locks."""
        deadline = None
        while True:
            try:
                if self.conn is None:
                    self.conn = db.connect(self.path)
                    self.conn.execute("PRAGMA wal_autocheckpoint = 0")  # the checkpointer's job, not the commit's
                    self._checkpointer.start()
                self.conn.execute("BEGIN IMMEDIATE")
                mark_interrupted(self.conn)
                cur = self.conn.execute(
                    "INSERT INTO connections (started_at, argv, cwd, relay_pid, recorder_pid, label, status, "
                    "redaction, transport, endpoint) VALUES (?, ?, ?, ?, ?, ?, 'running', ?, ?, ?)",
                    (
                        time.time(),
                        orjson.dumps(self.argv).decode(),
                        self.cwd,
                        self.relay_pid,
                        os.getpid(),
                        self.label,
                        json_or_null(self.policy.describe()),
                        self.transport,
                        self.endpoint,
                    ),
                )
                self.connection_id = cur.lastrowid
                self.conn.execute("COMMIT")
                self._progress = time.monotonic()
                return
            except (sqlite3.Error, OSError) as exc:
                if _is_busy(exc):
                    self._rollback()
                    self._warn_once(
                        "busy", f"acp-relay: the database is busy ({exc}); queuing frames until it frees up"
                    )
                    if self._stopping:
                        deadline = deadline or time.monotonic() + 12
                        if time.monotonic() > deadline:
                            self._broken(f"the database {self.path} stayed locked")
                            return
                    time.sleep(0.05)
                    continue
                self._broken(f"cannot open the database {self.path}: {exc}")
                return

    def _rollback(self) -> None:
        try:
            if self.conn is not None and self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
                self.conn.execute(f"PRAGMA cache_size = -{CACHE_KB}")  # as _insert leaves it at commit
        except sqlite3.Error:
            pass

    def _broken(self, message: str) -> None:
        self._warn_once("broken", f"acp-relay: {message}; forwarding goes on without recording")
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
        might_apply_without_keys = policy.might_apply_without_keys
        dumps = orjson.dumps
        for stream, chunk, ts, mono in items:
            if stream == NET:
                if chunk:
                    self._net.append(transport_row(cid, chunk, ts, mono))
                continue
            if stream == ERR:
                self.bytes[ERR] += len(chunk)
                lines = [(line, 0) for line in self.stderr_framer.feed(chunk)] if chunk else []
                if not chunk:
                    last = self.stderr_framer.finish()
                    lines = [] if last is None else [(last, 1)]
                for line, unterminated in lines:
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
            first = new[0] if carried and new else None  # its bytes were not all in this chunk
            for f in new:
                if not isinstance(f, Frame):  # a QuickRow: a plain notification (the bulk of a flood)
                    if might_apply_one is not None and (
                        might_apply_without_keys(f[5])
                        if clean and f is not first
                        else might_apply_one(f[4], f[5], f[9])
                    ):
                        rows.append(_redacted_quick_row(f, policy))
                    elif f[8] is None:
                        rows.append(f[:8] + (None,))  # INSERT_QUICK's parameters, as they come
                    else:
                        rows.append(f[:8] + (dumps(f[8]).decode(),))
                    continue
                ms = f.index.messages
                if ms and might_apply is not None:
                    parsed = [m.message for m in ms] if f.index.kind == "batch" else ms[0].message
                    if might_apply(f.raw, tuple(m.method for m in ms), parsed):
                        redact_frame(f, policy)
                for m in ms:
                    m.message = None  # tracked and redacted: the parsed copy (as big as the frame) can go
                frame_rows(cid, [f], rows, members)
            size += len(chunk)
            if size >= SUB_BATCH_BYTES:
                self._submit(self._prepare(rows, members, stderr_rows))
                rows, members, stderr_rows, size = [], [], [], 0
        if rows or stderr_rows or tracker.dirty_sessions or tracker.info_dirty or tracker.backfill or self._net:
            self._submit(self._prepare(rows, members, stderr_rows))

    def _prepare(
        self, rows: list[tuple[Any, ...]], members: list[tuple[Any, ...]], stderr_rows: list[tuple[Any, ...]]
    ) -> Batch:
        """Everything one transaction writes, taken from the tracker now: the writer thread inserts it while
        this thread indexes the next chunks (SQLite lets go of the GIL while it works)."""
        cid = self.connection_id or 0
        tracker = self.tracker
        sessions = [
            (s.session_id, cid, s.origin, s.first_seen, s.last_seen, s.cwd, s.title, s.parent_session_id)
            for s in (tracker.sessions[k] for k in tracker.dirty_sessions)
        ]
        info = tracker.info
        update = (
            len(rows),
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
        batch = Batch(rows, members, stderr_rows, backfill, sessions, update, net)
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
        self._batches.put(batch)

    def _write_loop(self) -> None:
        while (batch := self._batches.get()) is not None:
            self._write(batch)

    def _write(self, batch: Batch) -> None:
        """Insert one batch in one transaction; retry while another writer holds the lock."""
        n = len(batch.rows)
        if self.conn is None or self.connection_id is None:
            self.unrecorded += n
            return
        stalled_since = None
        while True:
            try:
                self._insert(batch)
                self._checkpoint()
                self.frames += n
                self._progress = time.monotonic()
                return
            except Exception as exc:
                self._rollback()
                if _is_busy(exc):
                    # Wait for the lock (the queue fills, then the editor feels backpressure), but not
                    # forever once the relay is closing.
                    stalled_since = stalled_since or time.monotonic()
                    if not (self._stopping and time.monotonic() - stalled_since > 12):
                        self._warn_once(
                            "busy", f"acp-relay: the database is busy ({exc}); queuing frames until it frees up"
                        )
                        continue
                self.unrecorded += n
                self._warn_once("write", f"acp-relay: cannot write to {self.path}: {exc}; counting frames not recorded")
                return

    def _insert(self, batch: Batch) -> None:
        assert self.conn is not None
        conn = self.conn
        if self._checkpointer.tail_due:  # so that this transaction starts the WAL over (see checkpointer.py)
            self._checkpointer.tail_due = False
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            except sqlite3.Error:  # a checkpoint that fails costs the WAL's size, never frames
                pass
        conn.execute("BEGIN IMMEDIATE")
        cid = int(self.connection_id or 0)
        big = False
        for width, group in itertools.groupby(batch.rows, len):  # in order: frame ids follow seq
            if width == QUICK_WIDTH:
                _insert_quick(conn, cid, list(group))
            else:
                big = _insert_full(conn, list(group)) or big
        if batch.members:
            conn.executemany(INSERT_BATCH_MESSAGE, batch.members)
        if batch.stderr:
            conn.executemany(
                "INSERT INTO stderr (connection_id, ts, mono, raw, unterminated) VALUES (?, ?, ?, ?, ?)", batch.stderr
            )
        if batch.transport:
            conn.executemany(INSERT_TRANSPORT_EVENT, batch.transport)
        if batch.backfill:
            backfill_sessions(conn, batch.backfill)
        if batch.sessions:
            conn.executemany(UPSERT_SESSION, batch.sessions)
        conn.execute(
            "UPDATE connections SET frames = frames + ?, bytes_c2a = ?, bytes_a2c = ?, bytes_stderr = ?, "
            "protocol_version = ?, client_info = ?, agent_info = ? WHERE id = ?",
            batch.connection,
        )
        conn.execute("COMMIT")
        if big:  # back to the default cache: a flood of small frames keeps a small recorder
            conn.execute(f"PRAGMA cache_size = -{CACHE_KB}")

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
        final = self._final
        if self.conn is None or self.connection_id is None:
            return
        tail = b"\n".join(self.stderr_tail).decode("utf-8", "replace") or None
        try:
            self.conn.execute(
                "UPDATE connections SET ended_at = ?, status = ?, exit_code = ?, exit_signal = ?, closed_by = ?, "
                "error = ?, agent_pid = ?, frames_unrecorded = frames_unrecorded + ?, unanswered = ?, "
                "stderr_tail = ?, recorder_rss_kb = ? WHERE id = ?",
                (
                    time.time(),
                    final.get("status", "ended"),
                    final.get("exit_code"),
                    final.get("exit_signal"),
                    final.get("closed_by"),
                    final.get("error"),
                    final.get("agent_pid"),
                    self.unrecorded,
                    json_or_null(self.tracker.unanswered() or None),
                    tail,
                    _peak_rss_kb(),
                    self.connection_id,
                ),
            )
        except sqlite3.Error as exc:
            self._warn_once("final", f"acp-relay: could not write the connection's final row: {exc}")
        try:
            self.conn.close()
        except sqlite3.Error:
            pass
        db._secure_files(self.path)


INSERT_FRAME_BIG = INSERT_FRAME.replace("?, ?, ?, ?, ?, ?, ?, ?", "?, ?, ?, ?, ?, ?, zeroblob(?), ?", 1)
BLOB_PIECE = 1 << 20
CACHE_KB = 2000  # SQLite's default page cache (PRAGMA cache_size = -2000)
BIG_CACHE_KB = 16 << 10  # the most a big frame's transaction may cache (frames up to about 14 MiB)


def backfill_sessions(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    """Give requests the session their result named: (session_id, connection_id, seq) each."""
    conn.executemany(BACKFILL_FRAME, rows)
    conn.executemany(BACKFILL_MEMBER, rows)


def _insert_quick(conn: sqlite3.Connection, cid: int, rows: list[tuple[Any, ...]]) -> None:
    """QuickRow rows, QUICK_ROWS to a statement (in order: a multi-row VALUES inserts row after row)."""
    whole = len(rows) - len(rows) % QUICK_ROWS
    if whole:
        flat = itertools.chain.from_iterable
        conn.executemany(
            INSERT_QUICK_MANY.format(cid=cid),
            [tuple(flat(rows[i : i + QUICK_ROWS])) for i in range(0, whole, QUICK_ROWS)],
        )
    if whole < len(rows):
        conn.executemany(INSERT_QUICK.format(cid=cid), rows[whole:] if whole else rows)


def _insert_full(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> bool:
    """INSERT_FRAME rows, a big frame's by itself. Returns whether there was a big one."""
    start = 0
    for i, row in enumerate(rows):
        if len(row[6]) >= BIG_FRAME:
            if i > start:
                conn.executemany(INSERT_FRAME, rows[start:i])
            _insert_big(conn, row)
            start = i + 1
    if start < len(rows):
        conn.executemany(INSERT_FRAME, rows[start:] if start else rows)
    return start > 0


def _insert_big(conn: sqlite3.Connection, row: tuple[Any, ...]) -> None:
    """A big frame: its row with a zeroblob, then its bytes streamed in (SQLite never copies it whole).

    With the default 2 MB page cache, a frame larger than the cache spilled its zeroed pages to the WAL
    before the bytes overwrote them: every page written twice. The cache grows to hold the frame for this
    transaction when that takes at most BIG_CACHE_KB (a bigger frame spills either way, and its memory
    matters more); _insert puts it back at commit."""
    raw = row[6]
    need_kb = len(raw) // 1024 + CACHE_KB
    if need_kb <= BIG_CACHE_KB:
        conn.execute(f"PRAGMA cache_size = -{need_kb}")
    cur = conn.execute(INSERT_FRAME_BIG, row[:6] + (len(raw),) + row[7:])
    view = memoryview(raw)
    assert cur.lastrowid is not None  # an INSERT into a rowid table always has one
    with conn.blobopen("frames", "raw", cur.lastrowid) as blob:
        for i in range(0, len(view), BLOB_PIECE):
            blob.write(view[i : i + BLOB_PIECE])


class Batch(NamedTuple):
    """One transaction's worth of parameters, prepared by the indexing thread for the writer thread."""

    rows: list[tuple[Any, ...]]
    members: list[tuple[Any, ...]]
    stderr: list[tuple[Any, ...]]
    backfill: list[tuple[Any, ...]]
    sessions: list[tuple[Any, ...]]
    connection: tuple[Any, ...]
    transport: list[tuple[Any, ...]] = []  # never mutated: each batch gets its own list


INSERT_TRANSPORT_EVENT = (
    "INSERT INTO transport_events (connection_id, ts, mono, event, side, method, status, elapsed_ms, "
    "acp_connection_id, acp_session_id, details) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_EVENT_COLUMNS = ("event", "side", "method", "status", "ms", "connection", "session")


def transport_row(cid: int, payload: bytes, ts: float, mono: float) -> tuple[Any, ...]:
    """INSERT_TRANSPORT_EVENT's parameters for one event (a JSON object from a transport; the keys that are
    not columns go to details). A payload that is not such an object is kept whole, as its details."""
    try:
        event = orjson.loads(payload)
    except orjson.JSONDecodeError:
        event = None
    if not isinstance(event, dict):
        return (cid, ts, mono, "invalid", None, None, None, None, None, None, payload.decode("utf-8", "replace"))
    rest = {k: v for k, v in event.items() if k not in _EVENT_COLUMNS}
    name, side, method, status, ms, acp_cid, acp_sid = (event.get(k) for k in _EVENT_COLUMNS)
    return (cid, ts, mono, str(name), side, method, status, ms, acp_cid, acp_sid, dumps_text(rest) if rest else None)


def _read_time(item: tuple[str, bytes, float, float]) -> float:
    return item[3]


def _redacted_quick_row(row: QuickRow, policy: Policy) -> tuple[Any, ...]:
    """INSERT_QUICK's parameters for a QuickRow the policy may apply to."""
    raw, redacted = redact_message(row[9], row[4], policy)
    details: dict[str, Any] | None = row[8]
    if redacted:
        details = {**(details or {}), "redacted": 1}
    return (*row[:4], raw, *row[5:8], orjson.dumps(details).decode() if details else None)


def redact_frame(frame: Frame, policy: Policy) -> None:
    """Replace the frame's stored bytes with a redacted copy when the policy finds a secret."""
    ix = frame.index
    msg = [m.message for m in ix.messages] if ix.kind == "batch" else ix.messages[0].message
    frame.raw, redacted = redact_message(msg, frame.raw, policy)
    frame.redacted = frame.redacted or redacted


def redact_message(msg: Any, raw: bytes, policy: Policy) -> tuple[bytes, bool]:
    """(bytes to store, whether they are a redacted copy) for a frame's parsed message and bytes."""
    try:
        # Indexed from a copy without its long strings, or parsed by orjson with integers beyond 64 bits as
        # floats: redact an exact parse, so the stored copy keeps every number as sent.
        if len(raw) >= BIG_FRAME or may_hold_wide_int(raw):
            msg = loads(raw[:-1] if raw[-1:] == b"\r" else raw)
        new, changed = policy.apply(msg)
        return (dumps(new), True) if changed else (raw, False)
    except Exception:
        return orjson.dumps({"acp-relay": "frame withheld: redaction failed"}), True


def frame_rows(
    cid: int,
    frames: list[Frame],
    rows: list[tuple[Any, ...]] | None = None,
    batches: list[tuple[Any, ...]] | None = None,
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The INSERT_FRAME and INSERT_BATCH_MESSAGE parameters for a list of frames (appended to the lists
    given). The recorder builds QuickRow's rows inline; these are the others'.

    One function on purpose: it runs per frame at flood rates, and helper calls per row cost measurably."""
    rows = [] if rows is None else rows
    batches = [] if batches is None else batches
    dumps = orjson.dumps
    for f in frames:
        ix = f.index
        if ix.kind == "batch" or not ix.messages:
            flags = {k: 1 for k, v in (("unterminated", f.unterminated), ("redacted", f.redacted)) if v} or None
            session = next((b.session_id for b in ix.messages if b.session_id), None)
            rows.append(
                (
                    cid,
                    f.seq,
                    f.direction,
                    f.ts,
                    f.mono,
                    len(f.raw),
                    f.raw,
                    ix.parse,
                    ix.kind,
                    None,
                    None,
                    session,
                    None,
                    dumps(flags).decode() if flags else None,
                )
            )
            for i, b in enumerate(ix.messages):
                batches.append(
                    (
                        i,
                        b.kind,
                        b.method,
                        b.rpc_id,
                        b.session_id,
                        b.update_kind,
                        dumps(b.details).decode() if b.details else None,
                        cid,
                        f.seq,
                    )
                )
            continue
        m = ix.messages[0]
        details = m.details
        if f.unterminated or f.redacted:
            details = {
                **(details or {}),
                **({"unterminated": 1} if f.unterminated else {}),
                **({"redacted": 1} if f.redacted else {}),
            }
        rows.append(
            (
                cid,
                f.seq,
                f.direction,
                f.ts,
                f.mono,
                len(f.raw),
                f.raw,
                ix.parse,
                m.kind,
                m.method,
                m.rpc_id,
                m.session_id,
                m.update_kind,
                dumps(details).decode() if details else None,
            )
        )
    return rows, batches


def _peak_rss_kb() -> int | None:
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    except (ImportError, OSError):
        return None


def json_or_null(value: Any) -> str | None:
    """A JSON column's value: NULL for None."""
    return None if value is None else dumps_text(value)
