"""`acp-relay search`'s click declaration; search/command.py's `compute` brings the index up to date and
finds the hits, its renderers print them."""

from __future__ import annotations

import sys

import click

from ..cli_support import color_option, connection_option, db_option, guard_stdout, json_option, open_existing


@click.command()
@click.argument("pattern")
@db_option
@click.option("--session", "-s", metavar="SESSION", help="Only this session (an id, a prefix, `last`, ID@N).")
@connection_option("Only this connection (or --session within it).")
@click.option("--method", "-m", "method", metavar="GLOB", help="Only frames whose method matches GLOB.")
@click.option("--limit", "-n", type=click.IntRange(min=1), metavar="N", help="The first N matches.")
@json_option("One JSON object per matching frame.")
@color_option("Highlight matches on a terminal only; NO_COLOR turns it off.")
def search(
    pattern: str,
    db: str | None,
    session: str | None,
    connection: int | str | None,
    method: str | None,
    limit: int | None,
    as_json: bool,
    color: str,
) -> None:
    """Full-text search over what people read: prompts, agent messages and thoughts, tool calls, plans,
    terminal output and error messages, in every recorded session.

    \b
    PATTERN is words (all must match), "a phrase", prefix*, or SQLite FTS5 syntax (a OR b, NOT c).
    The index is brought up to date first, so the first search of a big database takes a while.
    Exit 0 when something matched, 1 when nothing did, 2 on errors.
    Example:  acp-relay search 'failing test' --session last
    """
    from ..render.text import Style
    from .command import compute, render, render_json

    conn = open_existing(db)  # writable: search brings its index up to date first; it never creates one

    def report() -> int:
        try:
            hits = compute(conn, pattern, session=session, connection=connection, method=method, limit=limit)
            out = sys.stdout.buffer
            matched = render_json(hits, out) if as_json else render(hits, out, Style.detect(sys.stdout, color))
            return 0 if matched else 1
        finally:
            conn.close()

    sys.exit(guard_stdout(report))
