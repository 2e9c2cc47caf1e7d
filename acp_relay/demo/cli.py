"""`acp-relay demo`'s click declaration: demo/command.py plays the scripted peers through `acp-relay run`."""

from __future__ import annotations

import os
import sys

import click

from ..cli_support import color_option, db_option
from ..store.db import resolve_db_path


@click.command()
@db_option
@color_option("Color what it prints (show's output) on a terminal only; NO_COLOR turns it off.")
def demo(db: str | None, color: str) -> None:
    """Run a scripted demo agent and client through the relay, then print what was recorded."""
    from .command import run_demo

    path = resolve_db_path(db)
    status = run_demo(path)
    sys.exit(status or _print_recording(path, color))


def _print_recording(db_path: os.PathLike[str], color: str = "auto") -> int:
    """What a user would type next after the demo: the session list, the session's frames, its transcript."""
    root = click.get_current_context().find_root().command
    for title, args in (
        ("$ acp-relay show", []),
        ("$ acp-relay show last", ["last"]),
        ("$ acp-relay show last --transcript", ["last", "--transcript"]),
    ):
        print(title, flush=True)
        try:  # through the group the demo runs under, as if typed: `show`'s diagnostics name `show`
            root.main(
                ["show", "--db", str(db_path), "--color", color, *args], prog_name="acp-relay", standalone_mode=False
            )
        except SystemExit as exc:
            if exc.code:
                return int(exc.code)
        print(flush=True)
    return 0
