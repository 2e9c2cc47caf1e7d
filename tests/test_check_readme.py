"""The `acp-relay check` page's examples (docs/check.md), run: each `$ acp-relay check ...` line on the page
against the scripted fixture database (tests/fixtures/recordings.py), its output compared line for line."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.recordings import build
from helpers import doc_page


def examples() -> list[tuple[str, list[str]]]:
    """(command, expected output lines) of each `$ acp-relay check` line in the check page's blocks."""
    section = doc_page("check.md")
    out: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```\n(.*?)```", section, re.S):
        current: list[str] | None = None
        for line in block.splitlines():
            if line.startswith("$ "):
                current = []
                out.append((line[2:], current))
            elif current is not None:
                current.append(line)
    return [(cmd, lines) for cmd, lines in out if cmd.startswith("acp-relay check") and "demo" not in cmd]


def run(command: str, db: Path) -> list[str]:
    """One example: `acp-relay` is this checkout's CLI, fixtures.db the fixture database, `| grep -E RE` and
    `| tail -N` filter as the shell would."""
    cmd, *pipes = command.split(" | ")
    args = shlex.split(cmd)[1:]
    args = [str(db) if a == "fixtures.db" else a for a in args]
    done = subprocess.run([sys.executable, "-m", "acp_relay", *args], capture_output=True, text=True, timeout=60)
    lines = done.stdout.splitlines()
    for pipe in pipes:
        word = shlex.split(pipe)
        if word[:2] == ["grep", "-E"]:
            lines = [ln for ln in lines if re.search(word[2], ln)]
        elif word[0] == "tail":
            lines = lines[-int(word[1].lstrip("-")) :]
        else:
            raise AssertionError(f"example pipes into {pipe!r}")
    return lines


@pytest.fixture(scope="module")
def fixture_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("readme") / "fixtures.db")


def test_the_section_has_its_examples() -> None:
    commands = [cmd for cmd, _ in examples()]
    assert any("--all" in c for c in commands) and any("--coverage" in c for c in commands)


@pytest.mark.parametrize(("command", "expected"), examples(), ids=[c for c, _ in examples()])
def test_readme_check_example(command: str, expected: list[str], fixture_db: Path) -> None:
    assert run(command, fixture_db) == expected
