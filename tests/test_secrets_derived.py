"""Issue 30, items 1, 2, 3 and 6: no column keeps what the stored frame lost, any method's credential keys
are redacted, import derives its columns as run does, and terminal-auth's login command is no credential.

Every secret is made anew for each run (random bodies in several vendors' forms), planted where a derived
column reads it, and then looked for in the whole database: every table's dump and every file's bytes."""

from __future__ import annotations

import secrets
import sqlite3
import string
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
from helpers import relay_cmd, rows

from acp_relay.protocol.jsonrpc import A2C, C2A, NET
from acp_relay.protocol.redact import PLACEHOLDER, Policy, redact_frame
from acp_relay.record.recorder import Recorder
from acp_relay.store.writer import Batch

_ALNUM = string.ascii_letters + string.digits
_FORMS = (
    lambda: "ghp_" + "".join(secrets.choice(_ALNUM) for _ in range(36)),
    lambda: "sk-proj-" + "".join(secrets.choice(_ALNUM) for _ in range(28)),
    lambda: "AKIA" + "".join(secrets.choice(string.ascii_uppercase + string.digits) for _ in range(16)),
    lambda: "glpat-" + "".join(secrets.choice(_ALNUM) for _ in range(22)),
    lambda: "xoxb-" + "".join(secrets.choice(string.digits) for _ in range(10)) + "-" + secrets.token_hex(8),
)


class Planted(dict[str, str]):
    """A new secret per place, in a form taken in turn; the places' names say where each stood."""

    def __missing__(self, place: str) -> str:
        self[place] = value = _FORMS[len(self) % len(_FORMS)]()
        return value


