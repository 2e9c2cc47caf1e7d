"""`acp-relay info`: versions, both sides' capabilities, auth, modes, config, models, commands, extensions, counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import Result
from fixtures.recordings import BASE, j, text, upd
from support.cli import run as cli_run

from acp_relay.info.command import capability_matrix
from acp_relay.store import db as dbmod
from acp_relay.store.scripted import ConnectionWriter


def run(*args: str) -> Result:
    return cli_run("info", *args)


def info_json(db: Path, session: str) -> dict[str, Any]:
    r = run("--db", str(db), session, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def matrix(info: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {r["capability"]: (r["editor"], r["agent"]) for r in info["capabilities"]}


def test_v1_recording(fixture_db: Path) -> None:
    info = info_json(fixture_db, "sess-v1-alpha")
    assert info["protocol_version"] == 1
    assert info["client"]["name"] == "zed" and info["agent"] == {"name": "fixture-agent", "version": "1.2.3"}
    m = matrix(info)
    assert m["fs read"] == (True, None) and m["fs write"] == (True, None) and m["terminal"] == (True, None)
    assert m["session load"] == (None, True) and m["prompt image"] == (None, False) and m["mcp http"] == (None, False)
    assert m["session fork"] == (None, False) and "mcp stdio" not in m  # v1 has no stdio marker: always there
    assert info["commands"] == ["test", "plan"]
    assert info["current_mode"] is None  # set_mode was refused (method not found)
    assert info["counts"] == {"turns": 2, "tool_calls": 1, "permissions": 2, "errors": 1}
    text_out = run("--db", str(fixture_db), "sess-v1")
    assert text_out.exit_code == 0
    lines = text_out.output.splitlines()
    assert lines[0].startswith("session   sess-v1-alpha  (connection 1)")
    assert any(line.split() == ["fs", "read", "yes"] for line in lines)
    assert "counts           2 turns, 1 tool call, 2 permissions, 1 error" in lines


def test_v2_recording(fixture_db: Path) -> None:
    info = info_json(fixture_db, "sess-v2-beta")
    assert info["protocol_version"] == 2 and info["agent"]["name"] == "draft-agent"
    m = matrix(info)
    assert "fs read" not in m  # v2 clients have no fs/terminal capabilities
    assert m["session list"] == (None, True) and m["session resume"] == (None, True)  # `session` commits to both
    assert m["mcp stdio"] == (None, False) and m["session fork"] == (None, False)
    assert info["extension_variants"] == ["_zed_custom"]
    assert info["counts"]["turns"] == 1 and info["counts"]["errors"] == 1  # the error inside the batch
    assert info["counts"]["tool_calls"] == 1


def test_everything_an_agent_can_declare(tmp_path: Path) -> None:
    path = tmp_path / "rich.db"
    conn = dbmod.connect(path)
    conn.execute("BEGIN")
    w = ConnectionWriter(conn, started_at=BASE, argv=["rich-agent"])
    client_caps = {"fs": {"readTextFile": True, "writeTextFile": False}, "terminal": False, "auth": {"terminal": True}}
    init = {
        "protocolVersion": 1,
        "clientCapabilities": client_caps,
        "clientInfo": {"name": "jetbrains", "version": "2026.1"},
    }
    w.feed("c2a", j(id=0, method="initialize", params=init, _meta={"traceparent": "00-abc"}), 0.0)
    agent_caps = {
        "loadSession": True,
        "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
        "mcpCapabilities": {"http": True, "sse": False},
        "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "fork": {}},
        "auth": {"logout": {}},
        "_meta": {"zed.dev": {"x": 1}},
    }
    auth = [{"id": "oauth", "name": "Log in"}, {"id": "key", "name": "API key", "type": "terminal"}]
    w.feed("a2c", j(id=0, result={"protocolVersion": 1, "agentCapabilities": agent_caps, "authMethods": auth}), 0.1)
    result = {
        "sessionId": "rich",
        "modes": {
            "currentModeId": "ask",
            "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}],
        },
        "models": {"currentModelId": "m-small", "availableModels": [{"modelId": "m-small"}, {"modelId": "m-large"}]},
        "configOptions": [{"id": "effort", "name": "Effort", "type": "select", "currentValue": "low", "options": []}],
    }
    w.feed("c2a", j(id=1, method="session/new", params={"cwd": "/", "mcpServers": []}), 0.2)
    w.feed("a2c", j(id=1, result=result), 0.3)
    w.feed("c2a", j(id=2, method="session/set_model", params={"sessionId": "rich", "modelId": "m-large"}), 0.4)
    w.feed("a2c", j(id=2, result={}), 0.5)
    w.feed("a2c", upd("rich", sessionUpdate="current_mode_update", currentModeId="code"), 0.6)
    w.feed(
        "a2c", j(method="_rich/status", params={"sessionId": "rich", "busy": True}, type="jetbrains.Notification"), 0.7
    )
    w.feed("c2a", j(id=3, method="session/prompt", params={"sessionId": "rich", "prompt": [text("hi")]}), 0.8)
    w.feed("a2c", upd("rich", sessionUpdate="tool_call", toolCallId="a", title="A", _meta={"claudeCode": {}}), 0.9)
    w.feed("a2c", upd("rich", sessionUpdate="tool_call_update", toolCallId="a", status="completed"), 1.0)
    w.feed("a2c", upd("rich", sessionUpdate="tool_call", toolCallId="b", title="B"), 1.1)
    w.feed("a2c", j(id=3, result={"stopReason": "end_turn"}), 1.2)
    w.close(ended_mono=2.0)
    conn.execute("COMMIT")
    conn.close()
    info = info_json(path, "rich")
    m = matrix(info)
    assert m["fs read"] == (True, None) and m["fs write"] == (False, None) and m["auth: terminal login"] == (True, None)
    assert m["prompt image"] == (None, True) and m["prompt audio"] == (None, False)
    assert m["prompt embedded context"] == (None, True) and m["mcp http"] == (None, True)
    assert all(m[k] == (None, True) for k in ("session list", "session resume", "session close", "session fork"))
    assert m["session delete"] == (None, False) and m["auth: logout"] == (None, True)
    assert [a["id"] for a in info["auth_methods"]] == ["oauth", "key"]
    assert info["current_mode"] == "code" and [x["id"] for x in info["modes"]] == ["ask", "code"]
    assert info["current_model"] == "m-large" and len(info["models"]) == 2
    assert info["config_options"][0]["id"] == "effort"
    assert info["meta_keys"] == ["claudeCode", "traceparent", "zed.dev"]
    assert info["extension_methods"] == ["_rich/status"]
    assert info["extra_members"] == ["_meta", "type"]  # beside jsonrpc, id, method, params, result, error
    assert info["counts"] == {"turns": 1, "tool_calls": 2, "permissions": 0, "errors": 0}
    out = run("--db", str(path), "rich").output
    assert "auth methods     oauth, key" in out and "mode             code  (available: ask, code)" in out
    assert "config options   effort=low" in out and "model            m-large  (available: m-small, m-large)" in out


def test_no_initialize_and_unknown_session(fixture_db: Path) -> None:
    assert capability_matrix(1, None, None)[0] == {"capability": "fs read", "editor": False, "agent": None}
    r = run("--db", str(fixture_db), "nope")
    assert r.exit_code == 2 and "no session matches" in r.output
