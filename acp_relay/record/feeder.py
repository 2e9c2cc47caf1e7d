"""The relay's feeder thread: moves the pumps' queued records into the recorder's pipe, or the journal.

Off the forwarding path: it writes the queue into the pipe without blocking on it. When the pipe stays
full while SPILL_AT bytes wait or for SPILL_AFTER seconds (the recorder is held up by another writer's
lock, a slow disk, a starved CPU), it appends what follows to a spill journal segment (record/spill.py)
and tells the recorder through the pipe how far the segment goes (MARK); once the recorder acknowledges
all of it, back to the pipe. Past the bounds, records are dropped and a GAP says how many lines they held.
The queue it drains and the recorder process are record/pipe.py's RecorderClient's.
"""

from __future__ import annotations

import collections
import logging
import os
import select
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Protocol

from . import journal
from .journal import CLOSE, EOF_BASE, GAP, GAP_BODY, WireCount
from .spill import Segment

log = logging.getLogger(__name__)

SPILL_AT = 4 << 20  # with this much waiting and the pipe full, the feeder writes to the journal instead
SPILL_AFTER = 1.0  # or when the pipe has stayed full this long (a slow trickle kept in RAM is not safe)
FEED_INTERVAL = 0.005  # the feeder's tick for small traffic (the recorder commits every 100 ms anyway)
POLL = 0.005  # seconds between the feeder's looks at a full pipe and the recorder's acknowledgements

Item = tuple[int, Any, float, float]  # (code, payload, wall, mono): payload bytes, or (lines, ends) for GAP


class Owner(Protocol):
    """What the feeder needs of its RecorderClient (record/pipe.py): the queue it drains, under `cond`,
    and the recorder process's pipes and fate."""

    cond: threading.Condition
    items: collections.deque[Item]
    waiting: bool
    dead: bool
    fd: int
    ack_fd: int
    proc: subprocess.Popen[bytes] | None
    config: dict[str, Any]
    db_path: Path

    @property
    def queued(self) -> int: ...

    def freed(self, size: int) -> None: ...

    def pipe_broke(self, exc: OSError) -> None: ...

    def end_pipe(self) -> None: ...


