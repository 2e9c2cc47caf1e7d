"""`acp-relay info`'s click declaration: info/command.py's `compute` gathers what the peers said, its
renderers print it."""

from __future__ import annotations

import sys

import click

from ..cli_support import address_options, color_option, db_option, guard_stdout, json_option, read_db


@click.command()
@address_options()
@db_option
@json_option("Everything as one JSON object.")
@color_option("Bold headings on a terminal only; NO_COLOR turns it off.")
def info(session: str | None, connection: int | str | None, db: str | None, as_json: bool, color: str) -> None:
    """What SESSION's peers said about themselves: versions, capabilities both sides, auth methods, modes,
    config options and models, commands, extensions seen, and counts.

    \b
    Example:  acp-relay info last
    """
    from ..render.text import Style
    from .command import compute, render, render_json

    conn = read_db(db)

    def report() -> int:
        found = compute(conn, session, connection)
        if as_json:
            render_json(found, sys.stdout.buffer)
        else:
            render(found, sys.stdout.buffer, Style.detect(sys.stdout, color))
        return 0

    sys.exit(guard_stdout(report))
