"""`acp-relay diff`'s click declaration; diff/command.py's `compute` compares (protocol/diff
folds), its renderers print."""

from __future__ import annotations

import sys

import click

from ..cli_support import color_option, db_option, guard_stdout, note, read_db


@click.command(context_settings={"max_content_width": 110})
@click.argument("a")
@click.argument("b")
@db_option
@click.option("--db-b", type=click.Path(dir_okay=False), help="Take B from this database file.")
@click.option(
    "--ignore",
    multiple=True,
    metavar="LAYER",
    help="conversation, protocol, metadata, timing, or a part of the conversation: thoughts, tools, plans, "
    "permissions (repeat or comma-separate).",
)
@click.option(
    "--max-slowdown",
    type=float,
    metavar="FACTOR",
    help="Timing differs when B is more than FACTOR times slower than A (a turn or a method's p50/p95).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object with a key per layer.")
@color_option("Color what changed as git diff does, on a terminal only; NO_COLOR turns it off.")
def diff(
    a: str,
    b: str,
    db: str | None,
    db_b: str | None,
    ignore: tuple[str, ...],
    max_slowdown: float | None,
    as_json: bool,
    color: str,
) -> None:
    """Compare two recorded sessions: conversation, protocol, metadata and timing, in that order.

    \b
    A and B: session ids, unique prefixes, `last`, or ID@N (`last@N`: the newest session of connection N).
    Exit status: 0 the same, 1 they differ, 2 usage error (A and B the same session too).
    Timing differs only with --max-slowdown.
    Example:  acp-relay diff last@2 last --ignore thoughts
    """
    from ..protocol.errors import USAGE, UserError
    from ..render.text import Style
    from .command import check_slowdown, compute, parse_ignore, render, render_json

    def diff_them() -> int:
        try:  # diff says a usage error (and its hint) and exits 2 whatever its kind
            parse_ignore(ignore)  # the options first: a bad one is said before a missing database
            check_slowdown(max_slowdown)
            conn = read_db(db)
            compared = compute(
                conn, a, b, conn_b=read_db(db_b) if db_b else None, ignore=ignore, max_slowdown=max_slowdown
            )
        except UserError as exc:
            note(str(exc), hint=exc.hint)
            return USAGE
        if as_json:
            render_json(compared, sys.stdout.buffer)
        else:
            render(compared, sys.stdout.buffer, Style.detect(sys.stdout, color))
        return compared.status

    sys.exit(guard_stdout(diff_them))
