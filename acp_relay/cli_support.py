"""What the click commands in cli.py share: option groups, the `acp-relay:` diagnostics, stdout plumbing.

Kept apart from cli.py so each command there stays a thin layer; nothing here imports a command.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn, TypeVar

import click

from .store.db import resolve_db_path

F = TypeVar("F", bound=Callable[..., Any])

DB_HELP = "Database file (default: $ACP_RELAY_DB, else $XDG_STATE_HOME/acp-relay/relay.db)."

# Options every command that reads or writes a database shares (the sqlite-utils way: one decorator each).
db_option = click.option("--db", "db", type=click.Path(dir_okay=False), help=DB_HELP)


def color_option(help: str = "Color on a terminal only; NO_COLOR turns it off.") -> Callable[[F], F]:
    """--color auto|always|never, as show, check and search take it."""
    return click.option(
        "--color",
        type=click.Choice(["auto", "always", "never"]),
        default="auto",
        show_default=True,
        help=help,
    )


def redact_options(redact_help: str, no_redact_help: str, *, redact_first: bool) -> Callable[[F], F]:
    """--redact PATTERN (repeatable) and --no-redact, in the order the command lists them."""
    redact = click.option("--redact", multiple=True, metavar="PATTERN", help=redact_help)
    no_redact = click.option("--no-redact", is_flag=True, help=no_redact_help)
    return options(redact, no_redact) if redact_first else options(no_redact, redact)


def options(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    """Several click options as one decorator, listed (and shown in --help) in the order given."""

    def apply(fn: F) -> F:
        for decorator in reversed(decorators):
            fn = decorator(fn)
        return fn

    return apply


def policy_from(redact: tuple[str, ...], no_redact: bool) -> Any:
    """The redaction policy of --redact/--no-redact; a bad pattern is a usage error on --redact."""
    from .protocol.redact import Policy

    try:
        return Policy.from_options(redact, no_redact)
    except Exception as exc:
        raise click.BadParameter(str(exc), param_hint="--redact") from exc


# show's frame filters: the order here is the order `acp-relay show --help` lists them in.
show_filter_options = options(
    click.option(
        "--method", "-m", "methods", multiple=True, metavar="GLOB", help="Method glob (a response has its request's)."
    ),
    click.option("--direction", "-d", metavar="DIR", help="c2a (editor to agent) or a2c (agent to editor)."),
    click.option(
        "--kind",
        "-k",
        "kinds",
        multiple=True,
        metavar="KIND",
        help="request, notification, response, error, batch or invalid.",
    ),
    click.option("--update", "-u", "updates", multiple=True, metavar="GLOB", help="session/update variant glob."),
    click.option("--grep", "-g", metavar="REGEX", help="Regular expression over the raw bytes."),
    click.option("--since", metavar="TIME", help="From TIME: seconds as shown (12.5, 90s, 2m) or an ISO date/time."),
    click.option("--until", metavar="TIME", help="Up to TIME (same forms as --since)."),
    click.option(
        "--errors", is_flag=True, help="Only error responses, invalid or flagged frames, unanswered requests."
    ),
)


def note(message: str) -> None:
    """A diagnostic on stderr, prefixed as every command's are."""
    click.echo(f"acp-relay: {message}", err=True)


def fail(message: str, status: int = 1) -> NoReturn:
    """Say what went wrong on stderr and exit with `status`."""
    note(message)
    sys.exit(status)


@contextmanager
def failing_on_show_error(status: int = 1) -> Iterator[None]:
    """A ShowError (no such session, no database...) inside the block: its message, then exit `status`."""
    from .store.queries import ShowError

    try:
        yield
    except ShowError as exc:
        fail(str(exc), status)


def guard_stdout(fn: Callable[[], int]) -> int:
    """Exit quietly when the reader goes away (`| head`) or on Ctrl-C (the way out of --follow)."""
    try:
        return fn()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 0


def open_existing(db: str | None) -> sqlite3.Connection:
    """The database for prune and delete, which change it: it must exist already (they never create one)."""
    from .store import db as dbmod

    path = resolve_db_path(db)
    if not path.exists():
        raise click.ClickException(f"no database at {path}")
    try:
        return dbmod.connect(path, create=False)
    except Exception as exc:
        raise click.ClickException(f"cannot open {path}: {exc}") from exc


def read_db(db: str | None) -> sqlite3.Connection:
    """The database, read-only, for the commands that only look (a ShowError when it is missing)."""
    from .store.queries import open_db

    return open_db(resolve_db_path(db))
