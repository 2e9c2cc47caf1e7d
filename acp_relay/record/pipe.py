"""The relay's side of its recorder: a bounded queue in RAM, a feeder thread, and the spill journal.

Why a recorder process: parsing and SQLite are Python work that holds the GIL; in the relay's process
they delayed the forwarding threads by milliseconds. In a child on the other core the relay only copies
each chunk into a pipe. The child is in its own process group (the editor's Ctrl-C is for the agent) and
finishes on the pipe's EOF: a relay killed with SIGKILL still gets everything it had sent committed.

Why a feeder thread: the pumps must never wait for the recorder. A pump only appends its chunk to a queue
in RAM (RAM_QUEUE_BYTES at most) and goes back to forwarding; the feeder, off the forwarding path, writes
the queue into the pipe without blocking on it. When the pipe stays full while SPILL_AT bytes wait (the
recorder is held up by another writer's lock, a slow disk, a starved CPU), the feeder appends the records
to the spill journal instead (journal.py) and the recorder reads them from there, in order, when it can.
Past the bounds (the RAM queue full because even the journal cannot be written, or a segment at its
limit) chunks are dropped and a GAP record says how many lines they held: the recorder counts those
frames as not recorded, exactly, and seq stays the wire's.

Wire format, relay to recorder: journal.HEADER (code, length, wall time, monotonic time), then `length`
bytes. The recorder acknowledges what it read from the journal on its stdout (journal.ACK).
"""

from __future__ import annotations

import collections
import errno
import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ..protocol.jsonrpc import A2C, C2A, ERR
from ..store.liveness import cpu_ticks
from . import journal
from .journal import CLOSE, EOF_BASE, GAP, GAP_BODY, MARK, MARK_BODY, SPAWNED, TRANSPORT, WireCount

HEADER = journal.HEADER
STREAMS = (C2A, A2C, ERR)
PIPE_SIZE = 1 << 20
RAM_QUEUE_BYTES = 16 << 20  # the most the relay holds for its recorder; past it chunks are dropped, counted
SPILL_AT = 4 << 20  # with this much waiting and the pipe full, the feeder writes to the journal instead
SPILL_AFTER = 1.0  # or when the pipe has stayed full this long (a slow trickle kept in RAM is not safe)
FEEDER_STALL = 1.0  # a feeder neither running nor moving a record for this long is stalled: a full queue drops
DISK_STALL = 0.5  # a feeder this long in one journal call, asleep in the kernel, waits on a stalled disk
FEED_INTERVAL = 0.005  # the feeder's tick for small traffic (the recorder commits every 100 ms anyway)
WAKE_BYTES = 256 << 10  # this much queued wakes the feeder at once
JOURNAL_BATCH = 512  # records the feeder appends to the journal in one writev (at most; IOV_MAX is 1024)
JOURNAL_BATCH_BYTES = 1 << 20  # or this many bytes
POLL = 0.005  # seconds between the feeder's looks at a full pipe and the recorder's acknowledgements
STALL_AT_EXIT = 10.0  # seconds without recorder CPU progress before the relay stops waiting for it
WAIT_AT_EXIT = 120.0  # and the most it waits at all; then the recorder finishes alone

Item = tuple[int, Any, float, float]  # (code, payload, wall, mono): payload bytes, or (lines, ends) for GAP


