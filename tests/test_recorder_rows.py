"""The recorder's rows, as it writes them (fast path, multi-row statements, a redacted notification, a big
frame), against the reference: Tracker.feed and frame_rows, inserted one row at a time."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson

from acp_relay.protocol.redact import Policy
from acp_relay.protocol.tracker import A2C, C2A, Tracker
from acp_relay.record.recorder import Recorder
from acp_relay.store import db
from acp_relay.store.writer import INSERT_FRAME, Batch, backfill_sessions, frame_rows

COLUMNS = (
    "connection_id, seq, direction, ts, mono, length, raw, parse, kind, method, rpc_id, session_id, update_kind, "
    "details, unterminated, redacted, message_id, tool_call_id, request_seq, latency_ms"
)


class _SyncRecorder(Recorder):
    """The indexing and writing of the recorder, without its threads."""

    def _submit(self, batch: Batch) -> None:
        self._insert(batch)


def _line(msg: Any) -> bytes:
    return orjson.dumps(msg) + b"\n"


def _script() -> list[tuple[str, bytes]]:
    def upd(sid: str, i: int, **extra: Any) -> bytes:
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"t{i}"}, **extra}
        return _line({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": update}})

    out = [(C2A, _line({"jsonrpc": "2.0", "id": 0, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}}))]
    out.append((A2C, _line({"jsonrpc": "2.0", "id": 0, "result": {"sessionId": "s1"}})))
    body = b"".join(upd("s1", i, **({"messageId": f"m{i}"} if i % 3 else {})) for i in range(75))
    out.append((A2C, body[:1000]))  # chunks that cut lines anywhere
    out.append((A2C, body[1000:]))
    out.append((C2A, _line({"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {"sessionId": "s1"}})))
    secret = {"sessionUpdate": "agent_message_chunk", "_meta": {"apiKey": "sk-1"}}
    out.append(
        (A2C, _line({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": secret}}))
    )
    out.append((A2C, b"".join(upd("s1", i) for i in range(100, 140))))
    # Chunks of small frames are scanned for the watched keys once: a key cut by the chunk boundary, and one
    # in the middle of a chunk, still get their frames redacted.
    cut = _line({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": secret}})
    at = cut.index(b"_meta") + 3
    out.append((A2C, b"".join(upd("s1", i) for i in range(140, 150)) + cut[:at]))
    out.append((A2C, cut[at:] + b"".join(upd("s1", i) for i in range(150, 190))))
    headers = {"sessionUpdate": "agent_message_chunk", "headers": {"Authorization": "Bearer sk-3"}}
    mid = _line({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": headers}})
    out.append(
        (A2C, b"".join(upd("s1", i) for i in range(190, 210)) + mid + b"".join(upd("s1", i) for i in range(210, 230)))
    )
    long = {"sessionUpdate": "agent_message_chunk", "content": {"text": "y" * 9000, "_meta": {"token": "sk-2"}}}
    out.append(
        (A2C, _line({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": long}}))
    )
    big = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x" * (1 << 20)}}
    out.append(
        (A2C, _line({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": big}}))
    )
    out.append((A2C, upd("s1", 200) + _line({"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}})))
    out.append((A2C, b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1"}}'))
    out += [(A2C, b""), (C2A, b"")]
    return out


_SCRIPT = _script()


def _runs_script() -> list[tuple[str, bytes]]:
    """Runs of every length the writer cuts (RUN_ROWS, each power of two below it, odd remainders), broken
    by a messageId, a session or an update kind that changes, by a frame of the other direction or another
    chunk, and by a request in the middle."""

    def upd(sid: str, i: int, kind: str = "agent_message_chunk", **extra: Any) -> bytes:
        update = {"sessionUpdate": kind, "content": {"type": "text", "text": f"r{i}\u00e9\n"}, **extra}
        return _line({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": update}})

    out = []
    for sid in ("s1", "s2"):
        new = {"jsonrpc": "2.0", "id": sid, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}}
        out += [(C2A, _line(new)), (A2C, _line({"jsonrpc": "2.0", "id": sid, "result": {"sessionId": sid}}))]
    for n in (1, 2, 3, 127, 128, 129, 300, 255):
        out.append((A2C, b"".join(upd("s1", i) for i in range(n))))
    mixed = [upd("s1", i, messageId=f"m{i // 7}") for i in range(60)]
    mixed += [upd("s2", i) for i in range(10)] + [upd("s1", i, "agent_thought_chunk") for i in range(10)]
    mixed += [_line({"jsonrpc": "2.0", "id": 9, "method": "fs/read_text_file", "params": {"sessionId": "s1"}})]
    mixed += [upd("s1", i) for i in range(140)]
    out.append((A2C, b"".join(mixed)))
    out.append((C2A, b"".join(upd("s1", i) for i in range(40))))  # the other direction, in between
    out.append((A2C, b"".join(upd("s1", i) for i in range(40))))
    out += [(A2C, b""), (C2A, b"")]
    return out


def test_recorded_rows_equal_the_reference_rows(tmp_path: Path) -> None:
    _compare(tmp_path, _SCRIPT)


def test_runs_of_notifications_are_stored_as_the_reference_rows(tmp_path: Path) -> None:
    rec = _compare(tmp_path, _runs_script())
    assert rec.conn is not None
    typed = rec.conn.execute(
        "SELECT DISTINCT typeof(seq), typeof(ts), typeof(mono), typeof(length), typeof(raw), typeof(details) "
        "FROM frames WHERE kind = 'notification'"
    ).fetchall()
    assert set(typed) == {
        ("integer", "real", "real", "integer", "blob", "null"),
        ("integer",) + ("real",) * 2 + ("integer", "blob", "text"),
    }
    frames, n = rec.conn.execute("SELECT frames, (SELECT count(*) FROM frames) FROM connections").fetchone()
    assert frames == n > 1000  # the connection row counts frames, not runs


def _compare(tmp_path: Path, script: list[tuple[str, bytes]]) -> Recorder:
    policy = Policy()
    rec = _SyncRecorder(tmp_path / "rec.db", argv=["a"], cwd="/", label=None, policy=policy)
    rec._open()
    assert rec.conn is not None
    for i, (d, chunk) in enumerate(script):
        rec._process([(d, chunk, 1000.0 + i, i / 100)])
    got = rec.conn.execute(f"SELECT {COLUMNS} FROM frames ORDER BY id").fetchall()

    tracker, frames = Tracker(policy), []  # each frame redacted, then indexed from its copy
    for i, (d, chunk) in enumerate(script):
        ts, mono = 1000.0 + i, i / 100
        frames += tracker.feed(d, chunk, ts, mono) if chunk else tracker.eof(d, ts, mono)
    ref = sqlite3.connect(":memory:", isolation_level=None)
    db.migrate(ref)
    ref.execute("INSERT INTO connections (id, started_at, argv) VALUES (?, 0, '[]')", (rec.connection_id,))
    ref.executemany(INSERT_FRAME, frame_rows(rec.connection_id or 0, frames)[0])
    backfill_sessions(ref, [(sid, rec.connection_id, seq) for seq, sid in tracker.backfill])
    want = ref.execute(f"SELECT {COLUMNS} FROM frames ORDER BY id").fetchall()

    assert len(got) == len(want) == len(frames) > 100
    assert got == want
    types = f"SELECT {', '.join(f'typeof({c})' for c in COLUMNS.split(', '))} FROM frames ORDER BY id"
    assert rec.conn.execute(types).fetchall() == ref.execute(types).fetchall()
    assert [r[1] for r in got] == list(range(1, len(got) + 1))  # ids follow seq
    if script is _SCRIPT:
        assert sum(r[15] for r in got) == 4 and b"sk-1" not in b"".join(r[6] for r in got)
        assert b"sk-2" not in b"".join(r[6] for r in got) and b"sk-3" not in b"".join(r[6] for r in got)
    return rec
