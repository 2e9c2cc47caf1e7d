"""Golden output of `acp-relay show` and `acp-relay stats` on the scripted fixture recordings.

The fixtures (tests/fixtures/recordings.py) run fixed byte streams through the real Tracker into the real
schema, so these files change only when what show prints changes. Regenerate after an intended change:
    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_show_golden.py
"""

from __future__ import annotations

import difflib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import run as cli_run

GOLDEN = Path(__file__).resolve().parent / "golden"


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Start times print in local time: pin the zone so the files hold the same text everywhere."""
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.delenv("NO_COLOR", raising=False)
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def run(db: Path, *args: str) -> bytes:
    result = cli_run(*args, "--db", str(db))
    assert result.exit_code == 0, result.output
    return result.stdout_bytes


def check(name: str, output: bytes) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_bytes(output)
        return
    expected = path.read_bytes()
    if output != expected:
        diff = difflib.unified_diff(
            expected.decode("utf-8", "replace").splitlines(),
            output.decode("utf-8", "replace").splitlines(),
            "expected",
            "got",
            lineterm="",
        )
        pytest.fail(f"{name} differs from the golden file:\n" + "\n".join(diff))


CASES = {
    "list.txt": ["show"],
    "list.jsonl": ["show", "--json"],
    "v1_session.txt": ["show", "sess-v1-alpha"],
    "v2_session.txt": ["show", "sess-v2-beta"],
    "v1_connection.txt": ["show", "--connection", "1"],
    "crash_connection.txt": ["show", "--connection", "3"],
    "v2_session.jsonl": ["show", "sess-v2-beta", "--json"],
    "v1_session.raw": ["show", "sess-v1-alpha", "--raw"],
    "v2_connection.raw": ["show", "--connection", "2", "--raw"],
    "frame_error.txt": ["show", "--frame", "23"],
    "frame_batch.txt": ["show", "--frame", "59"],
    "frame_batch.jsonl": ["show", "--frame", "58", "--json"],
    "v1_errors.txt": ["show", "sess-v1-alpha", "--errors"],
    "v1_transcript.txt": ["show", "sess-v1-alpha", "--transcript"],
    "v2_transcript.txt": ["show", "sess-v2-beta", "--transcript"],
    "v1_stats.txt": ["stats", "sess-v1-alpha"],
    "v2_stats.txt": ["stats", "sess-v2-beta"],
    "all_stats.txt": ["stats"],
    "v2_stats.json": ["stats", "sess-v2-beta", "--json"],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(fixture_db: Path, name: str) -> None:
    check(name, run(fixture_db, *CASES[name]))