class RecorderClient:
    """The relay's end: put/eof/close as the Recorder has them, none of which waits for the recorder.

    The child starts only when `launch()` is called (once the editor's first exchange has gone through) or
    when PRELAUNCH_BYTES are waiting: starting a second Python beside the agent would slow the agent's own
    start-up on a small machine. Until then records wait in the queue, in order.
    """

    PRELAUNCH_BYTES = 4 << 20

    def __init__(
        self,
        db_path: Path,
        *,
        argv: list[str],
        cwd: str,
        label: str | None,
        policy: Any,
        warn: Any,
        transport: str = "stdio",
        endpoint: str | None = None,
        command: str = "run",
    ) -> None:
        self.warn = warn  # the command's speaker (record/say.py): messages here carry no prefix
        self.db_path = db_path
        self.started = time.monotonic()
        self.dead = False  # the recorder is gone: everything goes to the journal, stored at close
        self.death: str | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.fd = -1
        self._ack_fd = -1
        self._cond = threading.Condition()
        self._items: collections.deque[Item] = collections.deque()
        self._bytes = 0  # queued or being fed: RAM_QUEUE_BYTES bounds both
        self._waiting = False
        self._room_waiters = 0  # pumps waiting for room in a full queue while the feeder moves
        self._fed_at = time.monotonic()  # when the feeder last moved a record on
        self._disk_since = 0.0  # when the feeder's journal call under way began (0: none)
        self._stalled_since = -1.0  # the call seen asleep on a stalled disk
        self._feeder_tid = 0
        self._launched = False
        self._closed = False  # the CLOSE record is queued: later chunks are not this connection's
        self._feeder: threading.Thread | None = None
        self._close_sent = False  # the feeder has routed the CLOSE record
        self.count = WireCount()  # the feeder's: the wire as sent on, for journal segments
        # feeder state (the feeder thread only)
        self._out = bytearray()  # bytes owed to the pipe (the rest of a record, a mark), in order
        self._segment = 0
        self._jfd = -1  # the journal segment being appended to, in spill mode
        self._spilling = False  # records go to the journal (or, without one, are dropped and counted)
        self._create_failed = False
        self._jsize = 0  # bytes written to the segment
        self._jpending: list[tuple[list[bytes], int, Any]] = []  # records for it, written a batch at once
        self._jpending_bytes = 0
        self._marked = 0
        self._acks = b""
        self._gap: list[Any] | None = None  # [code, lines, ends_line, ts, mono]: drops not yet written
        self.segments: list[Path] = []
        self._config = {
            "db": str(db_path),
            "argv": argv,
            "cwd": cwd,
            "label": label,
            "relay_pid": os.getpid(),
            "transport": transport,
            "endpoint": endpoint,
            "command": command,  # the child's diagnostics name it too
            "policy": {"enabled": policy.enabled, "paths": policy.paths, "regexes": policy.regexes},
        }
        existing = journal.segments(db_path, os.getpid()).get(os.getpid(), [])
        self._segment = max((n for n, _ in existing), default=0)  # an older relay with our pid left some

    # -- the pumps' side: never waits -------------------------------------------------------------------
    def stamp(self) -> tuple[float, float]:
        """(wall, monotonic) now."""
        return time.time(), time.monotonic() - self.started

    def put(
        self, stream: str, chunk: bytes, ts: float | None = None, mono: float | None = None, *, wake: bool = True
    ) -> None:
        """Queue a chunk as read. The pumps queue it before forwarding it (wake=False, then `wake()`): the
        queue's order is then the wire's across the three streams, since an answer cannot be read before
        its request was forwarded, and the recorder numbers frames in that order (times are taken here)."""
        self._enqueue(STREAMS.index(stream), chunk, ts, mono, wake=wake)

    def wake(self) -> None:
        """After forwarding what `put(wake=False)` queued: hand it to the feeder once there is enough to be
        worth a thread switch (small traffic waits for the feeder's FEED_INTERVAL tick instead, so a request
        and its reply do not each wake a thread competing with the pumps for the GIL), and start the
        recorder when PRELAUNCH_BYTES wait."""
        if self._launched and not (self._waiting and self._bytes >= WAKE_BYTES):
            return
        with self._cond:
            if self._waiting and self._bytes >= WAKE_BYTES:
                self._cond.notify()
            launch = not self._launched and self._bytes >= self.PRELAUNCH_BYTES
        if launch:
            self.launch()

    def eof(self, stream: str) -> None:
        self._enqueue(EOF_BASE + STREAMS.index(stream), b"", None, None)

    def event(self, fields: dict[str, Any]) -> None:
        """A transport event (a remote connection's HTTP request, SSE stream, WebSocket close): a row of its
        own beside the frames, in read order with them."""
        self._enqueue(TRANSPORT, json.dumps(fields, separators=(",", ":")).encode(), *self.stamp())

    def record_spawn(self, agent_pid: int | None) -> None:
        self._enqueue(SPAWNED, json.dumps({"agent_pid": agent_pid}).encode(), time.time(), 0.0)

    def _enqueue(self, code: int, payload: bytes, ts: float | None, mono: float | None, *, wake: bool = True) -> None:
        launch = False
        with self._cond:
            if self._closed:
                return  # after the agent has gone: not forwarded, not this connection's
            if ts is None or mono is None:
                ts, mono = self.stamp()  # under the lock: the times rise with the queue's order
            if code < EOF_BASE and self._bytes + len(payload) > RAM_QUEUE_BYTES and self._feeding():
                # The feeder is moving (into the pipe or the journal), only slower than the wire just now:
                # wait for room rather than lose a frame. A stalled feeder (a frozen filesystem) is not
                # waited for: then chunks are dropped, and counted.
                self._room_waiters += 1
                try:
                    while self._bytes + len(payload) > RAM_QUEUE_BYTES and self._feeding():
                        self._cond.wait(POLL)
                finally:
                    self._room_waiters -= 1
            if code < EOF_BASE and self._bytes + len(payload) > RAM_QUEUE_BYTES:
                lines, ends = journal.gap_payload(code, payload)
                last = self._items[-1] if self._items else None
                if last is not None and last[0] == GAP and last[1][0] == code:  # one GAP for a run of drops
                    self._items[-1] = (GAP, (code, last[1][1] + lines, ends), last[2], last[3])
                else:
                    self._items.append((GAP, (code, lines, ends), ts, mono))
            else:
                self._items.append((code, payload, ts, mono))
                self._bytes += len(payload)
            if wake and self._waiting and (code >= EOF_BASE or self._bytes >= WAKE_BYTES):
                self._cond.notify()
            launch = wake and not self._launched and self._bytes >= self.PRELAUNCH_BYTES
        if launch:
            self.launch()

    def _feeding(self) -> bool:
        """The feeder is moving: not held by the journal's disk, and either it moved a record within
        FEEDER_STALL or the kernel has it running or runnable. A feeder that is only slow (a starved CPU,
        a disk that throttles writers for a few hundred ms) is waited for, so a flood on a busy machine
        loses nothing; only a disk that holds one journal call for DISK_STALL makes a full queue drop."""
        if not self._launched or self.dead or self._disk_stalled():
            return False
        return time.monotonic() - self._fed_at < FEEDER_STALL or self._feeder_state() == b"R"

    def _feeder_state(self) -> bytes:
        """The feeder thread's state letter in /proc (R running, S sleeping, D in the kernel), or b"?"."""
        try:
            with open(f"/proc/self/task/{self._feeder_tid}/stat", "rb") as f:
                return f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            return b"?"

    def _disk_stalled(self) -> bool:
        """The feeder has been in one journal call for DISK_STALL and the kernel has it asleep (state D): a
        frozen filesystem (or a dead disk), which may last any time, so a full queue drops at once instead
        of holding the wire. The kernel's throttling of dirty writers pauses for at most 200 ms, and a
        freeze is found long before the 16 MiB queue fills unless the wire passes 32 MB/s into it."""
        since = self._disk_since
        if not since or time.monotonic() - since < DISK_STALL:
            return False
        if since == self._stalled_since:
            return True
        asleep = self._feeder_state() == b"D"
        if asleep:
            self._stalled_since = since
        return asleep

    # -- the recorder process ---------------------------------------------------------------------------
    def launch(self) -> None:
        """Start the recorder process and the feeder (once)."""
        with self._cond:
            if self._launched:
                return
            self._launched = True
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "acp_relay.record.child", json.dumps(self._config)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                process_group=0,
            )
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.fd = self.proc.stdin.fileno()
            self._ack_fd = self.proc.stdout.fileno()
            try:
                fcntl.fcntl(self.fd, 1031, PIPE_SIZE)  # F_SETPIPE_SZ: room for bursts without a context switch
            except OSError:
                pass
            os.set_blocking(self.fd, False)  # our own pipe: the feeder never blocks on it
            os.set_blocking(self._ack_fd, False)
            threading.Thread(target=self._watch, args=(self.proc,), name="acp-relay-watch", daemon=True).start()
        except OSError as exc:
            self._died(f"cannot start the recorder: {exc}")
        self._feeder = threading.Thread(target=self._feed, name="acp-relay-feeder", daemon=True)
        self._feeder.start()

    def _watch(self, proc: subprocess.Popen[bytes]) -> None:
        """Notice at once when the recorder dies before the relay has closed it."""
        code = proc.wait()
        if self._closed and code == 0:
            return
        self._died(self._how_it_died(proc))
        self._mark_died(proc.pid)

    @staticmethod
    def _how_it_died(proc: subprocess.Popen[bytes]) -> str:
        try:
            code = proc.wait(1.0)  # a broken pipe is seen a moment before the exit status is there
        except subprocess.TimeoutExpired:
            return f"the recorder (pid {proc.pid}) stopped reading"
        if code < 0:
            how = f"killed by {signal.Signals(-code).name}" if -code in signal.valid_signals() else f"signal {-code}"
        else:
            how = f"exit status {code}"
        return f"the recorder (pid {proc.pid}) died ({how})"

    def _died(self, why: str) -> None:
        with self._cond:
            if self.dead:
                return
            self.dead = True
            self.death = why
            self._cond.notify()
        self.warn(f"{why}; forwarding goes on, and what follows is kept in the spill journal")

    def _mark_died(self, recorder_pid: int) -> None:
        """The connection row says so at once (status recorder_died); its exit status comes at close."""
        try:
            from ..store import db
            from ..store.liveness import mark_recorder_died

            conn = db.connect(self.db_path, create=False)
            try:
                mark_recorder_died(conn, os.getpid(), recorder_pid, self.death)
            finally:
                conn.close()
        except Exception as exc:  # the database is what failed, perhaps: the close says it again
            self.warn(f"cannot mark the connection: {exc}")

    # -- the feeder thread ------------------------------------------------------------------------------
    def _feed(self) -> None:
        self._feeder_tid = threading.get_native_id()
        while True:
            with self._cond:
                if not self._items:
                    if self._close_sent:
                        break
                    self._waiting = True
                    self._cond.wait(POLL if self._owed() else FEED_INTERVAL)
                    self._waiting = False
                items = list(self._items)  # in the wire's order: the pumps queue before forwarding
                self._items.clear()
            for item in items:
                self._route(item)
                self._fed_at = time.monotonic()
                if item[0] < EOF_BASE and item[1]:
                    with self._cond:
                        self._bytes -= len(item[1])
                        if self._room_waiters:
                            self._cond.notify_all()
            self._flush_gap()
            self._pump_out(wait=False)  # which writes what waits for the journal first
            self._read_acks()
        self._finish_feeding()

    def _owed(self) -> bool:
        return bool(self._out) or (self._spilling and not self.dead)

    def _route(self, item: Item) -> None:
        code, payload, ts, mono = item
        if code == GAP:
            self._add_gap(payload[0], payload[1], payload[2], ts, mono)
            return
        if code == CLOSE:
            self._close_sent = True
        record = journal.record(code, payload, ts, mono)
        if self._spilling and self._jfd < 0 and not self.dead:
            self._pump_out(wait=False)
            if not self._out:
                # No journal (it could not be created, or its disk filled) and the recorder has taken
                # everything owed to it, the drops' GAPs included: it reads again, so back to the pipe;
                # a new segment is tried the next time the pipe stays full.
                self._spilling = False
        if self.dead and not self._spilling:
            self._out.clear()  # what the recorder did not read is lost with it (the seq count knows)
            self._start_spill(ts, mono)
        if not self._spilling and not self.dead:
            self._flush_gap()
            self._out += record[0]
            self._out += record[1]
            self._pump_out(wait=True)
            self._count(code, payload)
            if self._out and not self.dead:
                self._start_spill(ts, mono)  # the pipe stays full and the queue grows: spill what follows
            return
        if code < EOF_BASE and (
            self._jfd < 0 or self._jsize + self._jpending_bytes + len(payload) > journal.journal_limit()
        ):
            lines, ends = journal.gap_payload(code, payload)  # past the bound: dropped, counted
            self._add_gap(code, lines, ends, ts, mono)
            return
        self._flush_gap()
        self._append(record, code, payload)

    def _count(self, code: int, payload: Any) -> None:
        if code < EOF_BASE:
            self.count.data(code, payload)
        elif code < EOF_BASE + len(STREAMS):
            self.count.eof(code - EOF_BASE)

    def _add_gap(self, code: int, lines: int, ends: bool, ts: float, mono: float) -> None:
        if self._gap is not None and self._gap[0] == code:
            self._gap[1] += lines
            self._gap[2] = ends
            return
        self._flush_gap()
        self._gap = [code, lines, ends, ts, mono]

    def _flush_gap(self) -> None:
        """Write the pending GAP (in order: before the record that follows the drops)."""
        if self._gap is None:
            return
        code, lines, ends, ts, mono = self._gap
        self._gap = None
        record = journal.record(GAP, GAP_BODY.pack(code, lines, ends), ts, mono)
        if self._spilling and self._jfd >= 0:
            self._append(record, GAP, None)
        else:
            self._out += record[0] + record[1]
        self.count.gap(code, lines, ends)

    def _append(self, record: list[bytes], code: int, payload: Any) -> None:
        """One record for the journal segment, written with the records around it by _write_journal."""
        self._jpending.append((record, code, payload))
        self._jpending_bytes += len(record[0]) + len(record[1])
        if len(self._jpending) >= JOURNAL_BATCH or self._jpending_bytes >= JOURNAL_BATCH_BYTES:
            self._write_journal()

    def _write_journal(self) -> None:
        """The records waiting for the journal, in one writev. A write per record made the pumps wait for
        the GIL: a thread that gives it up around a short syscall and takes it straight back keeps a waiting
        pump from its turn (CPython switches by force only when nobody has taken the GIL for the 5 ms
        switch interval), so a burst of them after a pause delayed forwarding by milliseconds. On a write
        error, the records written whole are kept; the rest are dropped, and counted."""
        pending, want = self._jpending, self._jpending_bytes
        self._jpending, self._jpending_bytes = [], 0
        if not pending:
            return
        bufs = [b for record, _, _ in pending for b in record]
        failure: OSError | None = None
        self._disk_since = time.monotonic()
        try:
            try:
                n = os.writev(self._jfd, bufs)
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
                self._jsize += size
                kept += 1
                if code != GAP:
                    self._count(code, payload)
            if failure is None:
                return
            try:
                os.ftruncate(self._jfd, self._jsize)  # no torn record in the middle
            except OSError:
                pass
            self._journal_failed(failure)
            newer, self._gap = self._gap, None  # drops after these records, if any, stay after them
            for record, code, payload in pending[kept:]:  # now down the pipe, after the segment's MARK
                if code < EOF_BASE:
                    lines, ends = journal.gap_payload(code, payload)
                    self._add_gap(code, lines, ends, 0.0, 0.0)
                    continue
                self._flush_gap()
                self._out += record[0] + record[1]  # a control record, or a GAP (counted when it was made)
                if code != GAP:
                    self._count(code, payload)
            self._flush_gap()
            self._gap = newer
        finally:
            self._disk_since = 0.0

    def _journal_failed(self, exc: OSError) -> None:
        if self._jfd >= 0:
            self.warn(f"cannot write the spill journal ({exc.strerror}); frames past this are counted, not kept")
            os.close(self._jfd)
            self._jfd = -1
            if self._marked < self._jsize and not self.dead:  # what it holds is read before what follows
                self._mark()

    def _mark(self) -> None:
        """Tell the recorder (through the pipe, after what it is owed) how far the journal segment goes."""
        head, body = journal.record(MARK, MARK_BODY.pack(self._segment, self._jsize), time.time(), 0.0)
        self._out += head + body
        self._marked = self._jsize

    def _start_spill(self, ts: float, mono: float) -> None:
        self._segment += 1
        path = journal.segment_path(self.db_path, os.getpid(), self._segment)
        head = {**self._config, "recorder_pid": self.proc.pid if self.proc else None, "started": time.time()}
        self._spilling, self._jsize, self._marked = True, 0, 0
        self._disk_since = time.monotonic()
        try:
            self._jfd = journal.create_segment(path, head, self.count.state(), ts, mono)
            self._jsize = os.fstat(self._jfd).st_size
            self._marked = self._jsize
            self.segments.append(path)
        except OSError as exc:
            self._jfd = -1
            if not self._create_failed:  # said once: it is retried each time the pipe stays full
                self._create_failed = True
                self.warn(f"cannot create the spill journal {path} ({exc.strerror}); frames are counted, not kept")
        finally:
            self._disk_since = 0.0

    def _pump_out(self, *, wait: bool) -> None:
        """Write what is owed to the pipe without blocking. With `wait`, keep at it while the recorder
        takes it, the queue stays under SPILL_AT and the pipe has not been full for SPILL_AFTER seconds."""
        if self._jpending:
            self._write_journal()  # a MARK must cover what the journal holds
        since = time.monotonic()
        while True:
            if not self._out and self._spilling and self._jfd >= 0 and self._marked < self._jsize and not self.dead:
                self._mark()
            if not self._out or self.dead:
                return
            try:
                n = os.write(self.fd, self._out)
                del self._out[:n]
                continue
            except BlockingIOError:
                pass
            except OSError as exc:  # EPIPE: the recorder is gone
                self._out.clear()
                self._died(self._how_it_died(self.proc) if self.proc else f"the recorder stopped ({exc.strerror})")
                return
            if not wait or self._bytes >= SPILL_AT or time.monotonic() - since > SPILL_AFTER:
                return
            try:
                select.select([], [self.fd], [], POLL)
            except (OSError, ValueError):
                return

    def _read_acks(self) -> None:
        """The recorder read the journal this far; once it has read all of it, back to the pipe."""
        if not self._spilling or self._ack_fd < 0:
            return
        try:
            data = os.read(self._ack_fd, 4096)
        except (BlockingIOError, OSError):
            return
        self._acks += data
        size = journal.ACK.size
        done = None
        while len(self._acks) >= size:
            done = journal.ACK.unpack(self._acks[:size])
            self._acks = self._acks[size:]
        if done is None or self.dead:
            return
        segment, offset = done
        if segment == self._segment and offset >= self._jsize and not (self._out or self._jpending or self._gap):
            if self._jfd >= 0:
                os.close(self._jfd)
            self._jfd = -1
            self._spilling = False
            path = journal.segment_path(self.db_path, os.getpid(), segment)
            try:
                os.unlink(path)
                self.segments.remove(path)
            except (OSError, ValueError):
                pass

    def _finish_feeding(self) -> None:
        """The CLOSE record is out: deliver what the pipe is owed, then end it (the recorder reads the
        journal to its end at EOF)."""
        self._flush_gap()
        self._write_journal()
        while self._out and not self.dead:
            self._pump_out(wait=False)
            if self._out:
                try:
                    select.select([], [self.fd], [], 0.1)
                except (OSError, ValueError):
                    break
        if self._jfd >= 0:
            os.close(self._jfd)
            self._jfd = -1
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            if self.proc is not None:
                self.proc.stdin = None  # closed above

    # -- closing ----------------------------------------------------------------------------------------
    def close(self, **final: Any) -> None:
        """Send the final fields, let the feeder deliver the rest, and give the recorder a while to commit."""
        self._enqueue(CLOSE, json.dumps(final).encode(), time.time(), time.monotonic() - self.started)
        with self._cond:
            self._closed = True
            self._cond.notify()
        self.launch()
        if self.proc is not None and not self._wait_while_working(self.proc):
            self.warn("the recorder is still writing; it will finish in the background")
        if self.dead:
            self._store_journal(final)

    def _store_journal(self, final: dict[str, Any]) -> None:
        """The recorder died: store what the journal kept, and say exactly what was not recorded."""
        if self._feeder is not None:
            self._feeder.join(5.0)
        from .recover import recover_relay

        fields = {**final, "status": "recorder_died", "error": self.death}
        head = {**self._config, "recorder_pid": self.proc.pid if self.proc else None}
        try:
            recover_relay(self.db_path, os.getpid(), final=fields, warn=self.warn, config=head, wire_seq=self.count.seq)
        except Exception as exc:
            self.warn(f"cannot store the spill journal ({exc}); it stays for `acp-relay recover`")

    def _wait_while_working(self, proc: subprocess.Popen[bytes]) -> bool:
        """Wait for the feeder and the recorder while the recorder uses CPU (a backlog on a busy machine
        drains), but not while it only waits (another process's lock): the relay must exit soon after the
        agent has."""
        start = last_progress = time.monotonic()
        last_cpu = -1
        while time.monotonic() - start < WAIT_AT_EXIT:
            try:
                if self._feeder is not None and self._feeder.is_alive():
                    self._feeder.join(0.25)
                    raise subprocess.TimeoutExpired(proc.args, 0.25)
                proc.wait(0.25)
                return True
            except subprocess.TimeoutExpired:
                pass
            cpu = cpu_ticks(proc.pid)
            now = time.monotonic()
            if cpu > last_cpu:
                last_cpu, last_progress = cpu, now
            elif now - last_progress > STALL_AT_EXIT:
                return False
        return False
