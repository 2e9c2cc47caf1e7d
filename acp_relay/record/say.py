"""The diagnostics `run`, `serve` and `proxy` print while they carry traffic (the relay, the pipe, the
recorder child, the journal), in the CLI's one form `acp-relay: COMMAND: message`. The modules that print
them write only the message and are handed a speaker, so the same recorder code says `run:` under `run` and
`serve:` under `serve`.
"""

from __future__ import annotations

from collections.abc import Callable

from ..fdio import warn


def speaker(command: str) -> Callable[[str], None]:
    """A warn= callback: `acp-relay: COMMAND: message` on stderr, escaped once; never raises."""

    def say(message: str) -> None:
        from ..render.text import diagnostic_line  # lazily: `run` pays for it only when it has something to say

        warn(diagnostic_line(command, message))

    return say
