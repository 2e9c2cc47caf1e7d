"""`acp-relay diff`'s click declaration; the comparison is diff/command.py's (protocol/diff folds)."""

from __future__ import annotations

import sys

import click

from ..cli_support import db_option, guard_stdout, note
from ..store.db import resolve_db_path


@click.command(context_settings={"max_content_width": 110})
@click.argument("a")
@click.argument("b")
@db_option
@click.option("--db-b", type=click.Path(dir_okay=False), help="Take B from this database file.")
@click.option(
    "--ignore",
    multiple=True,
    metavar="LAYER",
    help="conversation, protocol, metadata, timing, or a part of the conversation: thoughts, tools, plans, "
    "permissions (repeat or comma-separate).",
)
@click.option(
    "--max-slowdown",
    type=float,
    metavar="FACTOR",
    help="Timing differs when B is more than FACTOR times slower than A (a turn or a method's p50/p95).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object with a key per layer.")
def diff(
    a: str, b: str, db: str | None, db_b: str | None, ignore: tuple[str, ...], max_slowdown: float | None, as_json: bool
) -> None:
    """Compare two recorded sessions: conversation, protocol, metadata and timing, in that order.

    \b
    A and B: session ids, unique prefixes, `last`, or ID@N (`last@N`: the newest session of connection N).
    Exit status: 0 the same, 1 they differ, 2 usage error (A and B the same session too).
    Timing differs only with --max-slowdown.
    Example:  acp-relay diff last@2 last --ignore thoughts
    """
    from .command import run_diff

    path = resolve_db_path(db)
    path_b = resolve_db_path(db_b) if db_b else None

    def diff_them() -> int:
        return run_diff(
            path, a, b, sys.stdout, db_b=path_b, ignore=ignore, max_slowdown=max_slowdown, as_json=as_json, warn=note
        )

    sys.exit(guard_stdout(diff_them))
