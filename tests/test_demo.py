"""The README's first command: the demo records a real conversation and shows it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import rows


def test_demo_records_and_shows(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    out = subprocess.run(
        [sys.executable, "-m", "acp_relay", "demo", "--db", str(db)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "demo-session-1" in out.stdout
    assert "Agent: The file has 3 lines." in out.stdout
    assert "result of session/prompt" in out.stdout
    assert rows(db, "SELECT count(*), count(DISTINCT session_id) FROM frames WHERE session_id IS NOT NULL") == [(14, 1)]
    assert rows(db, "SELECT label, exit_code, protocol_version FROM connections") == [("demo", 0, 1)]
