"""`acp-relay run`'s options, declared once. __main__.py parses a plain run from this table without loading
click (run sits on the editor's start-up path), and run/cli.py builds run's click options from it, so the
two parsers cannot drift apart. This module imports nothing: the fast path pays for no import here."""

from __future__ import annotations

from typing import Literal, NamedTuple

Takes = Literal["value", "values", "flag"]  # one value, one per use (repeatable), or none


class Option(NamedTuple):
    flag: str
    dest: str  # the click parameter's name, and the key the fast parser returns
    takes: Takes
    help: str | None  # None: the shared option of cli_support (--db), help included
    fast: bool = False  # the fast parser takes it; any other option sends the run through click
    metavar: str | None = None
    minimum: float | None = None  # a number of seconds at least this (the value is then a float)
    default: float | None = None


OPTIONS = (
    Option("--db", "db", "value", None, fast=True),
    Option("--label", "label", "value", "A name for this connection, shown by `acp-relay show`.", fast=True),
    Option(
        "--redact",
        "redact",
        "values",
        "Also redact this dotted path (params.prompt.*.text) or, as re:REGEX, matches in string values.",
        fast=True,
        metavar="PATTERN",
    ),
    Option("--no-redact", "no_redact", "flag", "Store credentials as they are (the default redacts them).", fast=True),
    Option(
        "--otlp",
        "otlp",
        "value",
        "Send each turn to this OTLP/HTTP collector as it ends (off the wire).",
        fast=True,
        metavar="URL",
    ),
    Option(
        "--connect",
        "url",
        "value",
        "A remote agent (ws://, wss://, http://, https://) instead of COMMAND.",
        metavar="URL",
    ),
    Option(
        "--header",
        "headers",
        "values",
        "With --connect: send this header (repeatable; the value is never recorded).",
        metavar="'NAME: VALUE'",
    ),
    Option("--insecure", "insecure", "flag", "With --connect: do not verify the server's TLS certificate."),
    Option(
        "--timeout",
        "timeout",
        "value",
        "With --connect: seconds to wait for the connection and each request.",
        minimum=0.1,
        default=30.0,
    ),
)


def _unset(option: Option) -> object:
    return [] if option.takes == "values" else False if option.takes == "flag" else None


def parse_fast(args: list[str]) -> tuple[dict[str, object], list[str]] | None:
    """(values by dest, the agent's command) of `run [FAST OPTIONS] -- COMMAND`, or None for anything else
    (--help, an option the fast path leaves to click, no `--` or no command, a missing value): click says it."""
    fast = {o.flag: o for o in OPTIONS if o.fast}
    values = {o.dest: _unset(o) for o in fast.values()}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            command = args[i + 1 :]
            return (values, command) if command else None
        name, eq, value = arg.partition("=")
        option = fast.get(name)
        if option is None:
            return None  # a command without `--`, --help, or an option left to click
        if option.takes == "flag":
            if eq:
                return None  # `--no-redact=x`: click refuses it
            values[option.dest] = True
        else:
            if not eq:
                if i + 1 >= len(args):
                    return None
                i, value = i + 1, args[i + 1]
            if option.takes == "values":
                values[option.dest].append(value)  # type: ignore[attr-defined]
            else:
                values[option.dest] = value
        i += 1
    return None
