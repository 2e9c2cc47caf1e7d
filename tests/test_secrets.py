"""Issue 19: no secret stored by any path. Every planted secret below is generated into each place a
credential can stand (frames, the agent's command line and stderr, imports), and the database files are
then read byte for byte: none of the secrets may be there, and what is not a secret stays as sent."""

from __future__ import annotations

import base64
import itertools
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import relay_cmd, rows

from acp_relay.protocol.redact import PLACEHOLDER, Policy, redact_argv, redact_frame, redact_line, redact_text

# Credential shapes (each a different provider's form) and the tail that identifies each in the files.
SHAPES = {
    "openai": "sk-proj-" + "Ab3dEf6hIj9kLm2n" * 2,
    "anthropic": "sk-ant-api03-" + "Zy8xWv7uTs6rQp5o" * 2,
    "github": "ghp_" + "R4nd0mGitHubT0kenValue1234567890ab",
    "github-pat": "github_pat_11AAAAAAA0" + "x9Y8z7W6v5U4t3S2r1Q0" * 2,
    "slack": "xoxb-2048-409600-" + "aBcDeFgHiJkLmN",
    "aws": "AKIA" + "IOSFODNN7EXAMPL1",
    "google": "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    "gitlab": "glpat-" + "q1w2e3r4t5y6u7i8o9p0",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
}
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAp3mSecretPemBody\n-----END RSA PRIVATE KEY-----"
PEM_MARK = "p3mSecretPemBody"


def _note(text: str, sid: str = "s1") -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": sid,
            "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}},
        },
    }


def _prompt(text: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "session/prompt",
        "params": {"sessionId": "s1", "prompt": [{"type": "text", "text": text}]},
    }


def _stored(msg: Any, answers: Any = None, policy: Policy | None = None) -> tuple[bytes, int]:
    return redact_frame(orjson.dumps(msg), policy or Policy(), answers)


# ---- shapes: in a prompt, an agent's message, a tool's output, stderr; the surrounding text stays ---------------
PLACES = {
    "prompt": lambda s: _prompt(f"please use {s} for the deploy"),
    "agent chunk": lambda s: _note(f"I found {s} in .env"),
    "terminal output": lambda s: {
        "jsonrpc": "2.0",
        "id": 9,
        "result": {"output": f"export OPENAI_API_KEY={s}\n$ ", "truncated": False},
    },
    "tool call": lambda s: (
        _note("x")
        | {
            "params": {
                "sessionId": "s1",
                "update": {"sessionUpdate": "tool_call", "toolCallId": "t", "title": f"curl -H 'x: {s}'"},
            }
        }
    ),
}


@pytest.mark.parametrize(("shape", "place"), list(itertools.product(SHAPES, PLACES)))
def test_a_credential_shape_is_redacted_wherever_it_stands(shape: str, place: str) -> None:
    secret = SHAPES[shape]
    raw, n = _stored(PLACES[place](secret))
    assert n >= 1 and secret.encode() not in raw and PLACEHOLDER.encode() in raw
    assert secret[-12:].encode() not in raw
    orjson.loads(raw)  # still JSON


def test_a_prompt_keeps_its_text_around_the_token() -> None:
    raw, n = _stored(_prompt(f"please use {SHAPES['openai']} for the deploy, then Bearer abcDEF123456789xyz ok"))
    text = orjson.loads(raw)["params"]["prompt"][0]["text"]
    assert n == 2 and text == f"please use {PLACEHOLDER} for the deploy, then Bearer {PLACEHOLDER} ok"


def test_private_key_blocks_go_whole() -> None:
    raw, n = _stored(_note(f"key:\n{PEM}\ndone"))
    assert n == 1 and PEM_MARK.encode() not in raw and b"done" in raw


