"""`acp-relay run`'s options are one table (run/options.py): the click-free parser on the editor's start-up
path and click's declaration are both built from it, so they read a command line the same way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from acp_relay.run.cli import run
from acp_relay.run.options import OPTIONS, parse_fast


def test_click_declares_exactly_the_table() -> None:
    declared = [(p.opts[0], p.name) for p in run.params if p.name != "command"]
    assert declared == [(o.flag, o.dest) for o in OPTIONS]


@pytest.mark.parametrize(
    "args",
    [
        ["--", "agent"],
        [
            "--db",
            "x.db",
            "--label=L",
            "--redact",
            "a.b",
            "--redact=re:k",
            "--no-redact",
            "--otlp",
            "http://c",
            "--",
            "a",
        ],
        ["--label", "--", "--", "agent", "--db", "y"],  # a value may look like `--`; after it, the agent's own
    ],
)
def test_the_fast_parser_reads_what_click_reads(args: list[str]) -> None:
    parsed = parse_fast(args)
    assert parsed is not None
    values, command = parsed
    params = run.make_context("run", list(args)).params
    assert command == list(params["command"])
    for dest, value in values.items():
        assert value == (list(params[dest]) if isinstance(params[dest], tuple) else params[dest]), dest


@pytest.mark.parametrize(
    "args",
    [
        ["agent"],  # no `--`: click's
        ["--help"],
        [
            "--",
        ],
        ["--db"],
        ["--no-redact=1", "--", "agent"],
        ["--connect", "ws://h/acp"],  # not a fast option: click parses it
        ["--timeout", "5", "--", "agent"],
        ["--bogus", "--", "agent"],
    ],
)
def test_the_fast_parser_leaves_the_rest_to_click(args: list[str]) -> None:
    assert parse_fast(args) is None


def test_a_plain_run_never_imports_click(tmp_path: Path) -> None:
    """The start-up path stays without click (python -X importtime lists every module imported)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "acp_relay", "run", "--db", str(tmp_path / "r.db"), "--", "true"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    modules = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
    assert "acp_relay.run.options" in modules
    assert [m for m in modules if m.split(".")[0] == "click"] == []