class Feeder:
    """The feeder thread's state: what the pipe is owed, whether it spills, the drops not yet said."""

    def __init__(self, client: Owner) -> None:
        self.client = client
        self.count = WireCount()  # the wire as sent on, for journal segments
        self.segment = Segment(client.db_path)
        self.fed_at = time.monotonic()  # when the feeder last moved a record on
        self.tid = 0
        self.close_sent = False  # the CLOSE record is routed
        self.thread: threading.Thread | None = None
        self._out = bytearray()  # bytes owed to the pipe (the rest of a record, a mark), in order
        self._spilling = False  # records go to the journal (or, without one, are dropped and counted)
        self._acks = b""
        self._gap: list[Any] | None = None  # [code, lines, ends_line, ts, mono]: drops not yet written

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name="acp-relay-feeder", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.tid = threading.get_native_id()
        client = self.client
        while True:
            with client.cond:
                if not client.items:
                    if self.close_sent:
                        break
                    client.waiting = True
                    client.cond.wait(POLL if self._owed() else FEED_INTERVAL)
                    client.waiting = False
                items = list(client.items)  # in the wire's order: the pumps queue before forwarding
                client.items.clear()
            for item in items:
                self._route(item)
                self.fed_at = time.monotonic()
                if item[0] < EOF_BASE and item[1]:
                    client.freed(len(item[1]))
            self._flush_gap()
            self._pump_out(wait=False)  # which writes what waits for the journal first
            self._read_acks()
        self._finish()

    def _owed(self) -> bool:
        return bool(self._out) or (self._spilling and not self.client.dead)

    def _route(self, item: Item) -> None:
        code, payload, ts, mono = item
        if code == GAP:
            self._add_gap(payload[0], payload[1], payload[2], ts, mono)
            return
        if code == CLOSE:
            self.close_sent = True
        record = journal.record(code, payload, ts, mono)
        client = self.client
        if self._spilling and self.segment.fd < 0 and not client.dead:
            self._pump_out(wait=False)
            if not self._out:
                # No journal (it could not be created, or its disk filled) and the recorder has taken
                # everything owed to it, the drops' GAPs included: it reads again, so back to the pipe;
                # a new segment is tried the next time the pipe stays full.
                self._spilling = False
        if client.dead and not self._spilling:
            self._out.clear()  # what the recorder did not read is lost with it (the seq count knows)
            self._start_spill(ts, mono)
        if not self._spilling and not client.dead:
            self._to_pipe(record, code, payload, ts, mono)
            return
        if code < EOF_BASE and not self.segment.has_room(len(payload)):
            lines, ends = journal.gap_payload(code, payload)  # past the bound: dropped, counted
            self._add_gap(code, lines, ends, ts, mono)
            return
        self._flush_gap()
        self._append(record, code, payload)

    def _to_pipe(self, record: list[bytes], code: int, payload: Any, ts: float, mono: float) -> None:
        self._flush_gap()
        self._out += record[0]
        self._out += record[1]
        self._pump_out(wait=True)
        self._count(code, payload)
        if self._out and not self.client.dead:
            self._start_spill(ts, mono)  # the pipe stays full and the queue grows: spill what follows

    def _count(self, code: int, payload: Any) -> None:
        if code < EOF_BASE:
            self.count.data(code, payload)
        elif code < EOF_BASE + len(journal.STREAMS):
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
        if self._spilling and self.segment.fd >= 0:
            self._append(record, GAP, None)
        else:
            self._out += record[0] + record[1]
        self.count.gap(code, lines, ends)

    def _append(self, record: list[bytes], code: int, payload: Any) -> None:
        """One record for the journal segment, written with the records around it by _write_journal."""
        if self.segment.add(record, code, payload):
            self._write_journal()

    def _write_journal(self) -> None:
        """The records waiting for the journal, in one writev. A write per record made the pumps wait for
        the GIL: a thread that gives it up around a short syscall and takes it straight back keeps a waiting
        pump from its turn (CPython switches by force only when nobody has taken the GIL for the 5 ms
        switch interval), so a burst of them after a pause delayed forwarding by milliseconds. On a write
        error, the records written whole are kept; the rest are dropped, and counted."""
        rest, failure = self.segment.write(self._count)
        if failure is None:
            return
        self._journal_failed(failure)
        newer, self._gap = self._gap, None  # drops after these records, if any, stay after them
        for record, code, payload in rest:  # now down the pipe, after the segment's MARK
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

    def _journal_failed(self, exc: OSError) -> None:
        seg = self.segment
        if seg.fd >= 0:
            log.warning(f"cannot write the spill journal ({exc.strerror}); frames past this are counted, not kept")
            seg.close()
            if seg.marked < seg.size and not self.client.dead:  # what it holds is read before what follows
                self._mark()

    def _mark(self) -> None:
        """Tell the recorder (through the pipe, after what it is owed) how far the journal segment goes."""
        head, body = self.segment.mark()
        self._out += head + body

    def _start_spill(self, ts: float, mono: float) -> None:
        client = self.client
        head = {**client.config, "recorder_pid": client.proc.pid if client.proc else None, "started": time.time()}
        self._spilling = True
        self.segment.open_next(head, self.count.state(), ts, mono)

    def _pump_out(self, *, wait: bool) -> None:
        """Write what is owed to the pipe without blocking. With `wait`, keep at it while the recorder
        takes it, the queue stays under SPILL_AT and the pipe has not been full for SPILL_AFTER seconds."""
        if self.segment.pending:
            self._write_journal()  # a MARK must cover what the journal holds
        client, seg = self.client, self.segment
        since = time.monotonic()
        while True:
            if not self._out and self._spilling and seg.fd >= 0 and seg.marked < seg.size and not client.dead:
                self._mark()
            if not self._out or client.dead:
                return
            try:
                n = os.write(client.fd, self._out)
                del self._out[:n]
                continue
            except BlockingIOError:
                pass
            except OSError as exc:  # EPIPE: the recorder is gone
                self._out.clear()
                client.pipe_broke(exc)
                return
            if not wait or client.queued >= SPILL_AT or time.monotonic() - since > SPILL_AFTER:
                return
            try:
                select.select([], [client.fd], [], POLL)
            except (OSError, ValueError):
                return

    def _read_acks(self) -> None:
        """The recorder read the journal this far; once it has read all of it, back to the pipe."""
        ack_fd = self.client.ack_fd
        if not self._spilling or ack_fd < 0:
            return
        try:
            data = os.read(ack_fd, 4096)
        except (BlockingIOError, OSError):
            return
        self._acks += data
        size = journal.ACK.size
        done = None
        while len(self._acks) >= size:
            done = journal.ACK.unpack(self._acks[:size])
            self._acks = self._acks[size:]
        if done is None or self.client.dead:
            return
        if self.segment.read_to_end(*done) and not (self._out or self.segment.pending or self._gap):
            self.segment.remove()
            self._spilling = False

    def _finish(self) -> None:
        """The CLOSE record is out: deliver what the pipe is owed, then end it (the recorder reads the
        journal to its end at EOF)."""
        client = self.client
        self._flush_gap()
        self._write_journal()
        while self._out and not client.dead:
            self._pump_out(wait=False)
            if self._out:
                try:
                    select.select([], [client.fd], [], 0.1)
                except (OSError, ValueError):
                    break
        self.segment.close()
        client.end_pipe()
