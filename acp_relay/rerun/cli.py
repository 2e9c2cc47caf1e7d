"""`acp-relay rerun`'s click declaration; the run is rerun/shell.py's."""

from __future__ import annotations

import os
import sys

import click

from ..cli_support import PLAIN_COLOR_HELP, address_options, color_option, db_option, note
from ..store.db import resolve_db_path


@click.command(context_settings={"allow_interspersed_args": True})
@address_options(required=True, connection=False)
@db_option
@click.option("--cwd", type=click.Path(file_okay=False), help="Working directory for the agent and session/new.")
@click.option(
    "--timeout", type=click.FloatRange(min=0, min_open=True), default=120.0, show_default=True, help="Seconds per turn."
)
@click.option(
    "--answer",
    type=click.Choice(["recorded", "allow", "deny"]),
    default="recorded",
    show_default=True,
    help="Permission requests the recording has no choice for (recorded: deny them).",
)
@click.option(
    "--fs",
    type=click.Choice(["recorded", "real", "none"]),
    default="recorded",
    show_default=True,
    help="File reads from the recording, from the real files under --cwd, or refused; writes only with real.",
)
@click.option("--label", help='A name for the new connection (default "rerun of SESSION").')
@click.option("--json", "as_json", is_flag=True, help="One JSON object: session, connection, turns, completed, exit.")
@color_option(PLAIN_COLOR_HELP)
@click.argument("agent", nargs=-1, required=True, type=click.UNPROCESSED)
def rerun(
    session: str,
    db: str | None,
    cwd: str | None,
    timeout: float,
    answer: str,
    fs: str,
    label: str | None,
    as_json: bool,
    color: str,
    agent: tuple[str, ...],
) -> None:
    """Stand in for the editor: play recorded SESSION against a live AGENT, recorded as a new run.

    \b
    SESSION is an id, a unique prefix, `last`, or ID@N (`last@N`: the newest session of connection N).
    Exit status: 0 every turn completed, 3 a turn timed out, 4 the agent exited early, 2 usage.
    Example:  acp-relay rerun last@1 -- my-agent --acp && acp-relay diff last@1 last
    """
    from . import Options, print_result, run_rerun

    path = resolve_db_path(db)
    opts = Options(cwd=os.path.abspath(cwd) if cwd else None, timeout=timeout, answer=answer, fs=fs)
    result = run_rerun(path, session, list(agent), options=opts, label=label)
    if result.exit != 0:
        note(result.message, hint=result.hint)
    if result.exit != 2:
        print_result(result, sys.stdout, as_json)
    sys.exit(result.exit)
