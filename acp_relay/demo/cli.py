"""`acp-relay demo`'s click declaration: demo/command.py plays the scripted peers through `acp-relay run`."""

from __future__ import annotations

import os
import sys

import click

from ..cli_support import db_option
from ..store.db import resolve_db_path


@click.command()
@db_option
def demo(db: str | None) -> None:
    """Run a scripted demo agent and client through the relay, then print what was recorded."""
    from .command import run_demo

    path = resolve_db_path(db)
    status = run_demo(path)
    sys.exit(status or _print_recording(path))


def _print_recording(db_path: os.PathLike[str]) -> int:
    """What a user would type next after the demo: the session list, the session's frames, its transcript."""
    root = click.get_current_context().find_root().command
    for title, args in (
        ("$ acp-relay show", []),
        ("$ acp-relay show last", ["last"]),
        ("$ acp-relay show last --transcript", ["last", "--transcript"]),
    ):
        print(title, flush=True)
        try:  # through the group the demo runs under, as if typed: `show`'s diagnostics name `show`
            root.main(["show", "--db", str(db_path), *args], prog_name="acp-relay", standalone_mode=False)
        except SystemExit as exc:
            if exc.code:
                return int(exc.code)
        print(flush=True)
    return 0
