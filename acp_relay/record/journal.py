"""The spill journal: where the relay puts what its recorder has not taken yet, so the wire never waits.

Normally the relay hands each chunk to its recorder process through a pipe. When that pipe is full (the
recorder waits for another process's write lock, a slow disk, a starved CPU) the relay's feeder thread
appends the records to a journal file beside the database instead, and tells the recorder through the
pipe how far the journal goes; the recorder reads it in order and acknowledges, and once it has caught up
the feeder deletes the file and goes back to the pipe. A relay killed meanwhile leaves the journal behind
for its recorder to finish (it reads to the end at the pipe's EOF) or, when the recorder is gone too, for
the next relay start or `acp-relay recover`.

A journal segment is `DB.spill-RELAYPID-N` (0600, in the database's 0700 directory): a HEADER record (JSON:
the connection's config and the recorder's pid), a STATE record (where the wire was when the segment began:
frames completed so far, which streams were in the middle of a line), then records in the pipe's format.
A torn record at the end (a relay killed mid-write) is ignored. A segment holds at most `journal_limit()`
bytes; past that, records are dropped and counted (a GAP record says how many lines they held).

The codec: each record is a NamedTuple (Chunk, Eof, Gap, Spawned, Transport, Close, Mark, Head, State);
encode() and decode() are the one pair the pipe's reader, the journal's writers and `recover` use, and
deliver() hands the wire's records to a Recorder. The feeder's hot path packs its raw (code, payload)
items with record(), the same bytes.
"""

from __future__ import annotations

import json
import os
import re
import stat
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple, Protocol

from ..protocol.jsonrpc import A2C, C2A, ERR, NET
from ..store.db import private_dir

HEADER = struct.Struct("<BIdd")  # code, payload length, wall time, monotonic time
STREAM_CODES = (0, 1, 2)  # c2a, a2c, stderr: payload is the chunk
EOF_BASE = 10  # EOF_BASE + stream code: that stream ended
SPAWNED = 20  # payload: JSON {"agent_pid": N}
TRANSPORT = 25  # payload: JSON of one transport event (a remote connection's HTTP request, WebSocket close...)
CLOSE = 30  # payload: JSON of the connection's final fields
GAP = 40  # payload: GAP_BODY: records dropped on a stream (the bounds were reached)
MARK = 50  # pipe only, payload: MARK_BODY: the journal segment N holds complete records up to OFFSET
JOURNAL_HEAD = 60  # journal only, first record: JSON config
STATE = 61  # journal only, second record: JSON {"seq": N, "mid": [c2a, a2c, stderr]}
GAP_BODY = struct.Struct("<BQ?")  # stream code, lines the dropped bytes ended, whether they ended a line
MARK_BODY = struct.Struct("<IQ")  # segment number, offset
ACK = struct.Struct("<IQ")  # recorder to relay (its stdout): read segment N up to OFFSET

DEFAULT_LIMIT = 2 << 30  # bytes one segment may hold; ACP_RELAY_JOURNAL_MAX overrides it
_SEGMENT = re.compile(r"\.spill-(\d+)-(\d+)$")


STREAMS = (C2A, A2C, ERR)  # by stream code


class Chunk(NamedTuple):
    """Bytes read on a stream (c2a, a2c or stderr), with the times they were read."""

    stream: str
    data: bytes
    ts: float
    mono: float


class Eof(NamedTuple):
    """The stream ended (a last line without its newline ends there)."""

    stream: str
    ts: float
    mono: float


class Gap(NamedTuple):
    """Bytes the relay dropped on a stream: the lines they ended, and whether they ended on a newline."""

    stream: str
    lines: int
    ends_line: bool
    ts: float
    mono: float


class Spawned(NamedTuple):
    agent_pid: int | None
    ts: float
    mono: float


class Transport(NamedTuple):
    """One transport event, as JSON bytes (a remote connection's HTTP request, a WebSocket close...)."""

    event: bytes
    ts: float
    mono: float


class Close(NamedTuple):
    """The connection's final fields (status, exit code...)."""

    fields: dict[str, Any]
    ts: float
    mono: float


class Mark(NamedTuple):
    """Pipe only: journal segment `segment` holds complete records up to `offset`."""

    segment: int
    offset: int
    ts: float
    mono: float


class Head(NamedTuple):
    """A segment's first record: the connection's config (and the recorder's pid)."""

    config: dict[str, Any]
    ts: float
    mono: float


