"""`acp-relay --help` lists every command with a whole sentence: click cuts a docstring's first sentence
to fit (ending it in "..."), so each command states its own short summary."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import click
import pytest
from support.cli import run

from acp_relay.cli import COMMANDS, cli

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


def test_the_registry_loads_a_command_only_when_it_is_asked_for() -> None:
    """`acp-relay --help` lists every command from the registry, importing none; `stats` imports stats'."""
    code = (
        "import sys\nfrom acp_relay.cli import cli\n"
        "def loaded():\n    return sorted(m for m in sys.modules if m.startswith('acp_relay.') and m.endswith('.cli'))\n"
        "for args in (['--help'], ['stats', '--help']):\n"
        "    cli.main(args, prog_name='acp-relay', standalone_mode=False)\n"
        "    print('loaded', loaded())\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    loaded = [line for line in proc.stdout.splitlines() if line.startswith("loaded ")]
    assert loaded == ["loaded ['acp_relay.cli']", "loaded ['acp_relay.cli', 'acp_relay.stats.cli']"]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_loaded_command_keeps_the_registry_summary(name: str) -> None:
    """Completion asks a loaded command for its summary: the same sentence --help lists."""
    command = cli.get_command(click.Context(cli), name)
    assert command is not None and command.get_short_help_str(200) == COMMANDS[name][1]


def test_completing_a_command_name_loads_no_command() -> None:
    """click's shell completion (zsh form: name and summary) of `acp-relay s<Tab>`, from the registry alone."""
    code = (
        "import sys\nfrom acp_relay.cli import cli\n"
        "try:\n    cli.main([], prog_name='acp-relay')\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('acp_relay.') and m.endswith('.cli')), file=sys.stderr)\n"
    )
    env = {**os.environ, "_ACP_RELAY_COMPLETE": "zsh_complete", "COMP_WORDS": "acp-relay s", "COMP_CWORD": "1"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert proc.stderr.strip() == "['acp_relay.cli']", proc.stderr
    lines = proc.stdout.splitlines()
    names = [n for n in COMMANDS if n.startswith("s")]
    assert lines == [x for n in names for x in ("plain", n, COMMANDS[n][1])]
