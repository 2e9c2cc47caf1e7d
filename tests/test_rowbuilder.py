"""The recorder's row builder, sans-I/O: queued items in, Batches of row parameters out (no thread, no
database). tests/test_recorder_rows.py checks that the rows it builds store as the reference does."""

from __future__ import annotations

from typing import Any

import orjson

from acp_relay.protocol.jsonrpc import A2C, C2A, ERR, NET
from acp_relay.protocol.redact import Policy
from acp_relay.record import rowbuilder
from acp_relay.record.rowbuilder import Gap, Resync, RowBuilder
from acp_relay.store.writer import QUICK_WIDTH, Batch

CID = 7


def _line(msg: dict[str, Any]) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", **msg}) + b"\n"


def _update(i: int) -> bytes:
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"t{i}"}}
    return _line({"method": "session/update", "params": {"sessionId": "s1", "update": update}})


def _build(b: RowBuilder, items: list[tuple[str, Any]]) -> list[tuple[Batch, int | None]]:
    return list(b.build([(s, c, 100.0 + i, float(i)) for i, (s, c) in enumerate(items)], CID))


def _seqs(batch: Batch) -> list[int]:
    """The seq of every frame of a batch, runs expanded."""
    out: list[int] = []
    for r in batch.rows:
        out += range(r[0], r[0] + len(r[4])) if len(r) == QUICK_WIDTH else [r[1]]
    return out


def test_a_chunk_of_notifications_is_one_run_and_requests_are_full_rows() -> None:
    b = RowBuilder(Policy())
    request = _line({"id": 0, "method": "session/prompt", "params": {"sessionId": "s1", "prompt": []}})
    chunk = b"".join(_update(i) for i in range(5))
    ((batch, done),) = _build(b, [(C2A, request), (A2C, chunk)])
    assert done is None  # the last batch covers every item
    full, run = batch.rows
    assert full[:3] == (CID, 1, C2A) and full[9] == "session/prompt" and full[6] == request[:-1]
    assert len(run) == QUICK_WIDTH and run[0] == 2 and run[4] == [_update(i)[:-1] for i in range(5)]
    assert batch.frames == 6 and _seqs(batch) == [1, 2, 3, 4, 5, 6]
    assert batch.connection[:4] == (6, len(request), len(chunk), 0)  # frames, bytes c2a, a2c, stderr


def test_a_line_split_over_chunks_and_a_last_line_without_newline() -> None:
    b = RowBuilder(Policy(enabled=False))
    whole = _line({"id": 1, "result": {}})
    batches = _build(b, [(A2C, whole[:5]), (A2C, whole[5:] + b'{"cut'), (A2C, b"")])
    rows = [r for batch, _ in batches for r in batch.rows]
    assert [(r[1], r[6]) for r in rows] == [(1, whole[:-1]), (2, b'{"cut')]
    assert orjson.loads(rows[1][13]) == {"unterminated": 1}


def test_stderr_lines_are_redacted_kept_in_the_tail_and_end_unterminated() -> None:
    b = RowBuilder(Policy())
    data = b"start\nexport OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwxyz0123\nla"
    ((batch, _),) = _build(b, [(ERR, data), (ERR, b"")])
    assert [(r[3], r[4]) for r in batch.stderr] == [
        (b"start", 0),
        (b"export OPENAI_API_KEY=[redacted]", 0),
        (b"la", 1),
    ]
    assert b.stderr_text() == "start\nexport OPENAI_API_KEY=[redacted]\nla"
    assert batch.rows == [] and b.bytes[ERR] == len(data)


def test_a_frame_with_a_secret_is_stored_redacted_with_its_wire_length() -> None:
    b = RowBuilder(Policy())
    server = {"name": "x", "command": "c", "args": [], "env": [{"name": "TOKEN", "value": "s3cret"}]}
    frame = _line({"id": 0, "method": "session/new", "params": {"cwd": "/", "mcpServers": [server]}})
    ((batch, _),) = _build(b, [(C2A, frame)])
    (row,) = batch.rows
    assert b"s3cret" not in row[6] and b"[redacted]" in row[6]
    assert orjson.loads(row[13]) == {"redacted": 1, "wire_length": len(frame) - 1}


def test_a_gap_skips_the_rest_of_its_line_and_seq_counts_what_was_dropped() -> None:
    b = RowBuilder(Policy(enabled=False))
    batches = _build(b, [(A2C, _update(0)), (A2C, Gap(3, False)), (A2C, b'tail of a lost line"}\n' + _update(9))])
    (batch, _) = batches[-1]
    # seq 1 stored, 2-4 dropped (three lines ended), 5 the line cut by the gap, 6 the next one
    assert _seqs(batch) == [1, 6] and b.tracker.seq == 6


