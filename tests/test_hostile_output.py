"""Issue 19: no hostile byte reaches a terminal. A recording and a capture full of terminal escapes (ESC, CSI,
OSC 52 clipboard writes, OSC 8 links, 8-bit C1 controls, bidi overrides, newlines and carriage returns in
ids, labels and text, invalid UTF-8) are shown by every command; nothing they print, on stdout or stderr,
may hold a control character (but the newline between records), a C1 control or a bidi control."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from helpers import relay_cmd

HOSTILE = [
    "\x1b[31mred\x1b[0m",
    "\x1b]52;c;aGFja2Vk\x07",  # OSC 52: write the clipboard
    "\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\",  # OSC 8 hyperlink
    "\x9b2J",  # 8-bit CSI
    "\x85next\x8dline",
    "abc\u202edcba\u2066x\u2069",  # bidi override and isolate
    "line1\nline2\rline3\x00nul\x7fdel\x08bs",
]
EVIL = "".join(HOSTILE)
ARG_EVIL = EVIL.replace("\x00", "")  # a command line cannot hold NUL
SID = "s\x1b[2J\n\u202eid"
FORBIDDEN = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _lines() -> bytes:
    msgs = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": 1, "clientInfo": {"name": EVIL, "version": EVIL}},
        },
        {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentInfo": {"name": EVIL, "version": "1"}}},
        {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/p" + EVIL, "mcpServers": []}},
        {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": SID}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/prompt",
            "params": {"sessionId": SID, "prompt": [{"type": "text", "text": "find hostile " + EVIL}]},
        },
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": SID,
                "update": {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": "hostile " + EVIL},
                },
            },
        },
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": SID,
                "update": {"sessionUpdate": "tool_call", "toolCallId": "t" + EVIL, "title": EVIL, "status": "pending"},
            },
        },
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": SID, "update": {"sessionUpdate": "session_info_update", "title": "title " + EVIL}},
        },
        {"jsonrpc": "2.0", "id": 3, "method": EVIL, "params": {"x": EVIL}},
        {"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": EVIL, "data": EVIL}},
        {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": EVIL}},
    ]
    body = b"".join(orjson.dumps(m) + b"\n" for m in msgs)
    return body + b"not json \x1b[31m\x9b\xff\xfe " + EVIL.encode() + b"\n"


AGENT = r"""
import sys
sys.stderr.buffer.write(sys.argv[1].encode() + b"\n")
sys.stderr.flush()
for line in sys.stdin.buffer:
    sys.stdout.buffer.write(line)
    sys.stdout.buffer.flush()
"""


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("hostile")
    db = tmp / "relay.db"
    data = _lines()
    cmd = relay_cmd(db, sys.executable, "-c", AGENT, "stderr " + ARG_EVIL, label="label\n" + ARG_EVIL)
    out = subprocess.run(cmd, input=data, capture_output=True, timeout=60)
    assert out.stdout == data
    name = tmp / ("cap" + "\x1b[2J\u202e\n" + ".ndjson")
    recs = [
        {"seq": i + 1, "ts": 1.0 + i, "direction": "c2a", "raw": line.decode("utf-8", "replace")}
        for i, line in enumerate(data.splitlines()[:-1])
    ]
    name.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    return db, name


def _bad(text: bytes) -> list[str]:
    """Forbidden characters in what a command printed (invalid UTF-8 counts as one)."""
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [f"invalid UTF-8 at {exc.start}: {text[max(0, exc.start - 20) : exc.start + 20]!r}"]
    return [
        f"{m.group()!r} at {m.start()}: {decoded[max(0, m.start() - 30) : m.start() + 10]!r}"
        for m in FORBIDDEN.finditer(decoded)
    ]


COMMANDS = [
    ["show"],
    ["show", "--all"],
    ["show", "last"],
    ["show", "last", "--transcript"],
    ["show", "last", "--json"],
    ["show", "last", "--errors"],
    ["show", "-c", "1"],
    ["show", "-c", "1", "--json"],
    ["show", "--frame", "{frame}"],
    ["show", "--frame", "{frame}", "--json"],
    ["show", "last", "-g", "hostile"],
    ["show", "nope\x1b[31m"],
    ["stats", "last"],
    ["stats"],
    ["check", "last"],
    ["check", "-c", "1"],
    ["info", "last"],
    ["search", "hostile"],
    ["search", "hostile", "--json"],
    ["search", "\x1b[31mzzz"],
    ["export", "last", "--format", "ndjson"],
    ["export", "last", "--format", "acp-devtools"],
    ["diff", "last", "last"],
    ["view", "last", "--no-open"],
    ["import", "{capture}"],
    ["import", "{capture}"],  # the second time: already imported (its name in the message)
    ["import", "{missing}"],
    ["delete", "{session}"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(x.encode("unicode_escape").decode() for x in a))
def test_no_command_prints_a_hostile_byte(hostile: tuple[Path, Path], args: list[str], tmp_path: Path) -> None:
    db, capture = hostile
    import sqlite3

    conn = sqlite3.connect(db)
    frame = conn.execute("SELECT id FROM frames WHERE kind = 'error' LIMIT 1").fetchone()[0]
    conn.close()
    if args[0] == "delete":  # on a copy, so the other cases keep the session
        copy = tmp_path / "copy.db"
        shutil.copy(db, copy)
        db = copy
    subs = {
        "{frame}": str(frame),
        "{capture}": str(capture),
        "{missing}": str(capture) + "\x1b[31m.x",
        "{session}": SID,
    }
    argv = [subs.get(a, a) for a in args]
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "acp_relay", *argv, "--db", str(db)], capture_output=True, timeout=120, env=env
    )
    assert b"Traceback" not in out.stderr, out.stderr.decode("utf-8", "replace")
    assert _bad(out.stdout) == [], "stdout"
    assert _bad(out.stderr) == [], "stderr"


def _strings(value: object) -> list[str]:
    if isinstance(value, str):  # a frame's raw text (an export's) holds JSON of its own
        try:
            return [value, *_strings(orjson.loads(value))] if value.startswith("{") else [value]
        except orjson.JSONDecodeError:
            return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@pytest.mark.parametrize(
    "args", [["show", "last", "--json"], ["search", "hostile", "--json"], ["export", "last", "--format", "ndjson"]]
)
def test_the_json_outputs_stay_json_with_the_same_text(hostile: tuple[Path, Path], args: list[str]) -> None:
    db, _ = hostile
    out = subprocess.run([sys.executable, "-m", "acp_relay", *args, "--db", str(db)], capture_output=True, timeout=60)
    records = [orjson.loads(line) for line in out.stdout.splitlines()]
    texts = [s for r in records for s in _strings(r)]
    assert any(EVIL in t for t in texts)  # the same characters, only written as escapes


def test_replay_logs_no_hostile_byte(hostile: tuple[Path, Path]) -> None:
    """replay's stdout is protocol frames (the recorded bytes, on purpose); what it logs on stderr is for people."""
    db, _ = hostile
    editor = b"".join(line + b"\n" for line in _lines().splitlines() if b'"method"' in line and b'"result"' not in line)
    out = subprocess.run(
        [sys.executable, "-m", "acp_relay", "replay", "last", "--speed", "fast", "--db", str(db)],
        input=editor,
        capture_output=True,
        timeout=60,
    )
    assert b"Traceback" not in out.stderr and out.stderr
    assert _bad(out.stderr) == []


