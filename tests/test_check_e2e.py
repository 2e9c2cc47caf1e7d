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
