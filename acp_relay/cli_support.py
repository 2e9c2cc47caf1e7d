"""The conventions every command's click declaration (COMMAND/cli.py) follows, as decorators and one group
class: the address grammar (SESSION, ID@N, -c N), the output flags (--json, --color), the exit-code table,
the one diagnostic form, `acp-relay: COMMAND: message` on stderr (never click's `Error:`, never a traceback
for a user's mistake), and the lazy loading of the commands cli.py registers.

Only a command's cli.py imports this, so the rest of a command stays a Python API without click; nothing
here imports a command.
"""

from __future__ import annotations

import importlib
import logging
import os
import shutil
import sqlite3
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn, TypeVar

import click

from . import diagnostics
from .protocol.errors import DB_UNUSABLE, SIGNAL_BASE, USAGE, UserError
from .store.db import resolve_db_path

F = TypeVar("F", bound=Callable[..., Any])
PROG = "acp-relay"


# -- diagnostics: through the acp_relay logger (diagnostics.py) ------------------------------------------
def note(message: str, hint: str | None = None) -> None:
    """A notice for the person at the terminal, in the house form (the running command names it), and what
    to do next on the `  hint:` line below it."""
    diagnostics.say(message, hint=hint)


def fail(message: str, status: int = USAGE, hint: str | None = None) -> NoReturn:
    """Say what went wrong on stderr and exit with `status` (the table is in protocol/errors.py)."""
    diagnostics.say(message, hint=hint, level=logging.ERROR)
    sys.exit(status)


def storage_failure(exc: sqlite3.Error | OSError) -> tuple[str, int, str | None]:
    """(message, exit status, hint) for a database or file error that reached the CLI: what was wrong with
    the database or the disk, never a traceback. A missing file is 2, everything else 5 (unusable)."""
    import errno

    text = str(exc)
    low = text.lower()
    if isinstance(exc, sqlite3.Error):
        if "locked" in low or "busy" in low:
            return (
                f"the database is locked ({text})",
                DB_UNUSABLE,
                "another process held its write lock past the busy timeout; try again when it is done",
            )
        if "full" in low:
            return f"the disk is full ({text})", DB_UNUSABLE, "free some space (`acp-relay prune` makes room)"
        if "readonly" in low or "read-only" in low:
            return (
                f"the database is read-only ({text})",
                DB_UNUSABLE,
                "its file or directory is not writable; pass --db PATH to a writable copy",
            )
        if "malformed" in low or "not a database" in low or "encrypted" in low or "corrupt" in low:
            return (
                f"the database is damaged ({text})",
                DB_UNUSABLE,
                "restore a backup, or `sqlite3 DB .recover | sqlite3 NEW.db` and use --db NEW.db",
            )
        return (
            f"the database cannot be used ({text})",
            DB_UNUSABLE,
            "check the file with `sqlite3 DB 'PRAGMA integrity_check'`",
        )
    where = f"{exc.filename}: " if exc.filename else ""
    reason = exc.strerror or text
    if isinstance(exc, FileNotFoundError):
        return f"{where}{reason}", USAGE, None
    hints = {
        errno.ENOSPC: "free some space (`acp-relay prune` makes room)",
        errno.EROFS: "the filesystem is read-only; write somewhere else",
        errno.EACCES: "check the permissions of the file and its directory",
        errno.EPERM: "check the permissions of the file and its directory",
    }
    return f"{where}{reason}", DB_UNUSABLE, hints.get(exc.errno or 0)


def _click_message(exc: click.ClickException) -> str:
    """click's message in the house style: lower case, no full stop, on one line."""
    text = " ".join(exc.format_message().split())
    if text[:1].isupper() and text[1:2].islower():
        text = text[0].lower() + text[1:]
    return text.rstrip(".")


def _said(depth: int, message: str, hint: str | None) -> None:
    """An error that ended a command, named by that command (not by one it had started and left)."""
    named = diagnostics.current_command() if diagnostics.depth() > depth else None
    diagnostics.say(message, hint=hint, command=named, level=logging.ERROR)