def _line(msg: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", **msg}) + b"\n"


def _update(sid: str, **update: Any) -> bytes:
    return _line({"method": "session/update", "params": {"sessionId": sid, "update": update}})


def _everything(db: Path) -> str:
    """Every table's rows (the dump) and the bytes of the database's files, as one text to search."""
    conn = sqlite3.connect(db)
    try:
        dump = "\n".join(conn.iterdump())
    finally:
        conn.close()
    files = b"".join(p.read_bytes() for p in db.parent.iterdir() if p.is_file() and p.name.startswith(db.name))
    return dump + "\n" + files.decode("latin-1")


def _kept(db: Path, planted: dict[str, str]) -> list[str]:
    text = _everything(db)
    return sorted(place for place, secret in planted.items() if secret in text)


class _SyncRecorder(Recorder):
    """The recorder's indexing and writing, without its threads."""

    def _submit(self, batch: Batch) -> None:
        self._insert(batch)


def _derived_script(s: Planted) -> list[tuple[str, bytes]]:
    """A connection whose every column that is read from a message's content meets a secret: the method,
    the id, the session, the update variant and each entity id of frames and batch members; the session's
    id, cwd, title and parent; the client's and agent's info; an unanswered request."""
    sid, plain = f"sess-{s['sessions.session_id']}", "plain-session"
    out = [
        (C2A, _line({"id": 0, "method": "initialize", "params": {"clientInfo": {"name": s["client_info"]}}})),
        (A2C, _line({"id": 0, "result": {"protocolVersion": 1, "agentInfo": {"version": s["agent_info"]}}})),
        (C2A, _line({"id": 1, "method": "session/new", "params": {"cwd": f"/home/u/{s['cwd']}", "mcpServers": []}})),
        (A2C, _line({"id": 1, "result": {"sessionId": sid}})),
        (C2A, _line({"id": 2, "method": "session/new", "params": {"cwd": "/p", "mcpServers": []}})),
        (A2C, _line({"id": 2, "result": {"sessionId": plain}})),
        (C2A, _line({"id": 3, "method": "session/fork", "params": {"sessionId": s["parent_session_id"], "cwd": "/"}})),
        (A2C, _line({"id": 3, "result": {"sessionId": "plain-child"}})),
        (A2C, _update(sid, sessionUpdate="session_info_update", title=f"fix {s['title']}")),
        (A2C, _update(plain, sessionUpdate="subagent_update", sessionId=s["child_session_id"])),
        (C2A, _line({"id": s["rpc_id"], "method": "session/prompt", "params": {"sessionId": plain, "prompt": []}})),
        (A2C, _line({"id": s["rpc_id"], "result": {"stopReason": "end_turn", "userMessageId": s["result.msg"]}})),
        (C2A, _line({"id": 4, "method": f"_x/{s['method']}", "params": {}})),
        (A2C, _line({"id": 4, "result": {}})),
        (C2A, _line({"method": s["notification.method"], "params": {"sessionId": plain}})),
        (A2C, _update(plain, sessionUpdate=s["update_kind"])),
        (A2C, _line({"id": 9, "method": "fs/read_text_file", "params": {"sessionId": s["frames.session_id"]}})),
        (C2A, _line({"id": 5, "method": s["unanswered.method"], "params": {"sessionId": s["unanswered.sid"]}})),
    ]
    # Each entity id of session/update, on the recorder's fast path (a known session) and on its full path
    # (a session seen first here), and in a batch's members.
    fields = ["messageId", "toolCallId", "terminalId", "planId", "compactionId", "senderSessionId"]
    fields.append("recipientSessionId")
    for f in fields:
        out.append((A2C, _update(plain, sessionUpdate="tool_call", **{f: s[f"quick.{f}"]})))
        out.append((A2C, _update(f"new-{f}", sessionUpdate="tool_call", **{f: s[f"full.{f}"]})))
    batch = [
        {"jsonrpc": "2.0", "id": 6, "method": s["batch.method"], "params": {"sessionId": s["batch.sid"]}},
        {"jsonrpc": "2.0", "id": s["batch.id"], "method": "session/cancel", "params": {"sessionId": plain}},
        orjson.loads(_update(plain, sessionUpdate="tool_call", toolCallId=s["batch.toolCallId"])),
    ]
    out.append((C2A, orjson.dumps(batch) + b"\n"))
    return out


def test_no_column_keeps_a_secret_the_stored_frame_lost(tmp_path: Path) -> None:
    """Item 1: the recorder (its row builder, tracker and statements) indexes the frame it stores."""
    s = Planted()
    script = _derived_script(s)
    event = {"event": "http", "side": "agent", "method": "POST", "status": 200, "session": s["transport.session"]}
    script.append((NET, orjson.dumps({**event, "connection": s["transport.connection"]})))  # transport_events
    db = tmp_path / "rec.db"
    rec = _SyncRecorder(db, argv=["agent"], cwd="/", label=None, policy=Policy())
    rec._open()
    rec._process([(d, chunk, 1000.0 + i, i / 100) for i, (d, chunk) in enumerate(script)])
    rec.writer.finish({}, 0)  # the last row (unanswered requests, stderr tail), as close writes it
    assert _kept(db, s) == []
    # The rows are there, their columns from the redacted copies (not dropped, not emptied).
    got = dict(rows(db, "SELECT session_id, cwd FROM sessions WHERE cwd LIKE '/home/u/%'"))
    assert got == {f"sess-{PLACEHOLDER}": f"/home/u/{PLACEHOLDER}"}
    assert rows(db, "SELECT title FROM sessions WHERE title LIKE 'fix %'") == [(f"fix {PLACEHOLDER}",)]
    assert rows(db, "SELECT count(*) FROM frames WHERE tool_call_id = ?", PLACEHOLDER) == [(2,)]
    assert rows(db, "SELECT count(*) FROM batch_messages WHERE method = ?", PLACEHOLDER) == [(1,)]
    ((unanswered,),) = rows(db, "SELECT unanswered FROM connections")
    assert PLACEHOLDER in unanswered
    assert rows(db, "SELECT acp_session_id, status FROM transport_events") == [(PLACEHOLDER, 200)]


def test_the_issues_repro_through_run(tmp_path: Path) -> None:
    """Item 1 as filed, and item 2's frame: `run -- cat`, then the sessions and the frames."""
    db = tmp_path / "t.db"
    s = Planted()
    s["password"] = "pw-" + secrets.token_hex(6)  # no shape: only its key says it is a credential
    data = _line({"id": 1, "method": "session/load", "params": {"sessionId": "s1", "cwd": f"/home/u/{s['cwd']}"}})
    data += _line({"method": "foo", "params": {"password": s["password"], "nested": {"api_key": s["api_key"]}}})
    data += _line({"id": 2, "method": "foo/bar", "params": {"clientSecret": s["password"] + "-2"}})
    out = subprocess.run(relay_cmd(db, "cat"), input=data, capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == data  # the wire untouched
    assert rows(db, "SELECT cwd FROM sessions") == [(f"/home/u/{PLACEHOLDER}",)]
    assert _kept(db, s) == []
    assert rows(db, "SELECT count(*) FROM frames WHERE redacted > 0") == [(6,)]  # each frame, both ways


# ---- item 2: methods ACP does not define -------------------------------------------------------------------------
def test_any_methods_credential_keys_in_params_results_and_errors() -> None:
    pw = "pw-" + secrets.token_hex(8)
    cases: list[tuple[dict[str, Any], str | None]] = [
        ({"jsonrpc": "2.0", "method": "foo", "params": {"password": pw}}, None),
        ({"jsonrpc": "2.0", "id": 1, "method": "acme.check", "params": [{"x": {"passwd": pw}}]}, None),
        ({"jsonrpc": "2.0", "id": 1, "result": {"session": {"accessToken": pw}}}, "vendor/login"),
        ({"jsonrpc": "2.0", "id": 1, "result": {"refresh_token": pw}}, None),  # an answer to no known request
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "m", "data": {"apiKey": pw}}}, "session/new"),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "m", "data": {"secret": pw}}}, "foo"),
    ]
    for msg, answers in cases:
        raw = orjson.dumps(msg)
        for policy in (Policy(), Policy(regexes=["never-matches-[0-9]{40}"])):
            methods = (msg.get("method", answers),)
            assert policy.might_apply(raw, methods, msg), msg
            stored, n = redact_frame(raw, policy, answers, msg)
            assert n == 1 and pw.encode() not in stored, msg
    # ACP's own methods keep their content: a key named like a credential in a known result is content.
    result = {"jsonrpc": "2.0", "id": 1, "result": {"content": "x", "token": "visible"}}
    assert redact_frame(orjson.dumps(result), Policy(), "fs/read_text_file", result)[1] == 0


