"""`acp-relay prune`'s click declaration: the limits parsed here, the work and the report in prune/command.py."""

from __future__ import annotations

import click

from ..cli_support import PLAIN_COLOR_HELP, color_option, db_option, json_line, json_option, open_existing


@click.command()
@db_option
@click.option("--older-than", metavar="AGE", help="Delete connections that ended longer ago than AGE (30d, 12h, 90m).")
@click.option(
    "--max-size", metavar="SIZE", help="Then delete the oldest connections until the database fits SIZE (500MB)."
)
@click.option("--dry-run", is_flag=True, help="Say what would be deleted and the size after, delete nothing.")
@json_option("JSON Lines: one object per connection deleted, then the totals.")
@color_option(PLAIN_COLOR_HELP)
def prune(
    db: str | None, older_than: str | None, max_size: str | None, dry_run: bool, as_json: bool, color: str
) -> None:
    """Delete whole connections, oldest first, then reclaim the space. Safe while relays are writing.

    \b
    Example:  acp-relay prune --older-than 30d --max-size 500MB
    """
    from ..store import units
    from .command import compute, render_lines, render_records

    if older_than is None and max_size is None:
        raise click.UsageError("give --older-than AGE, --max-size SIZE, or both")
    try:
        age = units.parse_duration(older_than) if older_than else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--older-than") from exc
    try:
        size = units.parse_size(max_size) if max_size else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--max-size") from exc
    result = compute(open_existing(db), older_than=age, max_size=size, dry_run=dry_run)
    for line in map(json_line, render_records(result, dry_run)) if as_json else render_lines(result, dry_run):
        click.echo(line)