class Tool(click.Group):
    """The acp-relay group: a UserError, a click usage error or Ctrl-C in any command ends as one diagnostic
    line and a status from the exit-code table, under CliRunner as on the command line. Subgroups
    (`otel`) are Tools too, so `otel export` names itself in full."""

    group_class = type  # a subgroup made with @cli.group() is a Tool

    def __init__(self, *args: Any, lazy: Mapping[str, tuple[str, str]] | None = None, **kwargs: Any) -> None:
        """lazy: command name -> ("module:attribute" of its click declaration, its one-sentence summary). The
        module is imported when the command is asked for (click's lazy group), so a run of one command loads
        only that command; the summaries let --help list them all without importing any."""
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            target, summary = self.lazy[cmd_name]
            module, _, attribute = target.partition(":")
            command = getattr(importlib.import_module(module), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{target} is not a click command")
            command.short_help = summary
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The Commands section: the registry's summaries, a loaded command's own short help otherwise."""
        names = [n for n in self.list_commands(ctx) if n in self.lazy or not self.commands[n].hidden]
        limit = formatter.width - 6 - max(map(len, names), default=0)
        rows = [(n, self.lazy[n][1] if n in self.lazy else self.commands[n].get_short_help_str(limit)) for n in names]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[Any]:
        """Command names (with their summaries) completed from the registry: a Tab loads no command."""
        from click.shell_completion import CompletionItem

        names = [n for n in self.list_commands(ctx) if n.startswith(incomplete)]
        items = [
            CompletionItem(n, help=self.lazy[n][1] if n in self.lazy else self.commands[n].get_short_help_str())
            for n in names
            if n in self.lazy or not self.commands[n].hidden
        ]
        return items + click.Command.shell_complete(self, ctx, incomplete)  # the group's own options

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, cmd, rest = super().resolve_command(ctx, args)
        path = [*ctx.command_path.split()[1:], cmd.name if cmd is not None and cmd.name else ""]
        diagnostics.enter(" ".join(p for p in path if p))  # `otel export` below a subgroup
        return name, cmd, rest

    def invoke(self, ctx: click.Context) -> Any:
        depth = diagnostics.depth()  # demo runs `show` through the group again: each run pops its own name
        try:
            return super().invoke(ctx)
        except UserError as exc:
            _said(depth, str(exc), exc.hint)
            sys.exit(exc.status)
        except (sqlite3.Error, OSError) as exc:
            if isinstance(exc, BrokenPipeError):
                raise
            message, status, hint = storage_failure(exc)
            _said(depth, message, hint)
            sys.exit(status)
        finally:
            diagnostics.leave(depth)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        diagnostics.install()
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:  # `acp-relay` (or `acp-relay otel`) alone: its help
            click.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
            sys.exit(USAGE)
        except click.UsageError as exc:
            ctx = exc.ctx  # `otel export`: the command path below the program's name
            name = " ".join(ctx.command_path.split()[1:]) or None if ctx is not None else None
            where = f"{PROG} {name}" if name else PROG
            diagnostics.say(_click_message(exc), hint=f"see `{where} --help`", command=name, level=logging.ERROR)
            sys.exit(USAGE)
        except click.ClickException as exc:
            diagnostics.say(_click_message(exc), level=logging.ERROR)
            sys.exit(USAGE)
        except click.Abort:
            sys.exit(SIGNAL_BASE + 2)
        sys.exit(rv if isinstance(rv, int) else 0)


# -- options ----------------------------------------------------------------------------------------------
DB_HELP = "Database file (default: $ACP_RELAY_DB, else $XDG_STATE_HOME/acp-relay/relay.db)."

# Options every command that reads or writes a database shares (the sqlite-utils way: one decorator each).
db_option = click.option("--db", "db", type=click.Path(dir_okay=False), help=DB_HELP)


def color_option(help: str = "Color on a terminal only; NO_COLOR turns it off.") -> Callable[[F], F]:
    """--color auto|always|never: every command that prints for a person takes it, those that print no color
    yet too (PLAIN_COLOR_HELP), so one flag works everywhere (tests/test_color.py walks the registry)."""
    return click.option(
        "--color",
        type=click.Choice(["auto", "always", "never"]),
        default="auto",
        show_default=True,
        help=help,
    )


PLAIN_COLOR_HELP = "Taken as every command takes it (NO_COLOR too); this report has no color."


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


# What serve and proxy take alike as listeners: who may connect, how much, and how connections are recorded.
listener_options = options(
    click.option(
        "--token",
        envvar="ACP_RELAY_TOKEN",
        help="Require 'Authorization: Bearer TOKEN' (needed off loopback; or $ACP_RELAY_TOKEN).",
    ),
    click.option(
        "--allow-host",
        "allow_hosts",
        multiple=True,
        metavar="NAME",
        help="Also answer to this Host/Origin name (repeatable).",
    ),
    click.option(
        "--max-message",
        type=click.IntRange(min=1),
        default=16 << 20,
        show_default=True,
        help="Largest message, in bytes.",
    ),
    click.option(
        "--max-connections", type=click.IntRange(min=1), default=16, show_default=True, help="ACP connections at once."
    ),
    click.option(
        "--idle-timeout",
        type=click.FloatRange(min=0.1),
        default=600.0,
        show_default=True,
        help="Seconds without a message before a connection is closed.",
    ),
    click.option("--label", help="A name for these connections, shown by `acp-relay show`."),
    redact_options(
        "Also redact this dotted path (params.prompt.*.text) or, as re:REGEX, matches in string values.",
        "Store credentials as they are (the default redacts them).",
        redact_first=True,
    ),
)


def listening(*, idle_timeout: float, redact: tuple[str, ...], no_redact: bool, **options: Any) -> dict[str, Any]:
    """listener_options' values as record/listener.py takes them (idle seconds, one redaction policy)."""
    return {**options, "idle": idle_timeout, "policy": policy_from(redact, no_redact)}


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


# -- the address grammar: SESSION, ID@N, -c N ------------------------------------------------------------
ADDRESS_HELP = "SESSION is an id, a unique prefix of one, `last`, or ID@N (the session in connection N)."


class ConnectionNumber(click.ParamType):
    """-c/--connection's value: a connection id or `last` (a bad one is a usage error, exit 2)."""

    name = "N|last"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from .store.views import parse_connection

        try:
            return parse_connection(value)
        except UserError as exc:
            self.fail(str(exc), param, ctx)


def connection_option(
    help: str = "A whole connection (every frame, all its sessions), or SESSION within it.",
) -> Callable[[F], F]:
    """-c/--connection N|last, the same in every command that reads a session."""
    return click.option("--connection", "-c", type=ConnectionNumber(), metavar="N|last", help=help)


def address_options(*, required: bool = False, connection: bool = True) -> Callable[[F], F]:
    """SESSION (see ADDRESS_HELP) and, unless told otherwise, -c/--connection N|last: every command that
    takes a session takes it through this decorator, so they all read the same grammar."""
    session = click.argument("session", required=required, metavar="SESSION" if required else "[SESSION]")
    return options(session, connection_option()) if connection else session


def session_in(session: str | None, connection: int | str | None) -> str:
    """One session, for the commands that play one (replay): SESSION, or with -c N alone the newest session of
    connection N, spelled in the grammar (`last@N`) their loaders read."""
    if connection is None:
        return session or "last"
    from .store.views import parse_address

    address = parse_address(session or "last", connection)
    return f"{address.session}@{address.connection}"


# -- output flags ----------------------------------------------------------------------------------------
def json_option(help: str = "JSON Lines: one object per record, the text columns' names as keys.") -> Callable[[F], F]:
    """--json, the same flag name and destination (as_json) everywhere."""
    return click.option("--json", "as_json", is_flag=True, help=help)


wide_option = click.option(
    "--wide", "-w", is_flag=True, help="Nothing shortened to fit the terminal: full ids, every column."
)
pager_option = click.option(
    "--no-pager", is_flag=True, help="Never page (default: $PAGER or `less -FRX` on a terminal)."
)


class Paged:
    """stdout for a command whose text may be long: on a terminal, once more lines came than the screen has,
    everything goes through the pager ($PAGER, else `less -FRX`); shorter output, a pipe, or a pager that
    cannot start, and it is written as it is. A reader quitting the pager ends the output quietly."""

    def __init__(self, out: Any, enabled: bool) -> None:
        self.out: Any = out
        self.pager: Any = None  # the pager process, once started
        self.buffer: list[bytes] | None = None
        if enabled and _isatty(out):
            self.buffer, self.lines = [], 0
            self.rows = shutil.get_terminal_size((80, 24)).lines

    def write(self, data: bytes) -> int:
        if self.buffer is None:
            return int(self.out.write(data))
        self.buffer.append(data)
        self.lines += data.count(b"\n")
        if self.lines >= self.rows:
            self._start()
        return len(data)

    def flush(self) -> None:
        if self.buffer is None:
            self.out.flush()

    def _start(self) -> None:
        import shlex
        import subprocess

        assert self.buffer is not None
        pending, self.buffer = b"".join(self.buffer), None
        env = {**os.environ, "LESS": os.environ.get("LESS", "FRX")}
        try:
            self.pager = subprocess.Popen(
                shlex.split(os.environ.get("PAGER") or "less -FRX"), stdin=subprocess.PIPE, env=env
            )
        except (OSError, ValueError):
            self.out.write(pending)
            return
        assert self.pager.stdin is not None
        self.out = self.pager.stdin
        self.out.write(pending)

    def close(self) -> None:
        """Write what is held back (it fit on the screen), or wait for the reader to leave the pager."""
        if self.buffer is not None:
            self.out.write(b"".join(self.buffer))
            self.buffer = None
        if self.pager is None:
            self.out.flush()
            return
        try:
            self.out.close()
        except BrokenPipeError:
            pass
        self.pager.wait()


def paged(enabled: bool, fn: Callable[[Any], int]) -> int:
    """Run fn(out) with out a Paged stdout (see Paged); the reader leaving the pager early is no error."""
    out = Paged(sys.stdout.buffer, enabled)
    try:
        status = guard_stdout(lambda: fn(out))
        out.close()
    except BrokenPipeError:
        return 0
    return status


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def json_line(obj: Any) -> str:
    """One JSON Lines record (no newline: click.echo adds it), as every --json prints them: DEL, C1 and bidi
    controls from a recording written as \\uXXXX, so the line is safe to `cat`."""
    from .render.text import safe_dumps

    return safe_dumps(obj).decode("utf-8")


def one_of(**flags: Any) -> str | None:
    """The one output flag given, by name (None for none); two at once are a usage error, never a silent pick."""
    given = [name for name, value in flags.items() if value]
    if len(given) > 1:
        names = " and ".join("--" + n.replace("_", "-") for n in given)
        raise click.UsageError(f"{names} do not combine: give one")
    return given[0] if given else None


@contextmanager
def failing_on_show_error(status: int | None = None) -> Iterator[None]:
    """Kept for code written before Tool: a UserError carries its status and Tool prints it. A `status` given
    here overrides the error's own."""
    try:
        yield
    except UserError as exc:
        if status is not None:
            exc.status = status
        raise


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
    """The database for the commands that change it but never create it (prune, delete, search's index): it
    must exist already."""
    from .store import db as dbmod
    from .store.rows import no_database

    path = resolve_db_path(db)
    if not path.exists():
        raise no_database(path)
    try:
        return dbmod.connect(path, create=False)
    except sqlite3.Error as exc:
        raise UserError(f"cannot open {path}: {exc}", DB_UNUSABLE) from None


def read_db(db: str | None) -> sqlite3.Connection:
    """The database, read-only, for the commands that only look (a UserError when it is missing)."""
    from .store.queries import open_db

    return open_db(resolve_db_path(db))