@pytest.mark.parametrize(
    "text",
    [
        "the bearer of bad news",
        "Basic understanding of task-management",
        "ask-me-anything",
        "see https://example.com/docs?page=2#x",
        "file:///home/u/project/main.py",
        "tokens: 1234, maxTokens=5",
        "sk-short",
    ],
)
def test_prose_that_only_looks_close_is_kept(text: str) -> None:
    assert _stored(_note(text))[1] == 0
    assert redact_text(text)[1] == 0 or "tokens" not in text


# ---- by key name --------------------------------------------------------------------------------------------
KEYS = [
    "auth",
    "bearer",
    "jwt",
    "key",
    "pat",
    "privateKey",
    "password",
    "credentials",
    "sessionToken",
    "token",
    "api-key",
    "x-api-key",
    "proxy_key",
    "clientSecret",
]


@pytest.mark.parametrize("key", KEYS)
def test_credential_keys_in_meta(key: str) -> None:
    msg = _note("hi") | {"params": {**_note("hi")["params"], "_meta": {key: "plain-value-1", "traceId": "t-1"}}}
    raw, n = _stored(msg)
    assert n == 1 and b"plain-value-1" not in raw and b"t-1" in raw


@pytest.mark.parametrize(("key", "method"), list(itertools.product(KEYS[:9], ["_zed/login", "vendor/connect"])))
def test_credential_keys_anywhere_in_extension_and_unknown_methods(key: str, method: str) -> None:
    msg = {"jsonrpc": "2.0", "id": 3, "method": method, "params": {"server": {key: "plain-value-2", "port": 8}}}
    raw, n = _stored(msg)
    assert n == 1 and b"plain-value-2" not in raw and b'"port":8' in raw


def test_a_content_key_named_token_in_an_acp_method_is_content() -> None:
    msg = _note("hi")
    msg["params"]["update"]["token"] = "visible"
    assert _stored(msg)[1] == 0


def test_gemini_api_key_object_is_descended_into_not_replaced() -> None:
    key: dict[str, Any] = {"provider": "google"}
    msg = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"_meta": {"api-key": key}}}
    assert _stored(msg) == (orjson.dumps(msg), 0)
    key["value"] = "AIza-not-shaped-but-named"
    raw, n = _stored(msg)
    assert n == 1 and b'"provider":"google"' in raw and b"not-shaped" not in raw


@pytest.mark.parametrize("method", ["authenticate", "auth/login"])
def test_the_authenticate_result_is_redacted(method: str) -> None:
    answer = {"jsonrpc": "2.0", "id": 2, "result": {"accessToken": "at-plain-1", "refreshToken": "rt-plain-2"}}
    raw, n = _stored(answer, method)
    assert n == 2 and b"at-plain-1" not in raw and b"rt-plain-2" not in raw
    assert _stored(answer, "session/new")[1] == 0  # the same answer to another method is content


# ---- by place: command lines, terminal/create, MCP servers, URLs ------------------------------------------------
ARGVS = [
    (["agent", "--api-key", "plain-1"], "plain-1"),
    (["agent", "--api-key=plain-2"], "plain-2"),
    (["agent", "--token", "plain-3", "--verbose"], "plain-3"),
    (["agent", "--auth-token=plain-4"], "plain-4"),
    (["env", "ANTHROPIC_API_KEY=plain-5", "agent"], "plain-5"),
    (["agent", "--url", "https://user:plain-6@host/x"], "plain-6"),
    (["agent", "--url", "https://host/x?api_key=plain-7&v=1"], "plain-7"),
    (["agent", "--password", "plain-8"], "plain-8"),
    (["agent", "-H", "Authorization: Bearer plain9abcdefgh0"], "plain9abcdefgh0"),
]


@pytest.mark.parametrize(("argv", "secret"), ARGVS)
def test_command_lines(argv: list[str], secret: str) -> None:
    out, n = redact_argv(argv)
    assert n >= 1 and secret not in " ".join(out) and out[0] == argv[0]
    mcp = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "session/new",
        "params": {"cwd": "/p", "mcpServers": [{"name": "x", "command": "srv", "args": argv, "env": []}]},
    }
    assert secret.encode() not in _stored(mcp)[0]
    term = {
        "jsonrpc": "2.0",
        "id": 4,
        "method": "terminal/create",
        "params": {"sessionId": "s1", "command": "run", "args": argv, "env": [{"name": "HOME", "value": "/h"}]},
    }
    raw, n = _stored(term)
    assert secret.encode() not in raw and b'"name":"HOME"' in raw


