"""The one way tests run a command in-process: `acp-relay ARGS` through click's CliRunner, with stdout and
stderr apart (the diagnostics contract is about which one a line goes to)."""

from __future__ import annotations

from dataclasses import dataclass

from click.testing import CliRunner

from acp_relay.cli import cli


@dataclass
class Ran:
    status: int
    stdout: str
    stderr: str
    stdout_bytes: bytes


def run(*args: str, input: bytes | str | None = None, env: dict[str, str] | None = None) -> Ran:
    """`acp-relay ARGS...` in this process; a crash inside a command is re-raised, never taken for a status."""
    result = CliRunner().invoke(cli, list(args), input=input, env=env, catch_exceptions=False)
    return Ran(result.exit_code, result.stdout, result.stderr, result.stdout_bytes)
