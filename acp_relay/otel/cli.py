"""`acp-relay otel` and its subcommands' click declarations; otel/command.py's `compute` exports and
its `render` says what it sent; otel/live.py follows a running relay."""

from __future__ import annotations

import sqlite3
import sys

import click

from ..cli_support import (
    PLAIN_COLOR_HELP,
    Tool,
    color_option,
    connection_option,
    db_option,
    fail,
    note,
    policy_from,
    read_db,
    redact_options,
)
from ..protocol.errors import DB_UNUSABLE
from ..store.db import resolve_db_path


@click.group(cls=Tool, invoke_without_command=True)
@click.pass_context
def otel(ctx: click.Context) -> None:
    """Recorded sessions as OpenTelemetry traces, for the tracing backend a team already runs.

    \b
    Example:  acp-relay otel export last --endpoint http://localhost:4318
    """
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


@otel.command(
    name="export",
    context_settings={"max_content_width": 110},
    short_help="Send recorded sessions to an OTLP collector as traces.",
)
@click.argument("session", required=False, metavar="[SESSION]")
@db_option
@connection_option("Every session of connection N (or SESSION within it).")
@click.option("--since", metavar="AGE", help="The sessions active in the last AGE (30m, 12h, 1d).")
@click.option("--all", "export_all", is_flag=True, help="Every recorded session.")
@click.option("--endpoint", metavar="URL", help="The collector's base URL (default: OTEL_EXPORTER_OTLP_ENDPOINT).")
@click.option("--protocol", type=click.Choice(["http/protobuf", "grpc"]), help="Default: OTEL_EXPORTER_OTLP_PROTOCOL.")
@click.option("--header", "headers", multiple=True, metavar="K=V", help="A header for the collector (repeatable).")
@click.option(
    "--file",
    "file",
    metavar="PATH",
    help="Write OTLP JSON lines to PATH instead of sending (an existing file only with --force).",
)
@click.option(
    "--force", is_flag=True, help="With --file: replace a regular file there (never a link, a device or a FIFO)."
)
@click.option("--content", is_flag=True, help="Include message text, tool input and output (after redaction).")
@click.option("--check", "with_check", is_flag=True, help="Add `acp-relay check` findings as span events.")
@click.option("--pending", is_flag=True, help="Send the spans `acp-relay run --otlp` could not send.")
@redact_options(
    "Also redact this dotted path or, as re:REGEX, matches in string values.",
    "Export credentials as stored (the default redacts them again).",
    redact_first=False,
)
@color_option(PLAIN_COLOR_HELP)
def otel_export(
    session: str | None,
    db: str | None,
    connection: int | str | None,
    since: str | None,
    export_all: bool,
    endpoint: str | None,
    protocol: str | None,
    headers: tuple[str, ...],
    file: str | None,
    content: bool,
    force: bool,
    with_check: bool,
    pending: bool,
    no_redact: bool,
    redact: tuple[str, ...],
    color: str,
) -> None:
    """Send recorded sessions to an OTLP collector as traces: one per session, a span per turn, tool call
    and request. SESSION is an id, a unique prefix, `last` (the default) or ID@N.

    \b
    Exit status: 0 all sent, 1 a session was not (collector down or refusing), 2 usage, no such session.
    Examples:
      acp-relay otel export last --endpoint http://localhost:4318
      acp-relay otel export --since 1d --header 'x-api-key=...'
      acp-relay otel export last --file trace.jsonl
      acp-relay otel export --pending           # what `run --otlp` could not send
    """
    import gc

    from .command import ExportOptions, compute, notes, render

    opts = ExportOptions(session, connection, since, export_all, endpoint, protocol, list(headers), file, content)
    opts.check, opts.policy, opts.pending, opts.force = with_check, policy_from(redact, no_redact), pending, force
    # A session's state is many small objects that live to the end: with CPython's default thresholds the
    # collector walks them over and over (as in the recorder child, record/child.py), ~10% of an export.
    # Here, not in compute: a process is the CLI's to tune, not a library caller's.
    gc.freeze()
    gc.set_threshold(20_000, 50, 1000)
    try:
        summary = compute(read_db(db), opts)
    except sqlite3.DatabaseError as exc:
        fail(f"cannot read the database: {exc}", DB_UNUSABLE)
    for text in notes(summary):
        note(text)
    render(summary, sys.stdout.buffer)
    sys.exit(summary.status)


@otel.command(name="follow", hidden=True)
@db_option
@click.option("--relay-pid", type=int, required=True)
@click.option("--after", type=float, required=True)
@click.option("--endpoint")
@click.option("--protocol", type=click.Choice(["http/protobuf", "grpc"]))
@click.option("--header", "headers", multiple=True)
@click.option("--content", is_flag=True)
@click.option("--redact", multiple=True)
@click.option("--no-redact", is_flag=True)
def otel_follow(
    db: str | None,
    relay_pid: int,
    after: float,
    endpoint: str | None,
    protocol: str | None,
    headers: tuple[str, ...],
    content: bool,
    redact: tuple[str, ...],
    no_redact: bool,
) -> None:
    """What `acp-relay run --otlp` starts beside the relay: send each turn of its connection as it ends."""
    from .command import parse_headers
    from .live import FollowOptions, follow

    opts = FollowOptions(resolve_db_path(db), relay_pid, after, endpoint, protocol, None, content)
    opts.policy = policy_from(redact, no_redact)
    opts.headers = parse_headers(list(headers))
    sys.exit(follow(opts))
