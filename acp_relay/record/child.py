"""The recorder child process: decodes the relay's records from its stdin and hands them to the Recorder.

Started by record/pipe.py as `python -m acp_relay.record.child CONFIG_JSON`. Records come through the pipe
or, while the relay spills (record/journal.py), from journal segments the pipe's MARK records point to; it
acknowledges each on its stdout so the relay can go back to the pipe. It ends on the pipe's EOF, after
committing: a relay killed with SIGKILL still gets what it had sent recorded, the journal read to its end,
and a last line without its newline stored flagged `unterminated`.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO

from . import journal
from .journal import ACK, STREAMS
from .pipe import PIPE_SIZE

GC_THRESHOLD = 20_000  # young-generation collections every 20,000 net allocations (CPython's default: 700)
JOURNAL_BUFFER = 1 << 20


def _tune_gc() -> None:
    """The recorder makes a few container objects per frame that live until their batch is written: with
    CPython's default thresholds the collector ran every 700 of them and walked the young generations
    over and over (a quarter of the indexing CPU under a flood). Nothing per frame forms a reference cycle;
    collect rarely, and never walk what start-up loaded (frozen once the modules are imported)."""
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD, 50, 1000)


class Feed:
    """Hands decoded records to the Recorder, and reads the relay's journal segments when told to."""

    def __init__(self, recorder: Any, db: Path, relay_pid: int, ack_fd: int | None) -> None:
        self.recorder = recorder
        self.db, self.relay_pid, self.ack_fd = db, relay_pid, ack_fd
        self.final: dict[str, Any] | None = None
        self.ended: set[int] = set()
        self.segment = 0  # the segment being read, and its file
        self.file: BinaryIO | None = None
        self.read: list[Path] = []  # segments read to their end

    def handle(self, rec: journal.Record | None, *, resync: bool = False) -> None:
        """One decoded record: the wire's go to the Recorder (a segment's STATE only when resyncing), a
        MARK sends us reading the journal, CLOSE is kept for the end."""
        match rec:
            case journal.Eof(stream, _, _):
                self.ended.add(STREAMS.index(stream))
            case journal.Close(fields, _, _):
                self.final = fields
                return
            case journal.Mark(segment, offset, _, _):
                self.read_journal(segment, offset)
                return
            case journal.State() if not resync:
                return
        if rec is not None:
            journal.deliver(self.recorder, rec)

    def _open(self, n: int) -> BinaryIO | None:
        if self.file is not None and self.segment == n:
            return self.file
        if self.file is not None:
            self.file.close()
            self.read.append(journal.segment_path(self.db, self.relay_pid, self.segment))
        self.file, self.segment = None, n
        try:
            self.file = open(journal.segment_path(self.db, self.relay_pid, n), "rb", buffering=JOURNAL_BUFFER)  # noqa: SIM115
        except OSError:
            return None
        return self.file

    def read_journal(self, n: int, end: int | None, *, resync: bool = False) -> None:
        """Segment n up to offset `end` (None: to its end), then tell the relay how far."""
        f = self._open(n)
        if f is None:
            return
        for rec in journal.read_typed(f, end):
            self.handle(rec, resync=resync)
        if self.ack_fd is not None and end is not None:
            try:
                os.write(self.ack_fd, ACK.pack(n, f.tell()))
            except OSError:  # the relay is gone or not listening: it reads acks only while spilling
                pass

    def read_rest(self, torn: bool) -> None:
        """At the pipe's EOF: every segment this relay left from the current one on, to its end. After a
        torn record the pipe's bytes and the journal's do not join up: the segment's STATE says where it
        starts."""
        for n, _ in journal.segments(self.db, self.relay_pid).get(self.relay_pid, []):
            if n < self.segment:
                continue
            fresh = self.file is None or self.segment != n
            self.read_journal(n, None, resync=torn and fresh)
        if self.file is not None:
            self.file.close()
            self.read.append(journal.segment_path(self.db, self.relay_pid, self.segment))
            self.file = None


def serve(config: dict[str, Any], inp: BinaryIO, ack_fd: int | None = None) -> int:
    """The child: decode the relay's records and hand them to a Recorder."""
    from .recorder import from_config
    from .recover import recover_stale

    _tune_gc()
    db = Path(config["db"])
    relay_pid = int(config.get("relay_pid") or os.getppid())
    recorder = from_config(
        db, config, relay_pid, transport=config.get("transport") or "stdio", endpoint=config.get("endpoint")
    )
    # A close that gives up on another writer's lock puts what is not stored in a segment of this relay's.
    recorder.journal_head = {**config, "relay_pid": relay_pid, "recorder_pid": os.getpid(), "started": time.time()}
    recorder.start()
    # Journals whose relay and recorder both died: stored now, beside this connection's recording.
    stale = threading.Thread(target=recover_stale, args=(db,), name="acp-relay-recover", daemon=True)
    stale.start()
    feed = Feed(recorder, db, relay_pid, ack_fd)
    torn = _read_pipe(inp, feed)
    final = feed.final
    if final is None or torn:  # the relay died without saying goodbye (SIGKILL), or mid-record
        feed.read_rest(torn)
    if feed.file is not None:
        feed.file.close()
        feed.read.append(journal.segment_path(db, relay_pid, feed.segment))
    if final is None:
        now = time.time()
        for code in range(len(STREAMS)):  # a last line the editor or agent had sent without its newline is kept
            if code not in feed.ended:
                recorder.put(STREAMS[code], b"", now, now - recorder.started)
        final = {"status": "interrupted", "closed_by": "relay_killed"}
    drained = recorder.close(**final)
    if drained or recorder.spilled is not None:  # what the segments held is stored, or in the new one
        _unlink(feed.read)
    stale.join(30.0)
    return 0


def _read_pipe(inp: BinaryIO, feed: Feed) -> bool:
    """Every record until the pipe's EOF; True when it ended inside a record (the relay was killed)."""
    size, unpack, decode = journal.HEADER.size, journal.HEADER.unpack, journal.decode
    while True:
        head = inp.read(size)
        if len(head) < size:
            return bool(head)
        code, length, ts, mono = unpack(head)
        payload = inp.read(length) if length else b""
        if payload is None or len(payload) < length:
            return True
        feed.handle(decode(code, payload, ts, mono))


def _unlink(paths: list[Path]) -> None:
    for path in paths:
        try:
            os.unlink(path)
        except OSError:
            pass


def main() -> None:
    try:
        os.nice(10)  # the forwarding path (editor, relay, agent) goes first when CPUs are scarce
    except OSError:
        pass
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)  # we end on the pipe's EOF, after committing
    try:
        os.set_blocking(1, False)  # acknowledgements never wait for the relay
    except OSError:
        pass
    config = json.loads(sys.argv[1])
    from .. import diagnostics

    diagnostics.set_command(str(config.get("command") or "run"))  # its lines name the relay's command
    diagnostics.install()
    with open(0, "rb", buffering=PIPE_SIZE) as inp:
        sys.exit(serve(config, inp, 1))


if __name__ == "__main__":
    main()
