"""`acp-relay stats`'s click declaration: compute_stats (the data) and render_stats are in stats/command.py."""

from __future__ import annotations

import sys

import click

from ..cli_support import address_options, db_option, guard_stdout, json_option, read_db


@click.command()
@address_options()
@db_option
@json_option("The numbers as one JSON object on one line.")
def stats(session: str | None, db: str | None, connection: str | None, as_json: bool) -> None:
    """Counts, latencies, turn durations and bytes: for SESSION, a connection, or the whole database.

    \b
    Example:  acp-relay stats last
    """
    from .command import run_stats

    conn = read_db(db)
    sys.exit(guard_stdout(lambda: run_stats(conn, session, connection, sys.stdout.buffer, as_json=as_json)))
