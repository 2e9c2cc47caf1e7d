"""Issue 19: no hostile byte reaches a terminal. A recording and a capture full of terminal escapes (ESC, CSI,
OSC 52 clipboard writes, OSC 8 links, 8-bit C1 controls, bidi overrides, newlines and carriage returns in
ids, labels and text, invalid UTF-8) are shown by every command; nothing they print, on stdout or stderr,
may hold a control character (but the newline between records), a C1 control or a bidi control."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import sqlite3
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
# Generated variants: every C0 control, DEL, every C1 control and every bidi control by itself, each between
# letters (a view that escapes a list of known sequences, not the classes, misses one of these).
CLASSES = [
    *range(0x20),
    0x7F,
    *range(0x80, 0xA0),
    0x61C,
    0x200E,
    0x200F,
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
]
GENERATED = "".join(f"<{chr(c)}>" for c in CLASSES)
HOSTILE.append(GENERATED)
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
    # Lone surrogates written as JSON escapes (not Unicode: the frame is kept, not parsed) and invalid UTF-8
    # inside a JSON string, then a line that is not JSON at all.
    update = (
        b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hostile \\ud800\\udfff \\u001b[2J"}}'
    )
    body += b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":' + orjson.dumps(SID)
    body += b',"update":' + update + b"}}\n"
    body += b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":' + orjson.dumps(SID)
    body += (
        b',"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hostile \xff\x9b\xc2"}}}}\n'
    )
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
    ["delete", "{session}", "--json"],
    # issue 19's second pass: the rest of `acp-relay --help`, every output mode
    ["check", "last", "--json"],
    ["check", "-c", "1", "--json"],
    ["check", "--all"],
    ["stats", "last", "--json"],
    ["stats", "-c", "1"],
    ["info", "last", "--json"],
    ["diff", "last", "last", "--json"],
    ["show", "-c", "1", "--json"],
    ["show", "--frame", "{frame}", "--raw", "--json"],
    ["export", "last", "--format", "sqlite", "-o", "{out}"],
    ["export", "-c", "1", "--format", "ndjson"],
    ["export", "-c", "1", "--format", "acp-devtools"],
    ["otel", "export", "--all", "--file", "{out}"],
    ["otel", "export", "last", "--content", "--check", "--file", "{out}"],
    ["otel", "export", "--all", "--endpoint", "http://127.0.0.1:9"],
    ["prune", "--max-size", "1KB", "--dry-run"],
    ["prune", "--max-size", "1KB", "--dry-run", "--json"],
    ["prune", "--max-size", "1KB"],
    ["recover"],
    ["view", "last", "-o", "{evil_out}"],
    ["view", "last", "-o", "/nonexistent/{evil_name}"],
    ["export", "last", "--format", "ndjson", "-o", "/nonexistent/{evil_name}"],
    # a session argument that is hostile itself, for every command that takes one
    *(
        [cmd, "x\u009b\u202e\x1b[31m"]
        for cmd in ("show", "stats", "info", "check", "export", "view", "delete", "replay")
    ),
    ["diff", "last", "x\u009b\u202e\x1b[31m"],
    ["rerun", "x\u009b\u202e\x1b[31m", "cat"],
    ["otel", "export", "x\u009b\u202e\x1b[31m", "--file", "{out}"],
    *(["import", f"{{bad:{name}}}"] for name in ("direction", "ts", "not-json", "devtools", "keys", "sqlite")),
    *(["import", "--json", f"{{bad:{name}}}"] for name in ("direction", "not-json", "sqlite")),
]

# Crafted captures whose error messages quote what they hold (an id, a field, a file name).
# (A file name holds at most 255 bytes: a sample of each class.)
EVIL_NAME = "n\x1b[2J\x07\x08\t\r\n\x7f\x85\u009b\u061c\u200f\u202e\u2066"


def _bad_capture(tmp: Path, name: str) -> Path:
    path = tmp / (name + EVIL_NAME + (".db" if name == "sqlite" else ".ndjson"))
    bad = EVIL.replace("\x00", "")
    if name == "direction":
        path.write_bytes(orjson.dumps({"seq": 1, "ts": 1.0, "direction": "zzz" + EVIL, "raw": "x"}) + b"\n")
    elif name == "ts":
        path.write_bytes(orjson.dumps({"seq": 1, "ts": bad, "direction": "c2a", "raw": "x"}) + b"\n")
    elif name == "not-json":
        path.write_bytes(b"not json \x1b[31m\xc2\x9b\xe2\x80\xae\xff " + bad.encode() + b"\n")
    elif name == "devtools":
        path.write_bytes(orjson.dumps({"version": 1, "frames": [{"direction": [bad]}], bad: 1}))
    elif name == "keys":
        path.write_bytes(orjson.dumps({"seq": 1, "ts": 1.0, "direction": "c2a", "raw": "x", bad: bad}) + b"\n" * 2)
    else:
        conn = sqlite3.connect(path)
        conn.execute(f'CREATE TABLE connections (id INTEGER PRIMARY KEY, "{bad.replace(chr(34), "")}" TEXT)')
        conn.execute("CREATE TABLE frames (id INTEGER, raw INTEGER)")
        conn.commit()
        conn.close()
    return path


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(x.encode("unicode_escape").decode() for x in a))
def test_no_command_prints_a_hostile_byte(hostile: tuple[Path, Path], args: list[str], tmp_path: Path) -> None:
    db, capture = hostile
    conn = sqlite3.connect(db)
    frame = conn.execute("SELECT id FROM frames WHERE kind = 'error' LIMIT 1").fetchone()[0]
    conn.close()
    if args[0] in ("delete", "prune", "recover"):  # on a copy, so the other cases keep the session
        copy = tmp_path / "copy.db"
        shutil.copy(db, copy)
        db = copy
    subs = {
        "{frame}": str(frame),
        "{capture}": str(capture),
        "{missing}": str(capture) + "\x1b[31m.x",
        "{session}": SID,
        "{out}": str(tmp_path / "out"),
        "{evil_out}": str(tmp_path / EVIL_NAME),
        "/nonexistent/{evil_name}": "/nonexistent/" + EVIL_NAME,
    }
    argv = [subs.get(a, a) for a in args]
    argv = [str(_bad_capture(tmp_path, a[5:-1])) if a.startswith("{bad:") else a for a in argv]
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


def test_show_follow_prints_no_hostile_byte(hostile: tuple[Path, Path], tmp_path: Path) -> None:
    """`show -f` waits for the next connection and prints its frames as the relay records them."""
    db = tmp_path / "follow.db"
    shutil.copy(hostile[0], db)
    follow = subprocess.Popen(
        [sys.executable, "-m", "acp_relay", "show", "-f", "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert follow.stderr is not None
        assert b"waiting for the next connection" in follow.stderr.readline()
        data = _lines()
        cmd = relay_cmd(db, sys.executable, "-c", AGENT, "stderr " + ARG_EVIL, label="label\n" + ARG_EVIL)
        assert subprocess.run(cmd, input=data, capture_output=True, timeout=60).stdout == data
        out, err = follow.communicate(timeout=60)  # it ends with the connection
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait()
    assert follow.returncode == 0 and out.count(b"\n") >= len(data.splitlines()), err
    assert b"Traceback" not in err and _bad(out) == [] and _bad(err) == []


# An agent for rerun that answers with hostile ids, names, text, errors and stderr.
RERUN_AGENT = r"""
import json, sys
EVIL = sys.argv[1]
sys.stderr.write("agent stderr " + EVIL + "\n")
sys.stderr.flush()
def out(m):
    sys.stdout.write(json.dumps(m) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if "method" not in m or "id" not in m:
        continue
    if m["method"] == "initialize":
        out({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": 1, "agentInfo": {"name": EVIL, "version": EVIL}}})
    elif m["method"] == "session/new":
        out({"jsonrpc": "2.0", "id": m["id"], "result": {"sessionId": "s" + EVIL}})
    elif m["method"] == "session/prompt":
        call = {"toolCallId": EVIL, "title": EVIL, "kind": EVIL}
        perm = {"sessionId": "s" + EVIL, "toolCall": call, "options": [{"optionId": EVIL, "kind": "reject_once"}]}
        out({"jsonrpc": "2.0", "id": "p" + EVIL, "method": "session/request_permission", "params": perm})
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": EVIL}}
        out({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s" + EVIL, "update": update}})
        out({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32000, "message": EVIL, "data": EVIL}})
    else:
        out({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": EVIL}})
"""


@pytest.mark.parametrize("mode", [[], ["--json"]])
def test_rerun_prints_no_hostile_byte(hostile: tuple[Path, Path], tmp_path: Path, mode: list[str]) -> None:
    """rerun plays the hostile recording against an agent that answers with hostile bytes. Its report
    (stdout) and its log (stderr) are for people; the agent's own stderr is not rerun's to print."""
    db = tmp_path / "rerun.db"
    shutil.copy(hostile[0], db)
    agent = [sys.executable, "-c", RERUN_AGENT, ARG_EVIL]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "acp_relay",
            "rerun",
            SID + "@1",
            "--timeout",
            "20",
            *mode,
            "--db",
            str(db),
            "--",
            *agent,
        ],
        capture_output=True,
        timeout=120,
    )
    assert out.returncode in (0, 3, 4) and out.stdout and b"Traceback" not in out.stderr, out.stderr
    assert _bad(out.stdout) == [] and _bad(out.stderr) == []
    # the agent's permission requests (hostile title, kind and option) are in the report, escaped
    assert b"permission" in out.stdout and b"turn 1: permission 1 (" in out.stderr, out.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["doctor", "zed"],
        ["doctor", "zed", "--json"],
        ["setup", "--list"],
        ["setup", "zed", "--dry-run", "--db", "{db}", "--", "ag" + ARG_EVIL],
        ["setup", "zed", "--wrap", "{entry}", "--dry-run", "--db", "{db}"],
        ["setup", "zed", "--wrap", "nope" + ARG_EVIL, "--db", "{db}"],
        ["setup", "zed", "--db", "{db}", "--", "ag" + ARG_EVIL],
    ],
    ids=lambda a: " ".join(x.encode("unicode_escape").decode()[:20] for x in a),
)
def test_doctor_and_setup_print_no_hostile_byte(tmp_path: Path, args: list[str]) -> None:
    """An editor config is untrusted input too: entry names, commands and args full of hostile characters
    (raw C1 and bidi are legal in JSON strings; the others as JSON escapes)."""
    entry = "ev\u009bil\u202e" + EVIL.replace("\x00", "")
    settings = tmp_path / ".config" / "zed" / "settings.json"
    settings.parent.mkdir(parents=True)
    servers = {entry: {"command": "/nonexistent/a\u009b" + EVIL, "args": ["--x\u0085", EVIL], "env": {EVIL: EVIL}}}
    text = orjson.dumps({"agent_servers": servers}).decode()
    settings.write_text(text.replace("\\u009b", "\u009b").replace("\\u202e", "\u202e"), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "ZED_", "ACP_RELAY"))}
    env["HOME"] = str(tmp_path)
    argv = [{"{db}": str(tmp_path / "relay.db"), "{entry}": entry}.get(a, a) for a in args]
    out = subprocess.run([sys.executable, "-m", "acp_relay", *argv], capture_output=True, timeout=60, env=env)
    assert out.returncode in (0, 1, 2) and b"Traceback" not in out.stderr, out.stderr
    assert _bad(out.stdout) == [] and _bad(out.stderr) == []


def _refused_requests(port: int) -> None:
    """Requests a listener refuses and logs: a Host that is not its own, a hostile Origin, a hostile path,
    an unknown connection id, a line that is not HTTP (each with C1, bidi and ESC bytes in it)."""
    evil = "\x1b[31m\x9b\u202e".encode()
    body = orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
    head = b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
    host = b"Host: 127.0.0.1:%d\r\n" % port
    for req in (
        b"POST /acp HTTP/1.1\r\nHost: evil" + evil + b"\r\n" + head + body,
        b"POST /acp HTTP/1.1\r\n" + host + b"Origin: http://e" + evil + b"\r\n" + head + body,
        b"POST /acp" + evil + b" HTTP/1.1\r\n" + host + head + body,
        b"POST /acp HTTP/1.1\r\n" + host + b"Acp-Connection-Id: x" + evil + b"\r\n" + head + body,
        b"\x1b[31m\x9b not http" + evil + b"\r\n\r\n",
    ):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(req)
            s.shutdown(socket.SHUT_WR)
            try:
                while s.recv(65536):
                    pass
            except OSError:
                pass


@pytest.mark.parametrize("command", ["serve", "replay", "proxy"])
def test_listeners_log_no_hostile_byte(hostile: tuple[Path, Path], command: str) -> None:
    """What serve, replay --listen and proxy log about the requests they refuse (serve's agent here is
    `cat`: an agent's own stderr is passed through as it is, like run's)."""
    db = hostile[0]
    argv = ["serve", "--db", str(db), "--listen", "127.0.0.1:0", "--label", "l" + ARG_EVIL, "--", "cat"]
    if command == "replay":
        argv = ["replay", SID + "@1", "--db", str(db), "--speed", "fast", "--listen", "127.0.0.1:0"]
    if command == "proxy":  # refused requests never reach the upstream (nothing listens there)
        argv = ["proxy", "--db", str(db), "--listen", "127.0.0.1:0", "--upstream", "ws://127.0.0.1:9/acp"]
    proc = subprocess.Popen([sys.executable, "-m", "acp_relay", *argv], stderr=subprocess.PIPE)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert b"listening on http://127.0.0.1:" in first, first
        _refused_requests(int(first.split(b"127.0.0.1:")[1].split(b"/")[0]))
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert b"Traceback" not in err and b"refused" in err, err
    assert _bad(first + err) == []


def test_a_session_id_with_a_newline_is_addressable_with_its_connection(hostile: tuple[Path, Path]) -> None:
    """ID@N for an id holding a newline (before: `.` stopped at it, and the id was not found)."""
    out = subprocess.run(
        [sys.executable, "-m", "acp_relay", "show", SID + "@1", "--db", str(hostile[0])],
        capture_output=True,
        timeout=60,
    )
    assert out.returncode == 0 and b"session/prompt" in out.stdout, out.stderr


@pytest.mark.parametrize(
    "args",
    [a for a in COMMANDS if "--json" in a and a[0] != "diff" and not any("{" in x for x in a)],  # diff A A refuses
    ids=lambda a: " ".join(x.encode("unicode_escape").decode() for x in a),
)
def test_every_json_output_stays_json_lines(hostile: tuple[Path, Path], args: list[str]) -> None:
    """Escaping never costs a --json line its validity: each line of stdout is one JSON value."""
    out = subprocess.run(
        [sys.executable, "-m", "acp_relay", *args, "--db", str(hostile[0])], capture_output=True, timeout=60
    )
    assert out.stdout and all(orjson.loads(line) is not None for line in out.stdout.splitlines()), out.stderr


# A spill journal left by a relay killed with its recorder: the relay ran with the database in a directory
# whose name holds every class of hostile character, and the agent's frames carry them too.
HOSTILE_STREAMER = r"""
import json, os, sys, time
evil, go, end = sys.argv[1], sys.argv[2], sys.argv[3]
while not os.path.exists(go):
    time.sleep(0.01)
for i in range(150):
    msg = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": evil, "update": {
        "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": evil * 150}}}}
    sys.stdout.buffer.write(json.dumps(msg, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n")
    sys.stdout.buffer.write(b"\x1b[31m\x9b\xff not json\n")
    sys.stdout.buffer.flush()
sys.stdout.buffer.write(b'{"partial":"\x1b]52;c;')
sys.stdout.buffer.flush()
while not os.path.exists(end):
    time.sleep(0.01)
"""


def test_recover_of_a_hostile_journal_prints_no_hostile_byte(tmp_path: Path) -> None:
    from helpers import try_rows, wait_for
    from test_spill import Editor, hold_the_lock

    home = tmp_path / ("d" + EVIL_NAME)
    home.mkdir()
    db = home / "relay.db"
    editor = Editor(
        relay_cmd(db, sys.executable, "-c", HOSTILE_STREAMER, ARG_EVIL, str(tmp_path / "go"), str(tmp_path / "end"))
    )
    got = wait_for(lambda: try_rows(db, "SELECT recorder_pid FROM connections ORDER BY id DESC LIMIT 1"), "a row")
    locker = hold_the_lock(db)
    try:
        (tmp_path / "go").touch()
        wait_for(lambda: any(p.read_bytes().endswith(b"52;c;") for p in home.glob("relay.db.spill-*")), "the journal")
        os.kill(int(got[0][0]), signal.SIGKILL)
        editor.proc.kill()
        editor.finish(30)
    finally:
        locker.kill()
        locker.wait()
    from acp_relay.record import journal

    lines = 0  # the agent's whole lines the journal holds (what went down the pipe died with the recorder)
    for path in home.glob("relay.db.spill-*"):
        with path.open("rb") as f:
            records = list(journal.read_records(f))
        mid = next(json.loads(p)["mid"][1] for code, p, _, _ in records if code == journal.STATE)
        lines += sum(p.count(b"\n") for code, p, _, _ in records if code == 1) - mid  # a line begun before: lost
    assert lines > 0
    out = subprocess.run(
        [sys.executable, "-m", "acp_relay", "recover", "--db", str(db)], capture_output=True, timeout=120
    )
    assert out.returncode == 0 and b"Traceback" not in out.stderr, out.stderr
    assert b"connection 1" in out.stdout and not list(home.glob("relay.db.spill-*"))
    assert _bad(out.stdout) == [] and _bad(out.stderr) == []
    # The journal's frames, hostile bytes and all, are in the database, and the unfinished last line.
    query = "SELECT count(*), sum(unterminated), count(*) FILTER (WHERE instr(raw, X'9bff')) FROM frames"
    stored, unterminated, hostile = sqlite3.connect(db).execute(query + " WHERE direction = 'a2c'").fetchone()
    assert (stored, unterminated) == (lines + 1, 1) and hostile > 0
    shown = subprocess.run([sys.executable, "-m", "acp_relay", "show", "--db", str(db), "-c", "1"], capture_output=True)
    assert shown.returncode == 0 and _bad(shown.stdout) == [] and _bad(shown.stderr) == []
