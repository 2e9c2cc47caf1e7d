"""Real traffic: the Python SDK's client and agent (tests/peers) through `acp-relay run`, then `check`.

The issue's bar: real peers check with no error, or each error is a real violation by that peer, named here
with the reason. These peers (agent-client-protocol 0.12, protocol v1) commit none: the whole connection,
its cancelled turn and its session/load replay included, checks clean.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
from helpers import relay_cmd
from peers.test_peers_direct import NOTES, SDK_AGENT, assert_scenario, run_client

# Errors these peers are known to commit, rule -> why it is a real violation by the peer (none so far).
KNOWN_PEER_VIOLATIONS: dict[str, str] = {}


def test_sdk_peers_check_clean(db: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text(NOTES)
    assert_scenario(run_client(relay_cmd(db, sys.executable, str(SDK_AGENT)), notes, tmp_path), NOTES)
    out = subprocess.run(
        [sys.executable, "-m", "acp_relay", "check", "--db", str(db), "--connection", "last", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    findings = [orjson.loads(line) for line in out.stdout.splitlines()]
    errors = [f for f in findings if f["severity"] == "error" and f["rule"] not in KNOWN_PEER_VIOLATIONS]
    assert not errors, errors
    assert out.returncode == (1 if any(f["severity"] == "error" for f in findings) else 0)
    assert not findings, findings  # not even a warning: unanswered requests, unknown methods...
    assert "in 31 frames checked" in out.stderr


# An agent with two real bugs: it prints a log line on stdout, and answers session/prompt (v1) with a stop
# reason the schema does not have.
SLOPPY_AGENT = r"""
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    def answer(result):
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
    if msg["method"] == "initialize":
        answer({"protocolVersion": 1, "agentCapabilities": {}, "agentInfo": {"name": "sloppy", "version": "0"}})
    elif msg["method"] == "session/new":
        print("INFO: session created")
        answer({"sessionId": "s-1"})
    elif msg["method"] == "session/prompt":
        answer({"stopReason": "done"})
    sys.stdout.flush()
"""


def test_ci_recipe_fails_the_build_on_an_error(tmp_path: Path) -> None:
    """The CI recipe of docs/ci.md: record a session through the relay, then `acp-relay check` fails the build.

    The scripted editor writes its requests without waiting for the answers, so it breaks rules of its own
    (session/new before initialize is answered, a prompt for a session not created yet): named below."""
    db = tmp_path / "ci.db"
    editor = b"".join(
        orjson.dumps(m) + b"\n"
        for m in (
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}},
            {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}},
            {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": "s-1", "prompt": []}},
        )
    )
    relay = subprocess.run(
        relay_cmd(db, sys.executable, "-c", SLOPPY_AGENT), input=editor, capture_output=True, timeout=60
    )
    assert relay.returncode == 0, relay.stderr
    # each of the two before the initialize answer is named (one finding per frame), then the unknown session
    editor_faults = ["protocol.initialize-first", "protocol.initialize-first", "protocol.unknown-session"]

    def check(*args: str) -> tuple[int, list[str], str]:
        out = subprocess.run(
            [sys.executable, "-m", "acp_relay", "check", "--db", str(db), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        findings = [line.split() for line in out.stdout.splitlines() if line[:1] == " " and line.split()[0].isdigit()]
        return out.returncode, [words[2] for words in findings], out.stdout

    code, rules, text = check("last")  # the session: its frames, the initialize exchange
    assert code == 1 and rules == [*editor_faults, "schema.result"], text
    assert '(got "done")' in text
    code, rules, text = check()  # the newest connection: also the log line that belongs to no session
    assert code == 1 and rules == [*editor_faults, "rpc.not-json", "schema.result"], text


def check_json(db: Path, *args: str) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-m", "acp_relay", "check", "--db", str(db), *args, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode in (0, 1), out.stderr
    return [orjson.loads(line) for line in out.stdout.splitlines()]


def test_sdk_client_against_replay_checks_without_errors(db: Path, tmp_path: Path) -> None:
    """The suite's other recorded conversation shape: the SDK client driving `acp-relay replay` of an SDK
    session (cancelled turn and session/load replay included), itself recorded through the relay."""
    notes = tmp_path / "notes.txt"
    notes.write_text(NOTES)
    assert_scenario(run_client(relay_cmd(db, sys.executable, str(SDK_AGENT)), notes, tmp_path), NOTES)
    again = tmp_path / "again.db"
    replay = [sys.executable, "-m", "acp_relay", "replay", "--db", str(db), "last", "--speed", "fast"]
    result = run_client(relay_cmd(again, *replay), notes, tmp_path)
    assert result["stop_reasons"] == ["end_turn", "cancelled"]
    errors = [f for f in check_json(again, "--all") if f["severity"] == "error"]
    assert not errors, errors


def test_demo_database_checks_without_findings(tmp_path: Path) -> None:
    """The demo of the README's "Try it", every connection of it (not only its session): not even a warning."""
    db = tmp_path / "demo.db"
    demo = subprocess.run([sys.executable, "-m", "acp_relay", "demo", "--db", str(db)], capture_output=True)
    assert demo.returncode == 0, demo.stderr
    assert check_json(db, "--all") == []