# ---- item 3: import derives its columns through the same policy as run ----------------------------------------------
def test_import_keeps_no_secret_in_any_derived_column(tmp_path: Path) -> None:
    s = Planted()
    s["_meta.apiKey"] = "k-" + secrets.token_hex(6)  # no shape: only its key says it is a credential
    script = _derived_script(s)
    info = {"name": s["client_info"], "_meta": {"apiKey": s["_meta.apiKey"]}}
    script[0] = (C2A, _line({"id": 0, "method": "initialize", "params": {"clientInfo": info}}))
    lines = [
        {"seq": i + 1, "ts": 1.0 + i, "direction": d, "raw": chunk[:-1].decode()} for i, (d, chunk) in enumerate(script)
    ]
    capture = tmp_path / "cap.ndjson"
    capture.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    db = tmp_path / "imp.db"
    cmd = [sys.executable, "-m", "acp_relay", "import", "--db", str(db), str(capture)]
    out = subprocess.run(cmd, capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert _kept(db, s) == []
    ((client_info,),) = rows(db, "SELECT client_info FROM connections")
    assert orjson.loads(client_info)["_meta"]["apiKey"] == PLACEHOLDER
    assert rows(db, "SELECT cwd FROM sessions WHERE cwd LIKE '/home/u/%'") == [(f"/home/u/{PLACEHOLDER}",)]


# ---- item 6: terminal-auth's login command is not a credential ----------------------------------------------------------
def _auth_methods(meta: dict[str, Any]) -> dict[str, Any]:
    method = {"id": "login", "name": "Log in", "_meta": meta}
    return {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "authMethods": [method]}}


