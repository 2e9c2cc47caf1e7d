"""tools/test's exit status is the suite's and the lint's, nothing else (CI runs it; a status of 1 after a
passing suite and lint once kept a whole submission from landing)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _stub(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/usr/bin/env bash\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _tree(tmp_path: Path) -> Path:
    """A copy of tools/test beside stubs: set-up and lint scripts, and a python whose pytest run exits
    with $SUITE_STATUS (compileall exits 0)."""
    (tmp_path / "tools").mkdir()
    shutil.copy(ROOT / "tools" / "test", tmp_path / "tools" / "test")
    _stub(tmp_path / "tools" / "venv", "exit 0")
    _stub(tmp_path / "tools" / "lint", 'echo lint-ran; exit "${LINT_STATUS:-0}"')
    _stub(
        tmp_path / ".venv" / "bin" / "python",
        'if [ "$2" = compileall ]; then exit 0; fi; echo suite-ran; exit "${SUITE_STATUS:-0}"',
    )
    return tmp_path


@pytest.mark.parametrize(
    ("suite", "lint", "expected"),
    [(0, 0, 0), (1, 0, 1), (0, 1, 1), (2, 1, 2), (5, 0, 5)],
)
def test_status_is_the_suites_then_the_lints(tmp_path: Path, suite: int, lint: int, expected: int) -> None:
    tree = _tree(tmp_path)
    env = {**os.environ, "SUITE_STATUS": str(suite), "LINT_STATUS": str(lint)}
    done = subprocess.run(["bash", str(tree / "tools" / "test")], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == expected, done.stderr
    assert "suite-ran" in done.stdout and "lint-ran" in done.stdout
    assert ("the lint or type check failed" in done.stderr) == bool(lint)