def test_mcp_server_urls_and_terminal_env() -> None:
    msg = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "session/new",
        "params": {
            "cwd": "/p",
            "mcpServers": [{"type": "http", "name": "h", "url": "https://u:plain-pw@mcp.example/x?token=plain-q"}],
        },
    }
    raw, _ = _stored(msg)
    assert b"plain-pw" not in raw and b"plain-q" not in raw and b"mcp.example/x" in raw
    term = {
        "jsonrpc": "2.0",
        "id": 4,
        "method": "terminal/create",
        "params": {"sessionId": "s", "command": "x", "env": [{"name": "DB_PASSWORD", "value": "plain-env"}]},
    }
    assert b"plain-env" not in _stored(term)[0]


# ---- bypasses: invalid UTF-8, duplicate keys, text that is not JSON -------------------------------------------------
def test_one_invalid_utf8_byte_does_not_keep_a_secret() -> None:
    raw = orjson.dumps(_note("caf\u00e9") | {"id": 1}).replace("\u00e9".encode(), b"\xe9")  # latin-1 byte
    raw = raw.replace(b'"sessionId"', b'"_meta":{"apiKey":"plain-u8"},"sessionId"')
    out, n = redact_frame(raw, Policy())
    assert n == 1 and b"plain-u8" not in out and b"caf\xe9" in out  # the bad byte kept as it was


@pytest.mark.parametrize("regexes", [[], ["plain-dup"]])
def test_a_duplicated_key_keeps_no_secret_copy(regexes: list[str]) -> None:
    first = b'"mcpServers":[{"name":"a","command":"c","args":[],"env":[{"name":"K","value":"plain-dup-1"}]}]'
    raw = b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/p",' + first + b',"mcpServers":[]}}'
    out, n = redact_frame(raw, Policy(regexes=regexes))
    assert n >= 1 and b"plain-dup" not in out
    meta = b'{"jsonrpc":"2.0","method":"x/y","params":{"note":"sk-' + b"d" * 20 + b'","note":"fine"}}'
    assert b"ddddd" not in redact_frame(meta, Policy())[0]


def test_text_that_is_not_json() -> None:
    line = b'{"jsonrpc":"2.0","method":"session/update","params":{"_meta":{"token":"plain-cut-1"'  # cut short
    out, n = redact_frame(line, Policy())
    assert n >= 1 and b"plain-cut-1" not in out
    assert redact_line(b"INFO using key " + SHAPES["github"].encode(), Policy())[1] == 1
    assert redact_line(b"DEBUG OPENAI_API_KEY=plain-env-2 set", Policy())[0] == b"DEBUG OPENAI_API_KEY=[redacted] set"
    assert redact_line(b"nothing to see", Policy()) == (b"nothing to see", 0)


def test_no_redact_keeps_everything() -> None:
    raw = orjson.dumps(_prompt(SHAPES["openai"]))
    assert redact_frame(raw, Policy(enabled=False)) == (raw, 0)
    assert redact_line(raw, Policy(enabled=False)) == (raw, 0)


# ---- through the relay and through import: the database files hold none of them ----------------------------------
def _files_hold(db: Path, secrets: list[str]) -> list[str]:
    """The secrets found in any file of the database (main file, WAL, journal): the grep of docs/security.md."""
    found = []
    for path in db.parent.iterdir():
        if path.is_file() and path.name.startswith(db.name):
            body = path.read_bytes()
            found += [f"{path.name}: {s}" for s in secrets if s.encode() in body]
    return found