def test_a_resync_starts_the_wire_where_a_journal_segment_says() -> None:
    b = RowBuilder(Policy(enabled=False))
    batches = _build(b, [(C2A, Resync(40, [False, True, False], [10, 20, 30])), (A2C, b'rest"}\n' + _update(1))])
    (batch, _) = batches[-1]
    assert _seqs(batch) == [42]  # 41 was the line a2c was inside of
    assert b.bytes == {C2A: 10, A2C: 20 + len(b'rest"}\n' + _update(1)), ERR: 30}


def test_a_recovery_skips_frames_already_stored() -> None:
    b = RowBuilder(Policy(enabled=False))
    b.skip_through = 2
    ((batch, _),) = _build(b, [(A2C, b"".join(_update(i) for i in range(4)))])
    assert _seqs(batch) == [3, 4]


def test_transport_events_are_their_own_rows() -> None:
    b = RowBuilder(Policy(enabled=False))
    ((batch, _),) = _build(b, [(NET, b'{"event":"ws_close","status":1000,"reason":"bye"}'), (NET, b"")])
    ((cid, _, _, event, _, _, status, *_, details),) = batch.transport
    assert (cid, event, status, orjson.loads(details)) == (CID, "ws_close", 1000, {"reason": "bye"})
    assert batch.rows == []


def test_a_flood_is_cut_into_sub_batches_that_say_how_many_items_they_cover() -> None:
    b = RowBuilder(Policy(enabled=False))
    chunk = b"".join(_update(i) for i in range(3000))  # about 400 KiB
    n = rowbuilder.SUB_BATCH_BYTES // len(chunk) + 1  # chunks to fill a sub-batch
    batches = _build(b, [(A2C, chunk)] * (n + 1))
    assert [done for _, done in batches] == [n, None]
    assert sum(batch.frames for batch, _ in batches) == 3000 * (n + 1)
    assert [batch.connection[1:3] for batch, _ in batches] == [(0, len(chunk) * n), (0, len(chunk) * (n + 1))]


def test_nothing_new_builds_no_batch_and_the_position_holds_the_partial_line() -> None:
    b = RowBuilder(Policy(enabled=False))
    assert _build(b, []) == []
    _build(b, [(A2C, b'{"half'), (C2A, Gap(0, False))])
    at = b.position()
    assert at.held[1][0] == (b'{"half',) and at.mid == [True, False, False] and at.bytes == [0, 0, 0]


def test_what_a_close_that_gives_up_writes_to_its_journal() -> None:
    """retained.records: the held partial line, then the items not stored, then a Close; and the frames
    they complete counted as the wire counts them."""
    from acp_relay.record import journal, retained

    b = RowBuilder(Policy(enabled=False))
    _build(b, [(A2C, _update(0) + b'{"half')])
    at = b.position()
    items = [
        (A2C, b'"}\n', 5.0, 0.5),
        (NET, b'{"event":"x"}', 6.0, 0.6),
        (C2A, Gap(2, True), 7.0, 0.7),
        (A2C, b"", 8.0, 0.8),
    ]
    recs = retained.records(at, items, {"status": "ended"}, 9.0, 0.9)
    assert recs == [
        journal.Chunk(A2C, b'{"half', 9.0, 0.9),
        journal.Chunk(A2C, b'"}\n', 5.0, 0.5),
        journal.Transport(b'{"event":"x"}', 6.0, 0.6),
        journal.Gap(C2A, 2, True, 7.0, 0.7),
        journal.Eof(A2C, 8.0, 0.8),
        journal.Close({"status": "ended"}, 9.0, 0.9),
    ]
    assert at.seq == 1 and retained.frames_waiting(at, recs) == 3  # the half line, and two dropped lines


def test_retention_keeps_items_until_a_written_mark_covers_them() -> None:
    from acp_relay.record.retained import Mark, Retention

    keep = Retention()
    b = RowBuilder(Policy(enabled=False))
    items = [(A2C, _update(i), 0.0, 0.0) for i in range(3)]
    for item in items:
        keep.keep(item)
    keep.mark(Mark(1, 2, b.position()), written=0)  # two items taken, in batch 1, not written yet
    assert keep.unstored(0)[1] == items
    keep.forget(1)
    assert keep.unstored(1)[1] == items[2:]