class State(NamedTuple):
    """A segment's second record: frames completed on the wire before it, which streams were inside a
    line, and (when known) each stream's bytes before it."""

    seq: int
    mid: list[bool]
    bytes: list[int] | None
    ts: float
    mono: float


Record = Chunk | Eof | Gap | Spawned | Transport | Close | Mark | Head | State


def encode(rec: Record) -> list[bytes]:
    """A record's pieces in the pipe's and the journal's format, for writev."""
    match rec:
        case Chunk(stream, data, ts, mono):
            return record(STREAMS.index(stream), data, ts, mono)
        case Eof(stream, ts, mono):
            return record(EOF_BASE + STREAMS.index(stream), b"", ts, mono)
        case Gap(stream, lines, ends, ts, mono):
            return record(GAP, GAP_BODY.pack(STREAMS.index(stream), lines, ends), ts, mono)
        case Spawned(pid, ts, mono):
            return record(SPAWNED, json.dumps({"agent_pid": pid}).encode(), ts, mono)
        case Transport(event, ts, mono):
            return record(TRANSPORT, event, ts, mono)
        case Close(fields, ts, mono):
            return record(CLOSE, json.dumps(fields).encode(), ts, mono)
        case Mark(segment, offset, ts, mono):
            return record(MARK, MARK_BODY.pack(segment, offset), ts, mono)
        case Head(config, ts, mono):
            return record(JOURNAL_HEAD, json.dumps(config).encode(), ts, mono)
        case State(seq, mid, sizes, ts, mono):
            state = {"seq": seq, "mid": list(mid), "bytes": sizes}
            return record(STATE, json.dumps(state).encode(), ts, mono)
    raise TypeError(f"not a journal record: {rec!r}")


def decode(code: int, payload: bytes, ts: float, mono: float) -> Record | None:
    """The record a code and payload stand for; None for a code this version does not know (skipped, as
    the pipe's readers always did)."""
    if code < EOF_BASE:
        return Chunk(STREAMS[code], payload, ts, mono) if code < len(STREAMS) else None
    if code < EOF_BASE + len(STREAMS):
        return Eof(STREAMS[code - EOF_BASE], ts, mono)
    if code == GAP:
        stream, lines, ends = GAP_BODY.unpack(payload)
        return Gap(STREAMS[stream], lines, ends, ts, mono)
    if code == TRANSPORT:
        return Transport(payload, ts, mono)
    if code == MARK:
        segment, offset = MARK_BODY.unpack(payload)
        return Mark(segment, offset, ts, mono)
    if code == SPAWNED:
        return Spawned(json.loads(payload).get("agent_pid"), ts, mono)
    if code == CLOSE:
        return Close(json.loads(payload), ts, mono)
    if code == JOURNAL_HEAD:
        return Head(json.loads(payload), ts, mono)
    if code == STATE:
        state = json.loads(payload)
        return State(state["seq"], state["mid"], state.get("bytes"), ts, mono)
    return None


class Sink(Protocol):
    """What a decoded record is handed to: the Recorder's producer side."""

    def put(self, stream: str, chunk: bytes, ts: float | None = None, mono: float | None = None) -> None: ...

    def gap(self, stream: str, lines: int, ends_line: bool, ts: float, mono: float) -> None: ...

    def resync(self, seq: int, mid: list[bool], sizes: list[int] | None = None) -> None: ...

    def record_spawn(self, agent_pid: int | None) -> None: ...


def deliver(sink: Sink, rec: Record) -> bool:
    """Hand a wire record (a chunk, an EOF, a gap, a transport event, a spawn, a segment's STATE) to the
    recorder; False for the records the reader itself acts on (Close, Mark, Head)."""
    match rec:
        case Chunk(stream, data, ts, mono):
            sink.put(stream, data, ts, mono)
        case Eof(stream, ts, mono):
            sink.put(stream, b"", ts, mono)
        case Gap(stream, lines, ends, ts, mono):
            sink.gap(stream, lines, ends, ts, mono)
        case Transport(event, ts, mono):
            sink.put(NET, event, ts, mono)
        case Spawned(pid, _, _):
            sink.record_spawn(pid)
        case State(seq, mid, sizes, _, _):
            sink.resync(seq, mid, sizes)
        case _:
            return False
    return True


def read_typed(f: BinaryIO, end: int | None = None) -> Iterator[Record]:
    """The records read_records finds, decoded (unknown codes skipped)."""
    for code, payload, ts, mono in read_records(f, end):
        rec = decode(code, payload, ts, mono)
        if rec is not None:
            yield rec