AGENT = r"""
import sys
sys.stderr.write("starting with key %s\n" % sys.argv[1])
sys.stderr.write("ANTHROPIC_API_KEY=plain-stderr-2\n")
sys.stderr.flush()
for line in sys.stdin.buffer:
    sys.stdout.buffer.write(line)
    sys.stdout.buffer.flush()
"""


def test_through_the_relay_no_planted_secret_reaches_the_files(db: Path) -> None:
    frames = [orjson.dumps(PLACES["prompt"](s)) for s in SHAPES.values()]
    frames.append(orjson.dumps(_note(PEM)))
    frames.append(orjson.dumps(_note("x") | {"params": {"_meta": {"auth": "Bearer plainAUTH1234567"}}}))
    bad = orjson.dumps(_note("caf\u00e9") | {"id": 1}).replace("\u00e9".encode(), b"\xe9")
    frames.append(bad.replace(b'"sessionId"', b'"_meta":{"apiKey":"plain-u8"},"sessionId"'))
    frames.append(b'{"jsonrpc":"2.0","method":"session/update","params":{"_meta":{"password":"plain-last"}}}')
    data = b"\n".join(frames)  # the last line is unterminated
    agent = [sys.executable, "-c", AGENT, SHAPES["slack"], "--api-key", "plain-argv-1"]
    out = subprocess.run(relay_cmd(db, *agent), input=data, capture_output=True, timeout=60)
    assert out.stdout == data  # the wire is untouched
    planted = [*SHAPES.values(), PEM_MARK, "plainAUTH1234567", "plain-u8", "plain-last", "plain-argv-1"]
    planted.append("plain-stderr-2")
    assert _files_hold(db, planted) == []
    counts = rows(db, "SELECT redacted, length, json_extract(details, '$.wire_length') FROM frames WHERE redacted > 0")
    assert len(counts) == 2 * len(frames)  # each frame both ways
    assert all(n >= 1 and wire > 0 for n, _, wire in counts)
    assert sum(wire != length for _, length, wire in counts) >= len(frames)  # most copies differ in size
    ((argv, tail),) = rows(db, "SELECT argv, stderr_tail FROM connections")
    assert PLACEHOLDER in orjson.loads(argv) and "plain-stderr-2" not in tail


