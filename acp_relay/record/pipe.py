"""The relay's side of its recorder: a bounded queue in RAM, fed to the recorder child by a feeder thread.

Why a recorder process: parsing and SQLite are Python work that holds the GIL; in the relay's process
they delayed the forwarding threads by milliseconds. In a child on the other core the relay only copies
each chunk into a pipe. The child's lifetime (started, watched, waited for) is record/childproc.py's; it
finishes on the pipe's EOF: a relay killed with SIGKILL still gets everything it had sent committed.

Why a feeder thread: the pumps must never wait for the recorder. A pump only appends its chunk to a queue
in RAM (RAM_QUEUE_BYTES at most) and goes back to forwarding; the feeder (record/feeder.py), off the
forwarding path, writes the queue into the pipe without blocking on it, and into the spill journal
(record/spill.py) while the pipe stays full. Past the bounds (the RAM queue full because even the journal
cannot be written, or a segment at its limit) chunks are dropped and a GAP record says how many lines they
held: the recorder counts those frames as not recorded, exactly, and seq stays the wire's.

Wire format, relay to recorder: journal.HEADER (code, length, wall time, monotonic time), then `length`
bytes. The recorder acknowledges what it read from the journal on its stdout (journal.ACK).
"""

from __future__ import annotations

import collections
import json
import logging
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from . import childproc, journal
from .childproc import PIPE_SIZE
from .feeder import POLL, Feeder, Item
from .journal import CLOSE, EOF_BASE, GAP, SPAWNED, STREAMS, TRANSPORT

log = logging.getLogger(__name__)
HEADER = journal.HEADER
RAM_QUEUE_BYTES = 16 << 20  # the most the relay holds for its recorder; past it chunks are dropped, counted
FEEDER_STALL = 1.0  # a feeder neither running nor moving a record for this long is stalled: a full queue drops
DISK_STALL = 0.5  # a feeder this long in one journal call, asleep in the kernel, waits on a stalled disk
WAKE_BYTES = 256 << 10  # this much queued wakes the feeder at once

