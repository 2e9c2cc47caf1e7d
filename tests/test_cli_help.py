"""`acp-relay --help` lists every command with a whole sentence: click cuts a docstring's first sentence
to fit (ending it in "..."), so each command states its own short summary."""

from __future__ import annotations

import re

import pytest
from support.cli import run

from acp_relay.cli import COMMANDS

ENTRY = re.compile(r"^  (\S+)\s{2,}(\S.*)$")


def summaries(*group: str, columns: str = "80") -> dict[str, str]:
    """The Commands section of `acp-relay [GROUP] --help`: name -> summary (a wrapped summary joined)."""
    r = run(*group, "--help", env={"COLUMNS": columns})
    assert r.exit_code == 0, r.stderr
    section = r.stdout.split("\nCommands:\n", 1)[1]
    found: dict[str, str] = {}
    for line in section.splitlines():
        m = ENTRY.match(line)
        if m:
            found[m[1]] = m[2]
        elif line.strip():  # a continuation line of the last summary
            last = next(reversed(found))
            found[last] += " " + line.strip()
    return found


@pytest.mark.parametrize("columns", ["80", "200"])
@pytest.mark.parametrize("group", [(), ("otel",)])
def test_every_summary_is_a_whole_sentence(group: tuple[str, ...], columns: str) -> None:
    found = summaries(*group, columns=columns)
    assert found
    for name, summary in found.items():
        assert not summary.endswith("..."), f"{name}: {summary!r} is cut"
        assert summary.endswith("."), f"{name}: {summary!r} does not end with a full stop"
        assert summary[0].isupper(), f"{name}: {summary!r}"


def test_the_help_lists_every_registered_command() -> None:
    assert sorted(summaries()) == sorted(COMMANDS)
