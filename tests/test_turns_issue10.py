"""Turn boundaries and views from the Prompt Lifecycle page (issue 10), over scripted databases."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from scripted_db import build_db, overlapping_prompts

from acp_relay.cli import cli


def run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_prompt_sent_while_running_ends_at_its_own_idle_in_transcript_and_stats(tmp_path: Path) -> None:
    db = str(build_db(tmp_path / "r.db", overlapping_prompts()))
    transcript = run("show", "s2", "--transcript", "--db", db)
    heads = [line for line in transcript.splitlines() if line.startswith("=== Turn")]
    assert heads == ["=== Turn 1 · 0.80s · end_turn ===", "=== Turn 2 · 2.00s · end_turn ==="]
    assert "first agent message after 0.30s" in transcript  # turn 1's "working"
    assert "first agent message after 1.50s" in transcript  # turn 2's "second", not turn 1's " done"
    assert "Agent: working done" in transcript and "Agent: second" in transcript
    turns = json.loads(run("stats", "s2", "--json", "--db", db))["turns"]
    assert [(t["duration_ms"], t["first_chunk_ms"], t["stop_reason"]) for t in turns] == [
        (800.0, 300.0, "end_turn"),
        (2000.0, 1500.0, "end_turn"),
    ]
