"""`acp-relay stats`'s click declaration: the data is stats/command.py's `compute`, the output its renderers."""

from __future__ import annotations

import sys

import click

from ..cli_support import address_options, color_option, db_option, guard_stdout, json_option, read_db


@click.command()
@address_options()
@db_option
@json_option("The numbers as one JSON object on one line.")
@color_option("Bold headings on a terminal only; NO_COLOR turns it off.")
def stats(session: str | None, db: str | None, connection: str | None, as_json: bool, color: str) -> None:
    """Counts, latencies, turn durations and bytes: for SESSION, a connection, or the whole database.

    \b
    Example:  acp-relay stats last
    """
    from ..render.text import Style
    from .command import compute, render, render_json

    conn = read_db(db)

    def report() -> int:
        st = compute(conn, session, connection)
        if as_json:
            render_json(st, sys.stdout.buffer)
        else:
            render(st, sys.stdout.buffer, Style.detect(sys.stdout, color))
        return 0

    sys.exit(guard_stdout(report))