def test_import_goes_through_the_same_policy(db: Path, tmp_path: Path) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"_meta": {"proxyConfig": {"headers": {"proxy_key": "plain-import-1"}}}},
    }
    lines = [
        {"seq": 1, "ts": 1.0, "direction": "c2a", "raw": orjson.dumps(init).decode()},
        {"seq": 2, "ts": 2.0, "direction": "c2a", "raw": orjson.dumps(_prompt(SHAPES["github"])).decode()},
        {
            "seq": 3,
            "ts": 3.0,
            "direction": "a2c",
            "raw_b64": base64.b64encode(b"\xff" + SHAPES["aws"].encode()).decode(),
        },
    ]
    capture = tmp_path / "cap.ndjson"
    capture.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    cmd = [sys.executable, "-m", "acp_relay", "import", "--db", str(db), str(capture)]
    out = subprocess.run(cmd, capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert b"redacted: 3 values" in out.stdout
    assert _files_hold(db, ["plain-import-1", SHAPES["github"], SHAPES["aws"]]) == []


# ---- delete and prune leave no word of what they deleted, FTS5's segments and the file bytes included -----------
def _session_lines(sid: str, word: str) -> bytes:
    new = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/p", "mcpServers": []}}
    answer = {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": sid}}
    prompt = _prompt(f"remember {word} please") | {
        "params": {"sessionId": sid, "prompt": [{"type": "text", "text": f"remember {word}"}]}
    }
    chunks = [_note(f"{word} number {i}", sid) for i in range(30)]
    return b"".join(orjson.dumps(m) + b"\n" for m in (new, answer, prompt, *chunks))


def _everything(db: Path) -> list[bytes]:
    """Every cell of every table (FTS5's shadow tables included), as bytes."""
    import sqlite3

    conn = sqlite3.connect(db)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        cells = []
        for t in tables:
            for row in conn.execute(f'SELECT * FROM "{t}"'):
                cells += [c if isinstance(c, bytes) else str(c).encode() for c in row]
        return cells
    finally:
        conn.close()


@pytest.mark.parametrize("how", ["delete", "prune"])
def test_deleted_text_leaves_no_trace(db: Path, tmp_path: Path, how: str) -> None:
    cli = [sys.executable, "-m", "acp_relay"]
    for sid, word in (("gone-1", "zanzibarquokka"), ("kept-2", "keptwordlemur")):
        lines = _session_lines(sid, word)
        out = subprocess.run(relay_cmd(db, "cat"), input=lines, capture_output=True, timeout=60)
        assert out.stdout == lines
    found = subprocess.run([*cli, "search", "--db", str(db), "zanzibarquokka"], capture_output=True, timeout=60)
    assert found.returncode == 0 and b"zanzibarquokka" in found.stdout  # the index holds it now
    if how == "delete":
        done = subprocess.run([*cli, "delete", "--db", str(db), "gone-1"], capture_output=True, timeout=60)
    else:
        import sqlite3

        conn = sqlite3.connect(db)
        conn.execute("UPDATE connections SET ended_at = 1, started_at = 1 WHERE id = 1")
        conn.commit()
        conn.close()
        done = subprocess.run([*cli, "prune", "--db", str(db), "--older-than", "1d"], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert not any(b"zanzibarquokka" in c for c in _everything(db))
    assert any(b"keptwordlemur" in c for c in _everything(db))  # the scan does see what is there
    assert _files_hold(db, ["zanzibarquokka"]) == []
    again = subprocess.run([*cli, "search", "--db", str(db), "zanzibarquokka"], capture_output=True, timeout=60)
    assert again.returncode == 1 and b"zanzibarquokka" not in again.stdout


# ---- every view of a redacted frame says so; pages are private -----------------------------------------------------
def _recorded(db: Path) -> None:
    lines = orjson.dumps(_prompt(f"use {SHAPES['openai']} and {SHAPES['github']}")) + b"\n"
    out = subprocess.run(relay_cmd(db, "cat"), input=lines, capture_output=True, timeout=60)
    assert out.stdout == lines


def test_show_says_a_frame_was_redacted(db: Path) -> None:
    _recorded(db)
    cli = [sys.executable, "-m", "acp_relay"]
    ((fid, length, wire),) = rows(
        db, "SELECT id, length, json_extract(details, '$.wire_length') FROM frames WHERE direction = 'c2a'"
    )
    assert wire > length
    one = subprocess.run([*cli, "show", "--db", str(db), "--frame", str(fid)], capture_output=True, timeout=60)
    assert f"redacted: 2 values ({length} bytes stored, {wire} on the wire)".encode() in one.stdout
    listing = subprocess.run([*cli, "show", "--db", str(db), "last"], capture_output=True, timeout=60)
    assert listing.stdout.count(b"[redacted 2]") == 2  # both directions
    js = subprocess.run([*cli, "show", "--db", str(db), "last", "--json"], capture_output=True, timeout=60)
    records = [orjson.loads(line) for line in js.stdout.splitlines()]
    assert [(r["redacted"], r["wire_length"]) for r in records] == [(2, wire), (2, wire)]


def test_view_pages_are_private_and_say_what_was_redacted(db: Path, tmp_path: Path) -> None:
    import os

    _recorded(db)
    cli = [sys.executable, "-m", "acp_relay"]
    page = tmp_path / "page.html"
    page.write_bytes(b"old")
    os.chmod(page, 0o644)
    out = subprocess.run(  # --force: an existing file is replaced only when asked (issue 30, item 8)
        [*cli, "view", "--db", str(db), "-o", str(page), "--force"], capture_output=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert page.stat().st_mode & 0o777 == 0o600 and b"redacted: 2 values" in page.read_bytes()
    fresh = tmp_path / "fresh.html"
    old = os.umask(0o022)
    try:
        subprocess.run([*cli, "view", "--db", str(db), "-o", str(fresh)], capture_output=True, timeout=60, check=True)
    finally:
        os.umask(old)
    assert fresh.stat().st_mode & 0o777 == 0o600
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    temp = subprocess.run([*cli, "view", "--db", str(db), "--no-open"], capture_output=True, timeout=60, env=env)
    path = Path(temp.stdout.decode().strip().split()[-1])
    assert path.exists() and path.parent.name == f"acp-relay-views-{os.getuid()}"
    assert path.parent.stat().st_mode & 0o777 == 0o700 and path.stat().st_mode & 0o777 == 0o600
    subprocess.run([*cli, "prune", "--db", str(db), "--older-than", "10000d"], env=env, capture_output=True, timeout=60)
    assert not path.exists()  # prune cleans the pages' directory


@pytest.mark.parametrize("method", ["fs/read_text_file", "terminal/output", "session/prompt"])
def test_big_file_contents_terminal_output_and_prompts_are_scanned_for_shapes(method: str) -> None:
    """Past 8 KiB frames are not byte-scanned for shapes (the flood budget), except these, where keys are
    most likely to stand: a .env file read, a terminal's output, a pasted prompt."""
    from acp_relay.protocol.tracker import Tracker

    text = "x" * 50_000 + f"\nOPENAI_API_KEY={SHAPES['openai']}\n"
    params: dict[str, Any] = {"sessionId": "s1", "path": "/p/.env"}
    if method == "session/prompt":
        params["prompt"] = [{"type": "text", "text": text}]
    request = {"jsonrpc": "2.0", "id": 5, "method": method, "params": params}
    answer = {"jsonrpc": "2.0", "id": 5, "result": {"content": text, "output": text}}
    t = Tracker()
    (req,) = t.feed("c2a", orjson.dumps(request) + b"\n", 0.0, 0.0)
    (res,) = t.feed("a2c", orjson.dumps(answer) + b"\n", 0.0, 0.0)
    frame = req if method == "session/prompt" else res
    methods = tuple(m.method for m in frame.index.messages)
    assert Policy().might_apply(frame.raw, methods, frame.index.messages[0].message)
    t = Tracker(Policy())  # the same frames through a tracker that redacts them
    (req,) = t.feed("c2a", orjson.dumps(request) + b"\n", 0.0, 0.0)
    (res,) = t.feed("a2c", orjson.dumps(answer) + b"\n", 0.0, 0.0)
    frame = req if method == "session/prompt" else res
    assert frame.redacted and SHAPES["openai"].encode() not in frame.raw


def _readme_check() -> str:
    """The sh lines of "Checking a database for a value" (docs/security.md), as written."""
    from helpers import doc_section

    section = doc_section("security.md", "## Checking a database for a value")
    return section[section.index("```sh\n") + 6 : section.index("```\n", section.index("```sh\n") + 6)]


def test_the_readme_check_finds_no_planted_secret(db: Path) -> None:
    import os

    frames = [orjson.dumps(PLACES["prompt"](s)) for s in SHAPES.values()]
    frames.append(orjson.dumps(_note("kept plainword")))
    data = b"\n".join(frames) + b"\n"
    out = subprocess.run(relay_cmd(db, "cat"), input=data, capture_output=True, timeout=60)
    assert out.stdout == data
    script = _readme_check()
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    for value, found in [*((s, False) for s in SHAPES.values()), ("plainword", True)]:
        env = {**os.environ, "DB": str(db), "VALUE": value, "PATH": path}
        res = subprocess.run(["sh", "-c", script], capture_output=True, timeout=60, env=env)
        expected = "FOUND in the files\nFOUND by search\n" if found else "not in the files\nnot found by search\n"
        assert res.stdout.decode() == expected, (value, res.stdout, res.stderr)
