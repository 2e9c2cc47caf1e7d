"""Redaction: the stored copy loses the secrets, the wire keeps every byte."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import relay_cmd, rows

from acp_relay.protocol.redact import PLACEHOLDER, Policy

NEW: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "session/new",
    "params": {
        "cwd": "/p",
        "mcpServers": [
            {"name": "gh", "command": "gh-mcp", "args": [], "env": [{"name": "GITHUB_TOKEN", "value": "ghp_secret"}]},
            {
                "type": "http",
                "name": "api",
                "url": "https://x",
                "headers": [{"name": "Authorization", "value": "Bearer abc"}],
            },
        ],
    },
}


def test_mcp_env_and_header_values() -> None:
    out, changed = Policy().apply(NEW)
    assert changed
    servers = out["params"]["mcpServers"]
    assert servers[0]["env"] == [{"name": "GITHUB_TOKEN", "value": PLACEHOLDER}]
    assert servers[1]["headers"] == [{"name": "Authorization", "value": PLACEHOLDER}]
    assert servers[1]["url"] == "https://x" and NEW["params"]["mcpServers"][0]["env"][0]["value"] == "ghp_secret"


@pytest.mark.parametrize("method", ["authenticate", "auth/login"])
def test_auth_params_except_method_id(method: str) -> None:
    msg = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": method,
        "params": {"methodId": "api-key", "apiKey": "sk-1", "x": {"y": 1}},
    }
    out, changed = Policy().apply(msg)
    # every value but methodId; an object keeps its keys (the shape of what was sent stays readable)
    assert changed == 2 and out["params"] == {"methodId": "api-key", "apiKey": PLACEHOLDER, "x": {"y": PLACEHOLDER}}


@pytest.mark.parametrize(
    "key", ["token", "Access-Token", "client_secret", "PASSWORD", "authorization", "api-key", "ApiKey", "x.api_key"]
)
def test_credential_like_meta_keys(key: str) -> None:
    msg = {
        "jsonrpc": "2.0",
        "method": "x",
        "params": {"_meta": {key: "s3cret", "traceparent": "00-ab", "inputTokens": 5}},
    }
    out, changed = Policy().apply(msg)
    assert changed
    assert out["params"]["_meta"] == {key: PLACEHOLDER, "traceparent": "00-ab", "inputTokens": 5}


def test_nothing_to_redact_is_untouched_and_cheap_to_rule_out() -> None:
    msg = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {"token": "visible"}}}
    assert Policy().apply(msg) == (msg, False)  # "token" outside _meta is content, not a credential
    assert not Policy().might_apply(orjson.dumps(msg))


def test_user_paths_and_regexes() -> None:
    policy = Policy.from_options(("params.prompt.*.text", r"re:sk-[A-Za-z0-9]+"), False)
    msg = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "session/prompt",
        "params": {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}], "note": "key sk-abc123 here"},
    }
    out, changed = policy.apply(msg)
    assert changed and out["params"]["prompt"] == [{"type": "text", "text": PLACEHOLDER}]
    assert out["params"]["note"] == f"key {PLACEHOLDER} here"
    assert Policy.from_options((), True).apply(NEW) == (NEW, False)


def test_batches_are_redacted_member_by_member() -> None:
    out, changed = Policy().apply([NEW, {"jsonrpc": "2.0", "method": "x"}])
    assert changed and out[1] == {"jsonrpc": "2.0", "method": "x"}
    assert out[0]["params"]["mcpServers"][0]["env"][0]["value"] == PLACEHOLDER


def test_through_the_relay_the_wire_is_exact_and_the_store_is_redacted(db: Path) -> None:
    line = orjson.dumps(NEW) + b"\n"
    out = subprocess.run(relay_cmd(db, "cat"), input=line, capture_output=True, timeout=30)
    assert out.stdout == line and out.stderr == b""
    stored = rows(db, "SELECT raw, redacted, kind, method FROM frames ORDER BY seq")
    assert len(stored) == 2
    for raw, redacted, kind, method in stored:
        assert redacted == 2 and (kind, method) == ("request", "session/new")  # values: an env's, a header's
        assert b"ghp_secret" not in raw and b"Bearer abc" not in raw
        assert orjson.loads(raw)["params"]["cwd"] == "/p"  # still valid JSON
    ((policy,),) = rows(db, "SELECT redaction FROM connections")
    assert orjson.loads(policy)["enabled"] is True


def test_no_redact_says_so_and_stores_everything(db: Path) -> None:
    line = orjson.dumps(NEW) + b"\n"
    cmd = [sys.executable, "-m", "acp_relay", "run", "--db", str(db), "--no-redact", "--", "cat"]
    out = subprocess.run(cmd, input=line, capture_output=True, timeout=30)
    assert out.stdout == line
    assert b"--no-redact" in out.stderr and out.stderr.count(b"\n") == 1
    assert rows(db, "SELECT raw, redacted FROM frames WHERE direction = 'c2a'") == [(line[:-1], 0)]
    assert orjson.loads(rows(db, "SELECT redaction FROM connections")[0][0]) == {"enabled": False}


def test_might_apply_one_is_might_apply_of_one_method() -> None:
    frames = [b'{"method":"session/update","params":{"_meta":{"token":"x"}}}', b'{"method":"x"}', b"\xff"]
    methods = ["session/update", "session/new", "authenticate", "auth/login", "x", ""]
    for policy in (Policy(), Policy(enabled=False), Policy(paths=["a.b"]), Policy(regexes=["sk-"])):
        for raw in frames:
            for method in methods:
                assert policy.might_apply_one(raw, method) == policy.might_apply(raw, (method,))


def test_a_big_frames_meta_is_found_by_its_keys_and_only_there() -> None:
    policy = Policy()
    pad = "A" * 20000
    deep = {"method": "session/update", "params": {"update": {"content": [{"text": pad, "_meta": {"apiKey": "k"}}]}}}
    in_text = {"method": "session/update", "params": {"update": {"content": {"text": pad + ' "_meta": '}}}}
    for msg, found in ((deep, True), (in_text, False)):
        raw = orjson.dumps(msg)
        assert policy.might_apply_one(raw, "session/update", msg) is found
        assert policy.might_apply(raw, ("session/update",), msg) is found
        assert policy.might_apply_one(raw, "session/update")  # without the parsed message: the byte scan
        assert bool(policy.apply(msg)[1]) is found  # what the scan would have led to, had it run
    # (an ACP method: one ACP does not define is walked by key name whatever its keys, issue 30 item 2)
    m = "session/update"
    headers = {"method": m, "params": {"text": pad, "server": {"headers": {"X-Key": "k"}}}}
    assert policy.might_apply_one(orjson.dumps(headers), m, headers) and policy.apply(headers)[1]
    many = {"method": m, "params": {"items": [{"k": i} for i in range(2000)], "pad": pad}}
    raw = orjson.dumps(many)
    assert not policy.might_apply_one(raw, m, many)  # past the walk's budget: scanned, and no _meta
    assert policy.might_apply_one(raw.replace(b'"pad"', b'"_meta"'), m, {**many, "_meta": pad})


# ---- issue 10: header values anywhere (JetBrains puts a gateway token in initialize _meta) -----------------
JETBRAINS_INIT = {
    "type": "com.agentclientprotocol.rpc.JsonRpcRequest",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": True}},
        "_meta": {
            "proxyConfig": {
                "proxies": [
                    {
                        "id": "gw",
                        "proxy": {
                            "url": "https://gateway.example",
                            "headers": {"proxy_key": "jb-gateway-SECRET-1", "X-Client": "webstorm"},
                        },
                    }
                ]
            }
        },
    },
    "jsonrpc": "2.0",
}


def test_header_values_under_any_headers_object_are_redacted() -> None:
    assert Policy().might_apply(orjson.dumps(JETBRAINS_INIT), ("initialize",))
    out, changed = Policy().apply(JETBRAINS_INIT)
    assert changed
    proxy = out["params"]["_meta"]["proxyConfig"]["proxies"][0]["proxy"]
    assert proxy["headers"] == {"proxy_key": PLACEHOLDER, "X-Client": PLACEHOLDER}
    assert proxy["url"] == "https://gateway.example" and out["type"] == JETBRAINS_INIT["type"]
    assert list(out) == list(JETBRAINS_INIT)  # key order kept: jsonrpc stays last
    # list-shaped headers outside mcpServers, in a request that is not a session method
    msg = {"jsonrpc": "2.0", "id": 3, "method": "x/connect", "params": {"headers": [{"name": "A", "value": "v1"}]}}
    assert Policy().apply(msg)[0]["params"]["headers"] == [{"name": "A", "value": PLACEHOLDER}]


@pytest.mark.parametrize(
    "name", ["proxy_key", "Authorization", "x-api-key", "api-key", "Cookie", "gh_token", "clientSecret"]
)
def test_credential_like_header_names_anywhere_in_meta(name: str) -> None:
    msg = {"jsonrpc": "2.0", "method": "x", "params": {"_meta": {"gateway": {name: "s3cr3t", "region": "eu"}}}}
    out, changed = Policy().apply(msg)
    assert changed and out["params"]["_meta"]["gateway"] == {name: PLACEHOLDER, "region": "eu"}


def test_a_redacted_copy_keeps_integers_beyond_64_bits_exact() -> None:
    """Issue 10 item 10: the stored copy is re-serialized when redacted; its numbers must stay as sent."""
    from acp_relay.protocol.tracker import Tracker

    line = b'{"jsonrpc":"2.0","id":5,"method":"x","params":{"n":12345678901234567890123,'
    line += b'"_meta":{"apiKey":"k-1"}}}\n'
    (frame,) = Tracker(Policy()).feed("c2a", line, 0.0, 0.0)  # redacted before it is indexed
    assert frame.redacted and b"k-1" not in frame.raw
    assert b'"n":12345678901234567890123' in frame.raw and b"e+22" not in frame.raw


def test_might_apply_without_keys_is_might_apply_one_of_bytes_without_them() -> None:
    raw = b'{"jsonrpc":"2.0","method":"m","params":{"x":1}}'
    for policy in (Policy(), Policy(enabled=False), Policy(paths=["params.x"]), Policy(regexes=["sk-"])):
        for method in ("session/update", "session/new", "authenticate", "x"):
            assert policy.might_apply_without_keys(method) == policy.might_apply_one(raw, method)


def test_keys_spelled_with_json_escapes_are_still_redacted(db: Path) -> None:
    r"""`"\u005fmeta"` and `"h\u0065aders"` are `_meta` and `headers` to every JSON reader: the byte pre-checks
    must not rule such frames out (flood notifications, small frames of a clean chunk, and big frames)."""
    note = (
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":'
        b'"agent_message_chunk","content":{"type":"text","text":"hi"}},"\\u005fmeta":{"authorization":"esc-tok-1"}}}'
    )
    hdr = b'{"jsonrpc":"2.0","id":3,"method":"x/y","params":{"h\\u0065aders":{"X-Plain":"esc-tok-2"}}}'
    plain = [
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":'
        b'"agent_message_chunk","content":{"type":"text","text":"filler %d"}}}}' % i
        for i in range(40)
    ]
    big = note.replace(b'"hi"', b'"' + b"x" * (1 << 17) + b'"')
    data = b"\n".join([*plain[:20], note, *plain[20:], hdr, big]) + b"\n"
    out = subprocess.run(relay_cmd(db, "cat"), input=data, capture_output=True, timeout=60)
    assert out.stdout == data
    for path in (p for p in db.parent.iterdir() if p.is_file()):
        body = path.read_bytes()
        assert b"esc-tok-1" not in body and b"esc-tok-2" not in body, path.name
    assert [r for (r,) in rows(db, "SELECT count(*) FROM frames WHERE redacted = 1")] == [6]  # 3 each way
    assert Policy().might_apply_one(note, "session/update") and Policy().might_apply(hdr)


@pytest.mark.parametrize("method", [{"a": 1}, ["authenticate"], 7, None])
def test_a_method_that_is_not_a_string_is_redacted_not_a_crash(method: Any) -> None:
    """Found by the span mapping's fuzz target: `"method": {}` made the built-in rules raise TypeError
    (a dict is not hashable), so exporting such a frame failed."""
    msg = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"_meta": {"api_key": "s3cr3t"}}}
    out, changed = Policy().apply(msg)
    assert changed and out["params"]["_meta"]["api_key"] == PLACEHOLDER and out["method"] == method
