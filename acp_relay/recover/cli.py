"""`acp-relay recover`'s click declaration; the recovery itself is record/recover.py."""

from __future__ import annotations

import sys

import click

from ..cli_support import PLAIN_COLOR_HELP, color_option, db_option
from ..store.db import resolve_db_path


@click.command()
@db_option
@color_option(PLAIN_COLOR_HELP)
def recover(db: str | None, color: str) -> None:
    """Store what the spill journals beside the database kept for relays that died (SIGKILL, power loss).

    \b
    The next `acp-relay run` does the same on its own; this does it now.
    Example:  acp-relay recover
    """
    from ..record.recover import run_recover

    sys.exit(run_recover(resolve_db_path(db), click.echo))
