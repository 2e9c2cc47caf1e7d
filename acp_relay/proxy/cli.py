"""`acp-relay proxy`'s click declaration; the shell that carries connections on is record/listener.py (run_proxy),
shared with `serve`."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..cli_support import db_option, fail, listener_options, listening
from ..store.db import resolve_db_path


@click.command()
@db_option
@click.option(
    "--listen",
    default="127.0.0.1:8766",
    show_default=True,
    metavar="HOST:PORT",
    help="Where to listen (port 0: any free port).",
)
@click.option("--upstream", required=True, metavar="URL", help="The remote agent (ws://, wss://, http://, https://).")
@click.option(
    "--header",
    "headers",
    multiple=True,
    metavar="'NAME: VALUE'",
    help="Send this header upstream (repeatable; the value is never recorded).",
)
@click.option("--insecure", is_flag=True, help="Do not verify the upstream's TLS certificate.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    help="Seconds to wait for the upstream's connection and each request.",
)
@listener_options
def proxy(
    db: str | None,
    listen: str,
    upstream: str,
    headers: tuple[str, ...],
    insecure: bool,
    timeout: float,
    **listener: Any,
) -> None:
    """Listen at /acp (WebSocket and Streamable HTTP) and carry each connection on to a remote agent at
    URL, recording both sides.

    \b
    Example:  acp-relay proxy --listen 127.0.0.1:8766 --upstream wss://agents.example/acp
    """
    from ..protocol.remote import EndpointError, parse_header, parse_listen
    from ..record.listener import ServeError, run_proxy

    try:
        code = run_proxy(
            parse_listen(listen),
            upstream,
            resolve_db_path(db),
            headers=[parse_header(h) for h in headers],
            insecure=insecure,
            timeout=timeout,
            **listening(**listener),
        )
    except (EndpointError, ServeError) as exc:
        fail(str(exc), 2)
    sys.exit(code)
