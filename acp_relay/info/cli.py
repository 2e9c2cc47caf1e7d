"""`acp-relay info`'s click declaration; info/command.py gathers and prints what the peers said."""

from __future__ import annotations

import sys

import click

from ..cli_support import address_options, db_option, guard_stdout, json_option, read_db


@click.command()
@address_options()
@db_option
@json_option("Everything as one JSON object.")
def info(session: str | None, connection: int | str | None, db: str | None, as_json: bool) -> None:
    """What SESSION's peers said about themselves: versions, capabilities both sides, auth methods, modes,
    config options and models, commands, extensions seen, and counts.

    \b
    Example:  acp-relay info last
    """
    from .command import run_info

    conn = read_db(db)
    sys.exit(guard_stdout(lambda: run_info(conn, session, connection, sys.stdout.buffer, as_json=as_json)))
