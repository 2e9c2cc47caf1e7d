"""Every line acp-relay says about itself goes through the `acp_relay` logger (stdlib `logging`).

Modules log with `logging.getLogger(__name__)` (a child of `acp_relay`) and never write to stderr
themselves: one formatter puts `acp-relay: COMMAND: ` in front and escapes controls and bidi once (messages
quote session ids, labels, file names and exception text from recordings), and one handler writes the line
and never raises (a closed stderr must not take a relay down with it). `hint=` in `extra` adds the indented
`  hint:` line. Tests read the records with pytest's `caplog`; the handler is installed by the entry points
(`install`: the CLI, `run`'s fast path, the recorder's child), and a library caller hears nothing unless it
configures logging itself (a NullHandler, as the logging HOWTO asks of a library).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

ROOT = "acp_relay"
logging.getLogger(ROOT).addHandler(logging.NullHandler())
_commands: list[str] = []  # the commands running now, innermost last (`demo` runs `show` inside itself)


def logger() -> logging.Logger:
    return logging.getLogger(ROOT)


def current_command() -> str | None:
    return _commands[-1] if _commands else None


def enter(name: str) -> None:
    """A command starts (click resolved it): its lines say its name until `leave` drops back below it."""
    _commands.append(name)


def depth() -> int:
    return len(_commands)


def leave(to_depth: int) -> None:
    del _commands[to_depth:]


@contextmanager
def command(name: str | None) -> Iterator[None]:
    """Name the command that prefixes each line said inside the block (`otel export` below a subgroup)."""
    depth = len(_commands)
    if name:
        _commands.append(name)
    try:
        yield
    finally:
        del _commands[depth:]


def set_command(name: str) -> None:
    """For a process that is one command for its whole life (the recorder child, `run`'s fast path)."""
    _commands[:] = [name]


class Formatter(logging.Formatter):
    """`acp-relay: COMMAND: message`, and `  hint: ...` below it; both escaped here and nowhere else."""

    def format(self, record: logging.LogRecord) -> str:
        from .render.text import clean  # lazily: `run` pays for it only when it has something to say

        name = getattr(record, "command", None) or current_command()
        prefix = f"acp-relay: {name}: " if name else "acp-relay: "
        line = prefix + clean(record.getMessage().rstrip("\n"))
        hint = getattr(record, "hint", None)
        return f"{line}\n  hint: {clean(str(hint))}" if hint else line


class Handler(logging.Handler):
    """Writes each line to the stderr of the moment (so click's test runner sees it too) and never raises."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = sys.stderr
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:  # a broken or closed stderr: the diagnostic is lost, the process goes on
            pass

    def handleError(self, record: logging.LogRecord) -> None:  # logging's name
        pass


def say(message: str, *, hint: str | None = None, command: str | None = None, level: int = logging.INFO) -> None:
    """One line from the entry points' own code (the CLI's errors and notices): `command` names it when the
    command stack does not (a usage error before any command ran)."""
    extra = {k: v for k, v in (("hint", hint), ("command", command)) if v}
    logger().log(level, "%s", message, extra=extra)


def install(level: int = logging.INFO) -> logging.Logger:
    """The one handler on the `acp_relay` logger (idempotent): what the entry points call first."""
    log = logger()
    if not any(isinstance(h, Handler) for h in log.handlers):
        handler = Handler()
        handler.setFormatter(Formatter())
        log.addHandler(handler)
    log.setLevel(level)
    return log
