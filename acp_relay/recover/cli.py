"""`acp-relay recover`'s click declaration; the recovery itself is record/recover.py."""

from __future__ import annotations

import sys

import click

from ..cli_support import db_option
from ..store.db import resolve_db_path


@click.command()
@db_option
def recover(db: str | None) -> None:
    """Store what the spill journals beside the database kept for relays that died (SIGKILL, power loss).

    \b
    The next `acp-relay run` does the same on its own; this does it now.
    Example:  acp-relay recover
    """
    from ..record.recover import run_recover

    sys.exit(run_recover(resolve_db_path(db), click.echo))