__all__ = ["CLOSE", "EOF_BASE", "HEADER", "PIPE_SIZE", "STREAMS", "RecorderClient"]


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
        transport: str = "stdio",
        endpoint: str | None = None,
        command: str = "run",
    ) -> None:
        self.db_path = db_path
        self.started = time.monotonic()
        self.dead = False  # the recorder is gone: everything goes to the journal, stored at close
        self.death: str | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.fd = -1  # the pipe to the recorder, and its acknowledgements
        self.ack_fd = -1
        # The queue, shared by the pumps and the feeder under `cond`.
        self.cond = threading.Condition()
        self.items: collections.deque[Item] = collections.deque()
        self.waiting = False  # the feeder waits for records
        self._bytes = 0  # queued or being fed: RAM_QUEUE_BYTES bounds both
        self._room_waiters = 0  # pumps waiting for room in a full queue while the feeder moves
        self._stalled_since = -1.0  # the journal call seen asleep on a stalled disk
        self._launched = False
        self._closed = False  # the CLOSE record is queued: later chunks are not this connection's
        self.config = {
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
        self.feeder = Feeder(self)

    @property
    def count(self) -> journal.WireCount:
        """The wire as the feeder sent it on."""
        return self.feeder.count

    @property
    def queued(self) -> int:
        """Bytes queued or being fed."""
        return self._bytes

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
        if self._launched and not (self.waiting and self._bytes >= WAKE_BYTES):
            return
        with self.cond:
            if self.waiting and self._bytes >= WAKE_BYTES:
                self.cond.notify()
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
        with self.cond:
            if self._closed:
                return  # after the agent has gone: not forwarded, not this connection's
            if ts is None or mono is None:
                ts, mono = self.stamp()  # under the lock: the times rise with the queue's order
            if code < EOF_BASE and self._bytes + len(payload) > RAM_QUEUE_BYTES and self._feeding():
                self._wait_for_room(len(payload))
            if code < EOF_BASE and self._bytes + len(payload) > RAM_QUEUE_BYTES:
                self._drop(code, payload, ts, mono)
            else:
                self.items.append((code, payload, ts, mono))
                self._bytes += len(payload)
            if wake and self.waiting and (code >= EOF_BASE or self._bytes >= WAKE_BYTES):
                self.cond.notify()
            launch = wake and not self._launched and self._bytes >= self.PRELAUNCH_BYTES
        if launch:
            self.launch()

    def _wait_for_room(self, size: int) -> None:
        """The feeder is moving (into the pipe or the journal), only slower than the wire just now: wait for
        room rather than lose a frame (self.cond held). A stalled feeder (a frozen filesystem) is not waited
        for: then chunks are dropped, and counted."""
        self._room_waiters += 1
        try:
            while self._bytes + size > RAM_QUEUE_BYTES and self._feeding():
                self.cond.wait(POLL)
        finally:
            self._room_waiters -= 1

    def _drop(self, code: int, payload: bytes, ts: float, mono: float) -> None:
        """Past the queue's bound: a GAP counts the lines the chunk ended (one GAP for a run of drops)."""
        lines, ends = journal.gap_payload(code, payload)
        last = self.items[-1] if self.items else None
        if last is not None and last[0] == GAP and last[1][0] == code:
            self.items[-1] = (GAP, (code, last[1][1] + lines, ends), last[2], last[3])
        else:
            self.items.append((GAP, (code, lines, ends), ts, mono))

    def freed(self, size: int) -> None:
        """The feeder has moved `size` bytes of the queue on."""
        with self.cond:
            self._bytes -= size
            if self._room_waiters:
                self.cond.notify_all()

    def _feeding(self) -> bool:
        """The feeder is moving: not held by the journal's disk, and either it moved a record within
        FEEDER_STALL or the kernel has it running or runnable. A feeder that is only slow (a starved CPU,
        a disk that throttles writers for a few hundred ms) is waited for, so a flood on a busy machine
        loses nothing; only a disk that holds one journal call for DISK_STALL makes a full queue drop."""
        if not self._launched or self.dead or self._disk_stalled():
            return False
        return time.monotonic() - self.feeder.fed_at < FEEDER_STALL or self._feeder_state() == b"R"

    def _feeder_state(self) -> bytes:
        """The feeder thread's state letter in /proc (R running, S sleeping, D in the kernel), or b"?"."""
        try:
            with open(f"/proc/self/task/{self.feeder.tid}/stat", "rb") as f:
                return f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            return b"?"

    def _disk_stalled(self) -> bool:
        """The feeder has been in one journal call for DISK_STALL and the kernel has it asleep (state D): a
        frozen filesystem (or a dead disk), which may last any time, so a full queue drops at once instead
        of holding the wire. The kernel's throttling of dirty writers pauses for at most 200 ms, and a
        freeze is found long before the 16 MiB queue fills unless the wire passes 32 MB/s into it."""
        since = self.feeder.segment.disk_since
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
        with self.cond:
            if self._launched:
                return
            self._launched = True
        try:
            self.proc = childproc.start(self.config, self._exited)
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.fd, self.ack_fd = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        except OSError as exc:
            self._died(f"cannot start the recorder: {exc}")
        self.feeder.start()

    def _exited(self, proc: subprocess.Popen[bytes]) -> None:
        """Notice at once when the recorder dies before the relay has closed it."""
        if self._closed and proc.returncode == 0:
            return
        self._died(childproc.how_it_died(proc))
        childproc.mark_died(self.db_path, proc.pid, self.death)

    def pipe_broke(self, exc: OSError) -> None:
        """The feeder's write to the pipe failed (EPIPE): the recorder is gone."""
        self._died(childproc.how_it_died(self.proc) if self.proc else f"the recorder stopped ({exc.strerror})")

    def _died(self, why: str) -> None:
        with self.cond:
            if self.dead:
                return
            self.dead = True
            self.death = why
            self.cond.notify()
        log.warning(f"{why}; forwarding goes on, and what follows is kept in the spill journal")

    def end_pipe(self) -> None:
        """The feeder has delivered everything: EOF on the pipe (the recorder then finishes)."""
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
        with self.cond:
            self._closed = True
            self.cond.notify()
        self.launch()
        if self.proc is not None and not childproc.wait_while_working(self.proc, self.feeder.thread):
            log.info("the recorder is still writing; it will finish in the background")
        if self.dead:
            self._store_journal(final)

    def _store_journal(self, final: dict[str, Any]) -> None:
        """The recorder died: store what the journal kept, and say exactly what was not recorded."""
        if self.feeder.thread is not None:
            self.feeder.thread.join(5.0)
        from .recover import recover_relay

        fields = {**final, "status": "recorder_died", "error": self.death}
        head = {**self.config, "recorder_pid": self.proc.pid if self.proc else None}
        try:
            recover_relay(self.db_path, os.getpid(), final=fields, config=head, wire_seq=self.count.seq)
        except Exception as exc:
            log.warning(f"cannot store the spill journal ({exc}); it stays for `acp-relay recover`")