def journal_limit() -> int:
    """The most one journal segment may hold: ACP_RELAY_JOURNAL_MAX (bytes) or DEFAULT_LIMIT (2 GiB)."""
    try:
        return max(1 << 16, int(os.environ["ACP_RELAY_JOURNAL_MAX"]))
    except (KeyError, ValueError):
        return DEFAULT_LIMIT


def record(code: int, payload: bytes, ts: float, mono: float) -> list[bytes]:
    """A record's pieces, for writev."""
    return [HEADER.pack(code, len(payload), ts, mono), payload]


def write_all(fd: int, pieces: list[bytes]) -> None:
    """Write every piece, in writevs of at most IOV_MAX buffers, going on after a short write."""
    for i in range(0, len(pieces), 1000):
        batch = [memoryview(p) for p in pieces[i : i + 1000] if p]
        while batch:
            n = os.writev(fd, batch)
            while batch and n >= len(batch[0]):
                n -= len(batch[0])
                batch.pop(0)
            if batch and n:
                batch[0] = batch[0][n:]


def segment_path(db: Path | str, relay_pid: int, n: int) -> Path:
    return Path(f"{db}.spill-{relay_pid}-{n}")


def segments(db: Path | str, relay_pid: int | None = None) -> dict[int, list[tuple[int, Path]]]:
    """Journal segments beside the database: relay pid -> [(segment number, path)] in order. Only regular
    files: a FIFO under a segment's name would block `recover` (and every relay's start) in open(), and a
    link would have it read, then delete, what someone else chose."""
    db = Path(db)
    found: dict[int, list[tuple[int, Path]]] = {}
    try:
        names = os.listdir(db.parent)
    except OSError:
        return found
    prefix = db.name + ".spill-"
    for name in names:
        m = _SEGMENT.search(name)
        if not name.startswith(prefix) or not m or name != f"{db.name}.spill-{m.group(1)}-{m.group(2)}":
            continue
        pid, n = int(m.group(1)), int(m.group(2))
        if (relay_pid is None or pid == relay_pid) and _regular(db.parent / name):
            found.setdefault(pid, []).append((n, db.parent / name))
    for items in found.values():
        items.sort()
    return found


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def create_segment(path: Path, head: dict[str, Any], state: dict[str, Any], ts: float, mono: float) -> int:
    """A new segment (0600, never an existing file) with its HEADER and STATE; returns its descriptor."""
    private_dir(path)  # the recorder may not have created the database yet
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        write_all(
            fd,
            record(JOURNAL_HEAD, json.dumps(head).encode(), ts, mono)
            + record(STATE, json.dumps(state).encode(), ts, mono),
        )
    except OSError:
        os.close(fd)
        try:
            os.unlink(path)
        except OSError:
            pass
        raise
    return fd


def read_records(f: BinaryIO, end: int | None = None) -> Iterator[tuple[int, bytes, float, float]]:
    """Complete records from the file's position, up to `end` (an offset) or the end of the file."""
    while end is None or f.tell() < end:
        head = f.read(HEADER.size)
        if len(head) < HEADER.size:
            return
        code, length, ts, mono = HEADER.unpack(head)
        payload = f.read(length) if length else b""
        if len(payload) < length:
            return  # torn: the writer was killed mid-record
        yield code, payload, ts, mono


@dataclass
class WireCount:
    """Where the wire is, counted the way the recorder's tracker numbers frames: every line of c2a and a2c
    is a frame (seq counts them across both), and a last line without a newline is one at EOF.

    `mid[s]`: stream s is inside a line. The feeder keeps one so that a journal segment can say where it
    starts, and so that a recovery knows which frames were lost before it."""

    seq: int = 0
    mid: list[bool] = field(default_factory=lambda: [False, False, False])

    def data(self, code: int, chunk: bytes) -> None:
        if not chunk:
            return
        if code < 2:
            self.seq += chunk.count(b"\n")
        self.mid[code] = chunk[-1:] != b"\n"

    def gap(self, code: int, lines: int, ends_line: bool) -> None:
        if code < 2:
            self.seq += lines
        self.mid[code] = not ends_line

    def eof(self, code: int) -> None:
        if code < 2 and self.mid[code]:
            self.seq += 1
        self.mid[code] = False

    def state(self) -> dict[str, Any]:
        return {"seq": self.seq, "mid": list(self.mid)}


def gap_payload(code: int, chunk: bytes) -> tuple[int, bool]:
    """(lines ended, whether it ended a line) of a dropped chunk."""
    return chunk.count(b"\n"), chunk[-1:] == b"\n"
