"""Generate a realistic acp-relay database of N frames (default 1,000,000) for speed measurements.

Every frame goes through the real Tracker (framing, classification, correlation) and is written with the
recorder's own INSERT statements into a database created by the real migrations, so the rows, index
columns and sessions are what `acp-relay run` would have written. Deterministic for a given --seed.

    python tools/gen_db.py /tmp/big.db                 # 1M frames, ~20 s
    python tools/gen_db.py /tmp/small.db --frames 20000

Connections are written by acp_relay.store.scripted.ConnectionWriter, as tests/fixtures does.
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from acp_relay.protocol.tracker import A2C, C2A, Frame, Tracker  # noqa: E402
from acp_relay.store import db  # noqa: E402
from acp_relay.store.writer import (  # noqa: E402
    INSERT_BATCH_MESSAGE,
    INSERT_FRAME,
    finish_connection,
    frame_rows,
    json_or_null,
    open_connection,
    upsert_sessions,
)

BASE_TS = 1_767_225_600.0  # 2026-01-01T00:00:00Z: generated data never depends on the current time


# -- realistic traffic ------------------------------------------------------------------------------------
WORDS = [
    "the",
    "agent",
    "reads",
    "the",
    "file",
    "and",
    "then",
    "edits",
    "a",
    "function",
    "so",
    "that",
    "tests",
    "pass",
    "while",
    "keeping",
    "the",
    "public",
    "interface",
    "stable;",
    "it",
    "explains",
    "each",
    "change",
    "and",
    "runs",
    "the",
    "suite",
    "again",
]
AGENTS = (
    ("claude-code-acp", ["npx", "@zed-industries/claude-code-acp"]),
    ("gemini", ["gemini", "--experimental-acp"]),
    ("codex-acp", ["codex-acp"]),
    ("goose", ["goose", "acp"]),
    ("my-agent", ["python", "agent.py"]),
)
CLIENTS = ("zed", "neovim-acp", "jetbrains", "emacs-agent-shell")


def _msg(**kw: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", **kw})


def _update(sid: str, update: dict[str, Any]) -> bytes:
    return _msg(method="session/update", params={"sessionId": sid, "update": update})


class Conversation:
    """Yields (direction, line, dt) for one realistic v1 connection: sessions, turns, tools, oddities."""

    def __init__(self, rng: random.Random, number: int, frames_budget: int) -> None:
        self.rng = rng
        self.n = number
        self.budget = frames_budget
        self.cid = 0  # client request ids
        self.aid = 0  # agent request ids

    def text(self, lo: int, hi: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(lo, hi)))

    def lines(self) -> Iterator[tuple[str, bytes, float]]:
        rng, n = self.rng, self.n
        agent_name, _ = AGENTS[n % len(AGENTS)]
        yield (
            C2A,
            _msg(
                id=self._cid(),
                method="initialize",
                params={
                    "protocolVersion": 1,
                    "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True},
                    "clientInfo": {"name": CLIENTS[n % len(CLIENTS)], "version": "1.0.0"},
                },
            ),
            0.0,
        )
        yield (
            A2C,
            _msg(
                id=self.cid - 1,
                result={
                    "protocolVersion": 1,
                    "agentCapabilities": {"loadSession": True},
                    "agentInfo": {"name": agent_name, "version": "0.9.1"},
                    "authMethods": [],
                },
            ),
            rng.uniform(0.05, 0.8),
        )
        if rng.random() < 0.03:
            return  # initialized, never created a session
        emitted = 2
        sessions = 1 if rng.random() < 0.8 else rng.randint(2, 3)
        for s in range(sessions):
            sid = f"{n:06d}-{s}-{rng.getrandbits(64):016x}"
            rid = self._cid()
            yield (
                C2A,
                _msg(id=rid, method="session/new", params={"cwd": f"/home/dev/project{n % 50}", "mcpServers": []}),
                rng.uniform(0.1, 2),
            )
            yield A2C, _msg(id=rid, result={"sessionId": sid}), rng.uniform(0.01, 0.2)
            emitted += 2
            turns = rng.randint(1, 8)
            for t in range(turns):
                for item in self.turn(sid, t):
                    emitted += 1
                    yield item
                if emitted >= self.budget:
                    return

    def _cid(self) -> int:
        self.cid += 1
        return self.cid - 1

    def turn(self, sid: str, t: int) -> Iterator[tuple[str, bytes, float]]:
        rng = self.rng
        pid = self._cid()
        yield (
            C2A,
            _msg(
                id=pid,
                method="session/prompt",
                params={"sessionId": sid, "prompt": [{"type": "text", "text": self.text(3, 30)}]},
            ),
            rng.uniform(2, 60),
        )
        mid = f"msg-{t}-{rng.getrandbits(32):08x}"
        for _ in range(rng.randint(1, 6)):  # thinking
            yield (
                A2C,
                _update(
                    sid,
                    {
                        "sessionUpdate": "agent_thought_chunk",
                        "messageId": mid + "t",
                        "content": {"type": "text", "text": self.text(1, 8)},
                    },
                ),
                rng.uniform(0.02, 0.3),
            )
        if rng.random() < 0.3:
            yield (
                A2C,
                _update(
                    sid,
                    {
                        "sessionUpdate": "plan",
                        "entries": [
                            {"content": self.text(2, 6), "priority": "medium", "status": "pending"}
                            for _ in range(rng.randint(1, 5))
                        ],
                    },
                ),
                0.01,
            )
        for k in range(rng.randint(0, 4)):  # tool calls
            call = f"call-{t}-{k}"
            yield (
                A2C,
                _update(
                    sid,
                    {
                        "sessionUpdate": "tool_call",
                        "toolCallId": call,
                        "title": "Read " + self.text(1, 2),
                        "kind": "read",
                        "status": "pending",
                    },
                ),
                rng.uniform(0.01, 0.1),
            )
            if rng.random() < 0.4:
                aid = self._aid()
                yield (
                    A2C,
                    _msg(
                        id=aid,
                        method="session/request_permission",
                        params={
                            "sessionId": sid,
                            "toolCall": {"toolCallId": call},
                            "options": [
                                {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                                {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
                            ],
                        },
                    ),
                    0.01,
                )
                yield (
                    C2A,
                    _msg(id=aid, result={"outcome": {"outcome": "selected", "optionId": "allow"}}),
                    rng.uniform(0.5, 8),
                )
            aid = self._aid()
            yield (
                A2C,
                _msg(id=aid, method="fs/read_text_file", params={"sessionId": sid, "path": f"/src/f{k}.py"}),
                0.01,
            )
            size = rng.choice((200, 800, 3000, 12000)) if rng.random() < 0.9 else 60000
            content = (self.text(10, 10) + "\n") * (size // 80)
            if rng.random() < 0.03:
                yield C2A, _msg(id=aid, error={"code": -32002, "message": "Resource not found"}), 0.003
                status = "failed"
            else:
                yield C2A, _msg(id=aid, result={"content": content}), rng.uniform(0.001, 0.02)
                status = "completed"
            yield (
                A2C,
                _update(
                    sid,
                    {
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": call,
                        "status": status,
                        "content": [{"type": "content", "content": {"type": "text", "text": content[:400]}}],
                    },
                ),
                0.02,
            )
        for _ in range(rng.randint(5, 120)):  # the answer, streamed
            yield (
                A2C,
                _update(
                    sid,
                    {
                        "sessionUpdate": "agent_message_chunk",
                        "messageId": mid,
                        "content": {"type": "text", "text": " " + self.text(1, 6)},
                    },
                ),
                rng.uniform(0.005, 0.08),
            )
        if rng.random() < 0.05:
            yield A2C, b"[agent] warning: tokenizer cache miss", 0.001  # a log line on stdout: invalid frame
        if rng.random() < 0.2:
            yield (
                A2C,
                _update(sid, {"sessionUpdate": "usage_update", "used": rng.randint(1000, 90000), "size": 200000}),
                0.001,
            )
        stop = "end_turn" if rng.random() < 0.9 else "cancelled"
        if stop == "cancelled":
            yield C2A, _msg(method="session/cancel", params={"sessionId": sid}), 0.1
        if rng.random() < 0.02:
            yield A2C, _msg(id=pid, error={"code": -32603, "message": "Internal error: model overloaded"}), 0.01
        elif rng.random() < 0.01:
            return  # never answered
        else:
            yield A2C, _msg(id=pid, result={"stopReason": stop}), 0.01

    def _aid(self) -> int:
        self.aid += 1
        return self.aid - 1


def flood(sid: str, frames: int) -> Iterator[tuple[str, bytes, float]]:
    """One very long session: a chatty agent streaming small chunks for a long turn."""
    yield C2A, _msg(id=0, method="initialize", params={"protocolVersion": 1, "clientInfo": {"name": "zed"}}), 0.0
    yield A2C, _msg(id=0, result={"protocolVersion": 1, "agentInfo": {"name": "flood-agent"}}), 0.1
    yield C2A, _msg(id=1, method="session/new", params={"cwd": "/tmp", "mcpServers": []}), 0.1
    yield A2C, _msg(id=1, result={"sessionId": sid}), 0.01
    yield (
        C2A,
        _msg(id=2, method="session/prompt", params={"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}),
        1.0,
    )
    for i in range(frames - 6):
        yield (
            A2C,
            _update(
                sid,
                {
                    "sessionUpdate": "agent_message_chunk",
                    "messageId": "m1",
                    "content": {"type": "text", "text": f"token {i} "},
                },
            ),
            0.001,
        )
    yield A2C, _msg(id=2, result={"stopReason": "end_turn"}), 0.01


def long_session(seed: int, frames: int) -> Iterator[tuple[str, bytes, float]]:
    """One session of about `frames` frames: turn after turn of the ordinary mix (for `acp-relay view`)."""
    c = Conversation(random.Random(seed), 1, frames)
    lines = c.lines()
    head = [next(lines) for _ in range(2)]  # the initialize exchange
    yield from head
    sid = f"long-{seed}-{frames}"
    rid = c._cid()
    yield C2A, _msg(id=rid, method="session/new", params={"cwd": "/home/dev/project", "mcpServers": []}), 0.5
    yield A2C, _msg(id=rid, result={"sessionId": sid}), 0.05
    emitted, turn = 4, 0
    while emitted < frames:
        for item in c.turn(sid, turn):
            emitted += 1
            yield item
        turn += 1


def generate_sessions(path: Path, frames: int, seed: int = 1) -> dict[str, int]:
    """Two connections of one long session each: the ordinary mix, and a flood of message chunks."""
    if path.exists():
        raise SystemExit(f"{path} exists; remove it first")
    conn = db.connect(path)
    conn.execute("BEGIN")
    total = write_copy(conn, record_template(long_session(seed, frames), ["long-agent"]), BASE_TS, "0001", 0)
    total += write_copy(conn, flood_template(f"flood-{seed}-0000", frames), BASE_TS + 86400, "0002", 0)
    conn.execute("COMMIT")
    conn.close()
    return {"frames": total, "connections": 2, "sessions": 2}


@dataclass
class Template:
    """One connection as the tracker indexed it, ready to be written again under new ids and times."""

    rows: list[tuple[Any, ...]]
    batches: list[tuple[Any, ...]]
    sessions: list[tuple[Any, ...]]  # UPSERT_SESSION parameters without connection_id
    argv: list[str]
    info: tuple[Any, ...]  # protocol_version, client_info, agent_info
    unanswered: Any
    bytes: tuple[int, int]
    duration: float


def record_template(script: Iterator[tuple[str, bytes, float]], argv: list[str]) -> Template:
    """Run the real Tracker over a scripted connection (times relative to BASE_TS)."""
    tracker = Tracker()
    frames: list[Frame] = []
    sizes = {C2A: 0, A2C: 0}
    mono = 0.0
    for direction, raw, dt in script:
        mono += dt
        sizes[direction] += len(raw) + 1
        frames.append(tracker.index_line(direction, raw, BASE_TS + mono, mono))
    rows, batches = frame_rows(0, frames)
    fill = dict(getattr(tracker, "backfill", []))
    if fill:
        rows = [r[:11] + (fill[r[1]],) + r[12:] if r[11] is None and r[1] in fill else r for r in rows]
    sessions = [
        (s.session_id, s.origin, s.first_seen - BASE_TS, s.last_seen - BASE_TS, s.cwd, s.title, s.parent_session_id)
        for s in tracker.sessions.values()
    ]
    i = tracker.info
    return Template(
        rows,
        batches,
        sessions,
        argv,
        (i.protocol_version, json_or_null(i.client_info), json_or_null(i.agent_info)),
        json_or_null(tracker.unanswered() or None),
        (sizes[C2A], sizes[A2C]),
        mono,
    )


def flood_template(sid: str, frames: int) -> Template:
    """The flood session: a short one through the Tracker, its chunk run then stretched to `frames` frames.

    The stretched chunks are the tracked chunk row with new text, seq and times (what the Tracker gives for
    them is the same apart from those), and the prompt's answer gets its new seq and latency.
    """
    t = record_template(flood(sid, 100), ["flood-agent"])
    head, chunk, answer = t.rows[:5], t.rows[5], t.rows[-1]
    assert chunk[12] == "agent_message_chunk" and answer[8] == "response", "flood script changed"
    rows = list(head)
    mono = chunk[4]
    for i in range(frames - 6):
        raw = _update(
            sid,
            {
                "sessionUpdate": "agent_message_chunk",
                "messageId": "m1",
                "content": {"type": "text", "text": f"token {i} "},
            },
        )
        rows.append((*chunk[:3], BASE_TS + mono, mono, len(raw), raw, *chunk[7:]))
        mono += 0.001
    mono += 0.01 - 0.001
    details = orjson.loads(answer[13])
    details["latencyMs"] = round((mono - head[4][4]) * 1000.0, 3)
    rows.append(
        (answer[0], len(rows) + 1, answer[2], BASE_TS + mono, mono, *answer[5:13], orjson.dumps(details).decode())
    )
    rows = [(r[0], seq, *r[2:]) for seq, r in enumerate(rows, 1)]
    sessions = [(s[0], s[1], s[2], mono, *s[4:]) for s in t.sessions]
    size = sum(r[5] + 1 for r in rows if r[2] == A2C)
    return Template(rows, t.batches, sessions, t.argv, t.info, t.unanswered, (t.bytes[0], size), mono)


def write_copy(conn: sqlite3.Connection, t: Template, started_at: float, suffix: str, exit_code: int) -> int:
    """Write template `t` as a new connection; session ids get `suffix` (same length) in raw and columns."""
    cid = open_connection(conn, started_at=started_at, argv=t.argv, cwd="/home/dev", label=None, relay_pid=4242)
    renames = [(s[0].encode(), (s[0][: -len(suffix)] + suffix).encode()) for s in t.sessions]
    off = started_at - BASE_TS

    def rename(raw: bytes) -> bytes:
        for old, new in renames:
            if old in raw:
                raw = raw.replace(old, new)
        return raw

    def sid(value: str | None) -> str | None:
        return None if value is None else value[: -len(suffix)] + suffix

    # frame_rows layout: (cid, seq, direction, ts, mono, length, raw, parse, kind, method, rpc_id, session_id,
    # update_kind, details); batch members: (idx, kind, method, rpc_id, session_id, update_kind, details, cid, seq)
    rows = [
        (
            cid,
            r[1],
            r[2],
            r[3] + off,
            r[4],
            r[5],
            rename(r[6]) if r[11] is not None or r[8] == "batch" else r[6],
            *r[7:11],
            sid(r[11]),
            r[12],
            rename(r[13].encode()).decode() if r[13] and r[11] else r[13],
        )
        for r in t.rows
    ]
    conn.executemany(INSERT_FRAME, rows)
    if t.batches:
        conn.executemany(INSERT_BATCH_MESSAGE, [(*b[:4], sid(b[4]), *b[5:7], cid, b[8]) for b in t.batches])
    upsert_sessions(conn, [(sid(s[0]), cid, s[1], s[2] + started_at, s[3] + started_at, *s[4:]) for s in t.sessions])
    unanswered = t.unanswered
    if unanswered and renames:
        unanswered = rename(unanswered.encode()).decode()
    protocol_version, client_info, agent_info = t.info
    finish_connection(
        conn,
        cid,
        {
            "frames": len(rows),
            "bytes_c2a": t.bytes[0],
            "bytes_a2c": t.bytes[1],
            "protocol_version": protocol_version,
            "client_info": client_info,
            "agent_info": agent_info,
            "ended_at": started_at + t.duration + 0.1,
            "status": "ended",
            "exit_code": exit_code,
            "closed_by": "editor_eof" if exit_code == 0 else "agent_exit",
            "agent_pid": 4243,
            "unanswered": unanswered,
        },
    )
    return len(rows)


def generate(
    path: Path, frames: int, seed: int = 1, flood_frames: int = 100_000, templates: int = 150
) -> dict[str, int]:
    """Write `frames` frames: ordinary connections copied from `templates` tracked ones, plus one flood session."""
    if path.exists():
        raise SystemExit(f"{path} exists; remove it first")
    conn = db.connect(path)
    conn.execute("PRAGMA journal_mode = OFF")  # bulk load; the file is switched back to WAL at the end
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -262144")
    rng = random.Random(seed)
    pool = []
    for n in range(1, templates + 1):  # enough variety; each is copied ~15 times for 1M frames
        argv = AGENTS[n % len(AGENTS)][1]
        pool.append(record_template(Conversation(rng, n, rng.randint(50, 1500)).lines(), argv))
    flood_at = frames // 2 if flood_frames and frames > 2 * flood_frames else -1
    total = n = 0
    clock = 0.0
    conn.execute("BEGIN")
    while total < frames:
        n += 1
        clock += rng.uniform(30, 600)
        if flood_at >= 0 and total >= flood_at:
            t = flood_template(f"flood-{seed}-0000", flood_frames)
            flood_at = -1
        else:
            t = pool[rng.randrange(len(pool))]
        total += write_copy(conn, t, BASE_TS + clock, f"{n:04x}", 1 if n % 97 == 0 else 0)
        clock += t.duration
        if n % 100 == 0:
            conn.execute("COMMIT")
            conn.execute("BEGIN")
    conn.execute("COMMIT")
    sessions = conn.execute("SELECT count(*) FROM sessions").fetchone()[0]
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    return {"frames": total, "connections": n, "sessions": sessions}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--flood", type=int, default=100_000, help="frames of the one very long session (0: none)")
    parser.add_argument(
        "--sessions",
        action="store_true",
        help="instead: two sessions of --frames frames each, the ordinary mix and a chunk flood (for `view`)",
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if args.sessions:
        result = generate_sessions(args.path, args.frames, args.seed)
    else:
        result = generate(args.path, args.frames, args.seed, args.flood)
    size = os.path.getsize(args.path)
    print(
        f"{result['frames']} frames, {result['connections']} connections, {result['sessions']} sessions, "
        f"{size / 1e6:.0f} MB in {time.perf_counter() - start:.1f} s: {args.path}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