def test_terminal_auth_command_is_kept_and_a_secret_inside_it_is_not() -> None:
    login = {"command": "/usr/local/bin/claude", "args": ["--login", "--region", "eu"], "label": "Claude login"}
    msg = _auth_methods({"terminal-auth": login})
    for answers in ("initialize", None):
        assert redact_frame(orjson.dumps(msg), Policy(), answers, msg) == (orjson.dumps(msg), 0)
    key = _FORMS[0]()
    pw = "pw-" + secrets.token_hex(6)
    env = [{"name": "HOME", "value": "/home/env-" + secrets.token_hex(4)}]
    bad = {**login, "args": ["--login", key, "--token", pw], "env": env, "password": pw}
    msg = _auth_methods({"terminal-auth": bad, "other-auth": {"command": "keep?", "args": ["x"]}})
    stored, n = redact_frame(orjson.dumps(msg), Policy(), "initialize", msg)
    got = orjson.loads(stored)["result"]["authMethods"][0]["_meta"]
    assert key.encode() not in stored and pw.encode() not in stored and env[0]["value"].encode() not in stored
    assert got["terminal-auth"]["command"] == login["command"] and got["terminal-auth"]["args"][0] == "--login"
    assert got["terminal-auth"]["label"] == login["label"]
    assert got["other-auth"] == {"command": PLACEHOLDER, "args": [PLACEHOLDER]}  # other *-auth keys: still secrets
    assert n == 6  # the key, --token's value, the env value, password, other-auth's two


def test_terminal_auth_through_run_is_stored_as_sent(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    msg = _auth_methods({"terminal-auth": {"command": "gemini", "args": ["auth", "login"], "label": "Gemini"}})
    data = orjson.dumps(msg) + b"\n"
    out = subprocess.run(relay_cmd(db, "cat"), input=data, capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert rows(db, "SELECT raw, redacted FROM frames") == [(data[:-1], 0)] * 2


# ---- item 1, the export: a recording made with --no-redact leaves it no column to copy as sent ---------------------
def test_an_export_of_a_no_redact_recording_keeps_no_column_as_sent(tmp_path: Path) -> None:
    s = Planted()
    db = tmp_path / "open.db"
    sid = f"sess-{s['session_id']}"
    data = _line({"id": 1, "method": "session/load", "params": {"sessionId": sid, "cwd": f"/home/u/{s['cwd']}"}})
    data += _update(sid, sessionUpdate="session_info_update", title=f"fix {s['title']}")
    data += _update(sid, sessionUpdate="tool_call", toolCallId=s["toolCallId"], messageId=s["messageId"])
    data += _line({"id": s["rpc_id"], "method": s["method"], "params": {"sessionId": sid}})
    data += _line({"id": 2, "method": "initialize", "params": {"clientInfo": {"name": s["client_info"]}}})
    data += orjson.dumps([orjson.loads(_update(sid, sessionUpdate=s["update_kind"]))]) + b"\n"
    cmd = [sys.executable, "-m", "acp_relay", "run", "--no-redact", "--db", str(db), "--", "cat"]
    out = subprocess.run(cmd, input=data, capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert _kept(db, s) == sorted(s)  # stored as sent: the user asked for it
    dest = tmp_path / "share" / "bug.db"
    dest.parent.mkdir()
    cmd = [sys.executable, "-m", "acp_relay", "export", "--db", str(db), "-c", "last", "-o", str(dest)]
    out = subprocess.run(cmd, capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert _kept(dest, s) == []
    assert rows(dest, "SELECT session_id, cwd, title FROM sessions") == [
        (f"sess-{PLACEHOLDER}", f"/home/u/{PLACEHOLDER}", f"fix {PLACEHOLDER}")
    ]
