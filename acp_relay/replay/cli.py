"""`acp-relay replay`'s click declaration: over stdio (replay/shell.py) or listening (replay/listen.py)."""

from __future__ import annotations

import sys

import click

from ..cli_support import address_options, db_option, fail, read_db, session_in
from ..store.db import resolve_db_path


@click.command()
@address_options()
@db_option
@click.option(
    "--speed",
    default="realtime",
    show_default=True,
    metavar="realtime|fast|FACTOR",
    help="Recorded gaps as they were, none, or divided by FACTOR (2 = twice as fast).",
)
@click.option("--strict", is_flag=True, help="Answer a prompt that differs from the recorded one with an error.")
@click.option(
    "--listen", metavar="HOST:PORT", help="Serve it at /acp over WebSocket and Streamable HTTP instead of stdio."
)
@click.option(
    "--token",
    envvar="ACP_RELAY_TOKEN",
    help="With --listen: require 'Authorization: Bearer TOKEN' (needed off loopback).",
)
def replay(
    session: str | None,
    connection: int | str | None,
    db: str | None,
    speed: str,
    strict: bool,
    listen: str | None,
    token: str | None,
) -> None:
    """Stand in for an agent: serve recorded SESSION (an id, a prefix, `last`, ID@N) on stdin/stdout.

    \b
    Put it in the editor's agent config in place of the agent. It reads the database only; stdout carries
    protocol frames only, and what it does is logged on stderr.
    Example:  acp-relay replay last --speed fast
              acp-relay replay last --listen 127.0.0.1:8767   # for a remote-capable client
    """
    if listen is not None:
        from ..protocol.remote import EndpointError, parse_listen
        from ..store.views import resolve_view
        from ..transport.listen import ListenError
        from .listen import run_listen

        resolve_view(read_db(db), session_in(session, connection))  # a missing session fails now, not per client
        args = [session] if session is not None else []
        args += ["-c", str(connection)] if connection is not None else []
        args += ["--speed", speed] + (["--strict"] if strict else [])
        try:
            code = run_listen(parse_listen(listen), resolve_db_path(db), args, token=token)
        except (EndpointError, ListenError) as exc:
            fail(str(exc), 2)
        sys.exit(code)
    from . import run_replay

    sys.exit(run_replay(resolve_db_path(db), session_in(session, connection), speed=speed, strict=strict))