def test_a_label_with_a_newline_cannot_split_a_row(hostile: tuple[Path, Path]) -> None:
    db, _ = hostile
    out = subprocess.run([sys.executable, "-m", "acp_relay", "show", "--db", str(db)], capture_output=True, timeout=60)
    header, *body = out.stdout.decode().splitlines()
    assert header.startswith("STARTED") and body and all(re.match(r"\d{4}-\d\d-\d\d ", line) for line in body)
    assert any("[label\\n" in line for line in body)


def test_a_huge_hostile_line_costs_a_screenful(tmp_path: Path) -> None:
    """Views cut before they escape: a hostile multi-MiB frame prints a bounded preview, a transcript block
    cut at TEXT_MAX with a note, a page that embeds at most VIEW_FRAME_MAX of it and says how to get the
    rest; `show --frame N --raw` still gives every byte. (tools/bench.py's `hostile` case times it.)"""
    from acp_relay.render.frames import TEXT_MAX
    from acp_relay.view.data import VIEW_FRAME_MAX

    db = tmp_path / "big.db"
    sid = "big-1"
    text = "\x1b\x07\x9b\u202e" * ((1 << 18) + 4096)  # past TEXT_MAX characters, each one escaped
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/p", "mcpServers": []}},
        {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": sid}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]},
        },
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": sid,
                "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}},
            },
        },
        {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}},
    ]
    data = b"".join(orjson.dumps(m) + b"\n" for m in msgs) + b"\x1b[31m\x00\x9b" * (1 << 18) + b"\n"
    out = subprocess.run(relay_cmd(db, "cat"), input=data, capture_output=True, timeout=120)
    assert out.stdout == data and out.stderr == b"", out.stderr
    cli = [sys.executable, "-m", "acp_relay"]

    def run(*args: str) -> bytes:
        res = subprocess.run([*cli, *args, "--db", str(db)], capture_output=True, timeout=120)
        assert res.returncode == 0 and ("--raw" in args or _bad(res.stdout) == []), res.stderr
        return res.stdout

    assert len(run("show", sid)) < 10_000 and len(run("show", "-c", "1")) < 10_000
    transcript = run("show", sid, "--transcript")
    assert len(transcript) < 4 * TEXT_MAX + 10_000 and b"more characters]" in transcript
    import sqlite3

    conn = sqlite3.connect(db)
    (fid,) = conn.execute("SELECT id FROM frames WHERE update_kind = 'agent_message_chunk'").fetchone()
    (bad,) = conn.execute("SELECT id FROM frames WHERE kind = 'invalid'").fetchone()
    conn.close()
    one = run("show", "--frame", str(fid))
    assert len(one) < 4 * TEXT_MAX + 10_000 and f"show --frame {fid} --raw".encode() in one
    assert run("show", "--frame", str(fid), "--raw") == data.splitlines(keepends=True)[3]
    assert run("show", "--frame", str(bad), "--raw") == data.splitlines(keepends=True)[5]
    page = tmp_path / "page.html"
    run("view", sid, "-o", str(page))
    body = page.read_bytes()
    assert len(body) < 3 * VIEW_FRAME_MAX + 8 * TEXT_MAX and f"show --frame {fid} --raw".encode() in body
