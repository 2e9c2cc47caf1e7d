"""`acp-relay check`'s click declaration: options parsed here, the work done by check/command.py."""

from __future__ import annotations

import sqlite3
import sys

import click

from ..cli_support import address_options, color_option, db_option, fail, guard_stdout, note, read_db
from ..protocol.errors import DB_UNUSABLE


@click.command(context_settings={"max_content_width": 110})
@address_options()
@db_option
@click.option("--all", "check_all", is_flag=True, help="Every connection in the database.")
@click.option("--json", "as_json", is_flag=True, help="JSON Lines: one object per finding, nothing else on stdout.")
@click.option(
    "--min-severity",
    type=click.Choice(["info", "warning", "error"]),
    default="info",
    show_default=True,
    help="Leave out findings below this severity.",
)
@click.option("--rule", "rules", multiple=True, metavar="ID", help="Only this rule (an id or a glob: 'lifecycle.*').")
@click.option("--ignore", multiple=True, metavar="ID", help="Leave out this rule (an id or a glob).")
@click.option(
    "--rules", "list_rules", is_flag=True, help="List every rule: id, severity, description, spec, conformance kit ids."
)
@click.option(
    "--coverage",
    is_flag=True,
    help="List the conformance kit's requirements and how check covers each (rule/partial/...).",
)
@click.option("--protocol", type=click.Choice(["1", "2"]), help="With --coverage: one protocol version's requirements.")
@color_option()
def check(
    session: str | None,
    db: str | None,
    connection: str | None,
    check_all: bool,
    as_json: bool,
    min_severity: str,
    rules: tuple[str, ...],
    ignore: tuple[str, ...],
    list_rules: bool,
    coverage: bool,
    protocol: str | None,
    color: str,
) -> None:
    """Judge recorded traffic against JSON-RPC 2.0, the ACP schemas and the Prompt Lifecycle rules.

    \b
    SESSION is an id, a unique prefix of one, `last`, or ID@N; with no argument the newest connection
    is checked. One line per finding (frame, severity, rule, message, spec), then a summary.
    Exit status: 0 no error, 1 at least one error finding, 2 usage error, no such session or database.
    Examples:
      acp-relay check                       # the newest connection
      acp-relay check last --min-severity warning
      acp-relay check --all --json          # JSON Lines, for tools
      acp-relay check --rules               # every rule with its spec reference and kit ids
      acp-relay check --coverage --protocol 2   # what a clean check means against the conformance kit
    """
    from ..render.text import Style
    from .command import CheckOptions, print_coverage, print_rules, run_check

    if list_rules:
        sys.exit(guard_stdout(lambda: print_rules(sys.stdout.buffer, as_json)))
    if coverage:
        version = int(protocol) if protocol else None
        sys.exit(guard_stdout(lambda: print_coverage(sys.stdout.buffer, version, as_json)))
    if protocol:
        fail("--protocol goes with --coverage", 2)
    opts = CheckOptions(session, connection, check_all, as_json, min_severity, rules, ignore)
    try:
        conn = read_db(db)
        style = Style.detect(sys.stdout, color)
        sys.exit(guard_stdout(lambda: run_check(conn, opts, sys.stdout.buffer, note, style)))
    except sqlite3.DatabaseError as exc:
        fail(f"cannot read the database: {exc}", DB_UNUSABLE)
