"""The command line: each command is a thin layer over a function in the package."""

from __future__ import annotations

import sys

import click

from . import __version__
from .db import resolve_db_path

DB_HELP = "Database file (default: $ACP_RELAY_DB, else $XDG_STATE_HOME/acp-relay/relay.db)."


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="acp-relay")
def cli() -> None:
    """Record, inspect and replay Agent Client Protocol traffic."""


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--db", "db", type=click.Path(dir_okay=False), help=DB_HELP)
@click.option("--label", help="A name for this connection, shown by `acp-relay show`.")
@click.option("--redact", multiple=True, metavar="PATTERN",
              help="Also redact this dotted path (params.prompt.*.text) or, as re:REGEX, matches in string values.")
@click.option("--no-redact", is_flag=True, help="Store credentials as they are (the default redacts them).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(db: str | None, label: str | None, redact: tuple[str, ...], no_redact: bool, command: tuple[str, ...]) -> None:
    """Start COMMAND (the agent) and relay its stdio byte for byte, recording every frame.

    \b
    Example:  acp-relay run -- my-agent --acp
    """
    from .redact import Policy
    from .relay import run as run_relay

    try:
        policy = Policy.from_options(redact, no_redact)
    except Exception as exc:  # noqa: BLE001 - a bad regex
        raise click.BadParameter(str(exc), param_hint="--redact") from exc
    sys.exit(run_relay(list(command), resolve_db_path(db), label=label, policy=policy))


@cli.command()
@click.option("--db", "db", type=click.Path(dir_okay=False), help=DB_HELP)
def demo(db: str | None) -> None:
    """Run a scripted demo agent and client through the relay, then print what was recorded."""
    from .demo import run_demo

    sys.exit(run_demo(resolve_db_path(db)))


def main() -> None:
    cli(prog_name="acp-relay")
