"""The journal codec: every record the pipe and the spill journal carry, encoded and decoded by one pair."""

from __future__ import annotations

import io
from typing import Any

import pytest

from acp_relay.record import journal
from acp_relay.record.journal import Chunk, Close, Eof, Gap, Head, Mark, Spawned, State, Transport

RECORDS: list[journal.Record] = [
    Chunk("c2a", b'{"jsonrpc":"2.0"}\n', 1.5, 0.25),
    Chunk("a2c", b"\xff\xfe not utf-8", 2.0, 0.5),
    Chunk("err", b"", 3.0, 0.75),
    Eof("a2c", 4.0, 1.0),
    Gap("c2a", 7, False, 5.0, 1.25),
    Gap("err", 0, True, 5.5, 1.3),
    Spawned(4242, 6.0, 1.5),
    Spawned(None, 6.0, 1.5),
    Transport(b'{"kind":"http"}', 7.0, 1.75),
    Close({"status": "ended", "exit_code": 0}, 8.0, 2.0),
    Mark(3, 1 << 33, 9.0, 0.0),
    Head({"argv": ["agent"], "recorder_pid": 7}, 10.0, 2.5),
    State(12, [True, False, True], [10, 20, 30], 11.0, 2.75),
    State(0, [False, False, False], None, 11.0, 2.75),
]


def _parse(data: bytes) -> list[journal.Record]:
    return list(journal.read_typed(io.BytesIO(data)))


@pytest.mark.parametrize("rec", RECORDS, ids=lambda r: type(r).__name__)
def test_round_trip(rec: journal.Record) -> None:
    assert _parse(b"".join(journal.encode(rec))) == [rec]


def test_codes_are_the_wire_format() -> None:
    """The typed records keep the byte format pipes and journals already on disk use."""
    cases: list[tuple[journal.Record, int]] = [
        (Chunk("c2a", b"x", 0, 0), 0),
        (Chunk("a2c", b"x", 0, 0), 1),
        (Chunk("err", b"x", 0, 0), 2),
        (Eof("a2c", 0, 0), journal.EOF_BASE + 1),
        (Gap("err", 1, True, 0, 0), journal.GAP),
        (Spawned(1, 0, 0), journal.SPAWNED),
        (Transport(b"{}", 0, 0), journal.TRANSPORT),
        (Close({}, 0, 0), journal.CLOSE),
        (Mark(0, 0, 0, 0), journal.MARK),
        (Head({}, 0, 0), journal.JOURNAL_HEAD),
        (State(0, [False] * 3, None, 0, 0), journal.STATE),
    ]
    for rec, code in cases:
        head = journal.encode(rec)[0]
        assert journal.HEADER.unpack(head)[0] == code, rec


def test_unknown_codes_and_torn_tail_are_skipped() -> None:
    data = b"".join(journal.record(99, b"future", 0.0, 0.0)) + b"".join(journal.encode(RECORDS[0]))
    whole = b"".join(journal.encode(RECORDS[1]))
    assert _parse(data + whole[:-1]) == [RECORDS[0]]  # a relay killed mid-write leaves a torn last record
    assert journal.decode(99, b"", 0.0, 0.0) is None
    assert journal.decode(5, b"", 0.0, 0.0) is None  # between the stream codes and the EOFs


def test_read_stops_at_end_offset() -> None:
    first = b"".join(journal.encode(RECORDS[0]))
    f = io.BytesIO(first + b"".join(journal.encode(RECORDS[1])))
    assert list(journal.read_typed(f, len(first))) == [RECORDS[0]]
    assert f.tell() == len(first)


def test_encode_refuses_other_values() -> None:
    with pytest.raises(TypeError):
        journal.encode(("c2a", b"x", 0.0, 0.0))  # type: ignore[arg-type]


class _Sink:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def put(self, stream: str, chunk: bytes, ts: float | None = None, mono: float | None = None) -> None:
        self.calls.append(("put", stream, chunk, ts, mono))

    def gap(self, stream: str, lines: int, ends_line: bool, ts: float, mono: float) -> None:
        self.calls.append(("gap", stream, lines, ends_line, ts, mono))

    def resync(self, seq: int, mid: list[bool], sizes: list[int] | None = None) -> None:
        self.calls.append(("resync", seq, mid, sizes))

    def record_spawn(self, agent_pid: int | None) -> None:
        self.calls.append(("spawn", agent_pid))


def test_deliver_hands_wire_records_to_the_recorder() -> None:
    sink = _Sink()
    taken = [journal.deliver(sink, r) for r in RECORDS]
    assert taken == [True] * 9 + [False, False, False] + [True, True]  # Close, Mark, Head: the reader acts
    assert sink.calls == [
        ("put", "c2a", b'{"jsonrpc":"2.0"}\n', 1.5, 0.25),
        ("put", "a2c", b"\xff\xfe not utf-8", 2.0, 0.5),
        ("put", "err", b"", 3.0, 0.75),
        ("put", "a2c", b"", 4.0, 1.0),
        ("gap", "c2a", 7, False, 5.0, 1.25),
        ("gap", "err", 0, True, 5.5, 1.3),
        ("spawn", 4242),
        ("spawn", None),
        ("put", "net", b'{"kind":"http"}', 7.0, 1.75),
        ("resync", 12, [True, False, True], [10, 20, 30]),
        ("resync", 0, [False, False, False], None),
    ]
