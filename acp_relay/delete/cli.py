"""`acp-relay delete`'s click declaration; delete/command.py deletes, refusing a session still recorded."""

from __future__ import annotations

import click

from ..cli_support import (
    PLAIN_COLOR_HELP,
    address_options,
    color_option,
    db_option,
    json_line,
    json_option,
    open_existing,
)


@click.command()
@db_option
@address_options(required=True, connection=False)
@json_option("What was deleted as one JSON object: session, connection, frames.")
@color_option(PLAIN_COLOR_HELP)
def delete(db: str | None, session: str, as_json: bool, color: str) -> None:
    """Remove one session's frames (SESSION: an id, a unique prefix, `last`, or ID@N). Safe while relays are
    writing."""
    from .command import compute

    deleted = compute(open_existing(db), session)
    click.echo(json_line(deleted._asdict()) if as_json else deleted.line())
