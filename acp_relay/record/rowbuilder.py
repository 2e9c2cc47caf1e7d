"""The recorder's row builder: the relay's chunks in, one transaction's row parameters (a Batch) out.

Sans-I/O on purpose: framing, classification and correlation (the Tracker), redaction and the frame,
stderr and transport rows are plain code over bytes, with no thread, lock or database, so every rule is a
unit test (tests/test_rowbuilder.py). The Recorder (record/recorder.py) runs it on its indexing thread and
hands each Batch to its writer (record/dbwriter.py); the SQL that inserts a Batch is store/writer.py's.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import orjson

from ..protocol.framing import LineFramer
from ..protocol.jsonrpc import A2C, C2A, ERR, NET
from ..protocol.redact import WALK_FROM, Policy, redact_frame, redact_line, watched_keys_in
from ..protocol.tracker import Frame, Tracker
from ..store.writer import (
    QUICK_WIDTH,
    Batch,
    _redacted_quick_row,
    frame_rows,
    json_or_null,
    session_rows,
    transport_row,
)

SUB_BATCH_BYTES = 1 << 20  # frame bytes per Batch under a flood: one transaction each
STDERR_TAIL_LINES = 20
WATCH_CHUNK_SHIFT = WALK_FROM.bit_length() - 1  # a chunk is scanned whole when its frames average < WALK_FROM

Rows = list[tuple[Any, ...]]


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


# One queued item: a stream, its chunk (b"" is EOF) or a Gap / Resync, the wall and monotonic times.
Item = tuple[str, Any, float, float]


class Position(NamedTuple):
    """Where the wire is: the seq, each stream's line held unfinished (LineFramer parts, or its big
    buffer and the length then: it only grows), whether it is skipping a lost line, and its bytes before
    that line. What a close that gives up needs to write the rest to a journal."""

    seq: int
    held: list[tuple[tuple[bytes, ...], bytearray | None, int]]
    mid: list[bool]
    bytes: list[int]


class _PerMethod(dict[str, bool]):
    """A function of a method name, each answer kept (the policy does not change while a batch is indexed)."""

    def __init__(self, fn: Callable[[str], bool]) -> None:
        super().__init__()
        self.fn = fn

    def __missing__(self, method: str) -> bool:
        self[method] = hit = self.fn(method)
        return hit


class _Pending:
    """The rows of the Batch being built."""

    def __init__(self) -> None:
        self.rows: Rows = []
        self.members: Rows = []
        self.stderr: Rows = []
        self.size = 0


class RowBuilder:
    """Turns queued items into Batches; keeps the wire's state between calls (framers, seq, bytes)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.tracker = Tracker(policy)  # redacts each frame it parses whole, before indexing it
        self.stderr_framer = LineFramer()
        self.stderr_tail: collections.deque[bytes] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self.bytes = {C2A: 0, A2C: 0, ERR: 0}
        # Streams whose current line lost bytes before it reached us (a GAP, or a journal that starts
        # inside a line): its bytes up to the next newline are skipped, and it counts as a frame not recorded.
        self.skip = {C2A: False, A2C: False, ERR: False}
        self.skip_through = 0  # a recovery: frames up to this seq are stored already
        self.net: Rows = []  # transport events waiting for the next batch
        self._keyless = _PerMethod(policy.might_apply_without_keys)

    def build(self, items: list[Item], cid: int) -> Iterator[tuple[Batch, int | None]]:
        """The Batches for `items`, each with the number of items it covers when it ends a sub-batch
        (None for the last one, which covers them all)."""
        # might_apply_without_keys by method, asked once per method (0.4 us a call, on every frame of a flood)
        self._keyless = _PerMethod(self.policy.might_apply_without_keys)
        out = _Pending()
        for i, (stream, chunk, ts, mono) in enumerate(items):
            if type(chunk) is not bytes:
                self.control(stream, chunk)
                continue
            if stream == NET:  # a transport event (JSON), not a frame: a row of transport_events
                if chunk:  # its session id and details redacted as a frame is (the same policy, any string)
                    event = redact_frame(chunk, self.policy)[0] if self.policy.enabled else chunk
                    self.net.append(transport_row(cid, event, ts, mono))
                continue
            if self.skip[stream]:
                rest = self._skip_lost_line(stream, chunk)
                if rest is None:
                    continue
                chunk = rest
            if stream == ERR:
                self._stderr(chunk, ts, mono, cid, out.stderr)
                continue
            self._frames(stream, chunk, ts, mono, cid, out)
            out.size += len(chunk)
            if out.size >= SUB_BATCH_BYTES:
                yield self.batch(cid, out), i + 1
                out = _Pending()
        tracker = self.tracker
        if out.rows or out.stderr or tracker.dirty_sessions or tracker.info_dirty or tracker.backfill or self.net:
            yield self.batch(cid, out), None

    def _stderr(self, chunk: bytes, ts: float, mono: float, cid: int, stderr_rows: Rows) -> None:
        self.bytes[ERR] += len(chunk)
        if chunk:
            lines = [(line, 0) for line in self.stderr_framer.feed(chunk)]
        else:
            last = self.stderr_framer.finish()
            lines = [] if last is None else [(last, 1)]
        policy = self.policy
        for line, unterminated in lines:
            if policy.enabled:
                line, _ = redact_line(line, policy)
            self.stderr_tail.append(line)
            stderr_rows.append((cid, ts, mono, line, unterminated))

    def _frames(self, stream: str, chunk: bytes, ts: float, mono: float, cid: int, out: _Pending) -> None:
        """A chunk of c2a or a2c (b"": EOF): its frames' rows."""
        tracker = self.tracker
        self.bytes[stream] += len(chunk)
        carried = tracker.framers[stream].pending  # the first line completed may have begun earlier
        new = tracker.feed_rows(stream, chunk, ts, mono) if chunk else tracker.eof(stream, ts, mono)
        # Small frames: one scan of the chunk for the keys redaction watches instead of one per frame
        # (a call per frame is most of a 200 B frame's scan). Not for big ones, whose parsed keys are
        # looked at instead of their bytes (see redact.WALK_FROM).
        clean = (
            bool(chunk)
            and self.policy.enabled
            and len(new) << WATCH_CHUNK_SHIFT > len(chunk)
            and not watched_keys_in(chunk)
        )
        if self.skip_through and new:  # a recovery: what the recorder had stored already stays as it is
            new = [f for f in new if (f.seq if isinstance(f, Frame) else f[0]) > self.skip_through]
        first = new[0] if carried and new else None  # its bytes were not all in this chunk
        self._rows(new, first, clean, cid, out)

    def _rows(self, new: list[Any], first: Any, clean: bool, cid: int, out: _Pending) -> None:
        """QuickRows of this chunk (one direction, ts and mono) that follow each other in seq with the
        same method, session, update kind and details go into one run: a row of QUICK_WIDTH whose raw is
        the list of their bytes (see writer.insert_runs). `run` is the open one's list."""
        policy, rows, keyless, dumps = self.policy, out.rows, self._keyless, orjson.dumps
        might_apply_one = policy.might_apply_one if policy.enabled else None
        run: list[bytes] | None = None
        run_seq = 0
        run_key: tuple[Any, ...] = ()
        for f in new:
            if isinstance(f, Frame):
                run = None
                self._full(f, cid, out)
            elif might_apply_one is not None and (
                keyless[f[5]] if clean and f is not first else might_apply_one(f[4], f[5], f[9])
            ):  # a QuickRow (a plain notification, the bulk of a flood) the policy may apply to
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

    def _full(self, f: Frame, cid: int, out: _Pending) -> None:
        """A frame the tracker parsed whole (a request, a response, a batch, not JSON-RPC...): redacted and
        indexed from its redacted copy by the tracker already."""
        for m in f.index.messages:
            m.message = None  # the parsed copy (as big as the frame) can go
        frame_rows(cid, [f], out.rows, out.members)

    def control(self, stream: str, item: Gap | Resync) -> None:
        """A Gap or a Resync: the stream's pending partial line is lost; seq goes on as the wire's."""
        framer = self.stderr_framer if stream == ERR else self.tracker.framers[stream]
        if isinstance(item, Gap):
            framer.finish()
            if stream != ERR:
                self.tracker.seq += item.lines
            self.skip[stream] = not item.ends_line
            return
        self.tracker.seq = item.seq
        if item.bytes is not None:
            self.bytes = dict(zip((C2A, A2C, ERR), item.bytes, strict=False))
        for s, mid in zip((C2A, A2C, ERR), item.mid, strict=False):
            (self.stderr_framer if s == ERR else self.tracker.framers[s]).finish()
            self.skip[s] = bool(mid)

    def _skip_lost_line(self, stream: str, chunk: bytes) -> bytes | None:
        """Drop the rest of a line that lost bytes (it is one frame, not recorded); None when the whole
        chunk was part of it. At EOF (b"") the line ends there."""
        end = chunk.find(b"\n") if chunk else -1
        if chunk and end < 0:
            self.bytes[stream] += len(chunk)
            return None
        self.skip[stream] = False
        if stream != ERR:
            self.tracker.seq += 1
        if not chunk:
            return chunk
        self.bytes[stream] += end + 1
        rest = chunk[end + 1 :]
        return rest or None

    def batch(self, cid: int, out: _Pending | None = None) -> Batch:
        """Everything one transaction writes, taken from the tracker now: the writer thread inserts it while
        the indexing thread goes on (SQLite lets go of the GIL while it works)."""
        out = out or _Pending()
        tracker = self.tracker
        sessions = session_rows(cid, (tracker.sessions[k] for k in tracker.dirty_sessions))
        info = tracker.info
        frames = sum(len(r[4]) if len(r) == QUICK_WIDTH else 1 for r in out.rows)
        update = (
            frames,
            self.bytes[C2A],
            self.bytes[A2C],
            self.bytes[ERR],
            info.protocol_version,
            json_or_null(info.client_info),  # read from the redacted initialize (see Tracker)
            json_or_null(info.agent_info),
            cid,
        )
        backfill = [(sid, cid, seq) for seq, sid in tracker.backfill]
        net, self.net = self.net, []
        batch = Batch(out.rows, out.members, out.stderr, backfill, sessions, update, net, frames)
        tracker.backfill = []
        tracker.dirty_sessions = set()
        tracker.info_dirty = False
        return batch

    def position(self) -> Position:
        """Where the wire is now (see Position): cheap enough to take at every sub-batch."""
        framers = (self.tracker.framers[C2A], self.tracker.framers[A2C], self.stderr_framer)
        return Position(
            self.tracker.seq,
            [_held(f) for f in framers],
            [self.skip[C2A], self.skip[A2C], self.skip[ERR]],
            [self.bytes[s] - f.pending for s, f in zip((C2A, A2C, ERR), framers, strict=True)],
        )

    def stderr_text(self) -> str | None:
        """The last stderr lines, for the connection row."""
        return b"\n".join(self.stderr_tail).decode("utf-8", "replace") or None


def _held(framer: LineFramer) -> tuple[tuple[bytes, ...], bytearray | None, int]:
    """A reference to the unfinished line a framer holds."""
    big = framer._big
    return (tuple(framer._parts), big, len(big)) if big is not None else (tuple(framer._parts), None, 0)
