"""`acp-relay serve`'s click declaration; the listener that serves, shared with
`proxy`, is record/listener.py (run_serve)."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..cli_support import db_option, fail, listener_options, listening
from ..store.db import resolve_db_path


@click.command(context_settings={"allow_interspersed_args": False})  # an unknown option is refused, as run's
@db_option
@click.option(
    "--listen",
    default="127.0.0.1:8765",
    show_default=True,
    metavar="HOST:PORT",
    help="Where to listen (port 0: any free port).",
)
@listener_options
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def serve(db: str | None, listen: str, command: tuple[str, ...], **listener: Any) -> None:
    """Serve COMMAND (a stdio agent) at /acp over WebSocket and Streamable HTTP, one agent process per ACP
    connection, each recorded.

    \b
    Example:  acp-relay serve --listen 127.0.0.1:8765 -- my-agent --acp
    """
    from ..protocol.remote import EndpointError, parse_listen
    from ..record.listener import ServeError, run_serve

    try:
        address = parse_listen(listen)
        code = run_serve(
            address,
            list(command),
            resolve_db_path(db),
            **listening(**listener),
        )
    except (EndpointError, ServeError) as exc:
        fail(str(exc), 2)
    sys.exit(code)
