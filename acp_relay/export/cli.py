"""`acp-relay export`'s click declaration; export/command.py's `compute` writes the file or makes the
document, its `render` prints a document."""

from __future__ import annotations

import sys

import click

from ..cli_support import address_options, db_option, note, policy_from, read_db, redact_options


@click.command(name="export")
@address_options()
@db_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["sqlite", "ndjson", "acp-devtools"]),
    default="sqlite",
    show_default=True,
    help="sqlite: a standalone database; ndjson: one frame per line; acp-devtools: a SessionExport v1 file.",
)
@click.option(
    "-o", "--output", metavar="FILE", help="Where to write (created 0600; an existing file only with --force)."
)
@click.option("--force", is_flag=True, help="With -o: replace a regular file there (never a link, a device or a FIFO).")
@redact_options(
    "Also redact this dotted path or, as re:REGEX, matches in string values.",
    "Export credentials as stored (the default redacts them again).",
    redact_first=False,
)
def export_cmd(
    session: str | None,
    connection: int | str | None,
    db: str | None,
    fmt: str,
    output: str | None,
    force: bool,
    no_redact: bool,
    redact: tuple[str, ...],
) -> None:
    """Write SESSION (an id, a prefix, `last`, ID@N) or a whole connection (-c N) to a file to share.

    \b
    sqlite (default) writes SESSION.acp-relay.db; ndjson and acp-devtools go to stdout without -o.
    Examples:
      acp-relay export last -o bug.db           # then: acp-relay show --db bug.db last
      acp-relay export last --format acp-devtools -o session.json
    """
    from .command import compute, render, summary

    policy = policy_from(redact, no_redact)
    exported = compute(read_db(db), session, connection, fmt=fmt, output=output, policy=policy, force=force)
    render(exported, sys.stdout.buffer)
    line = summary(exported)
    if line is not None:
        note(line)
    sys.exit(0)
