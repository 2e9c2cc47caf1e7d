"""`acp-relay run`'s click declaration, built from run/options.py's table (the start-up path parses the same
table without click); the relay is run/relay.py, the remote link run/connect.py."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from ..cli_support import F, db_option, fail, options, policy_from
from ..store.db import resolve_db_path
from .options import OPTIONS, Option


def _click_option(option: Option) -> Callable[[F], F]:
    """One row of run/options.py's table as a click option (--db: the one every command shares)."""
    if option.help is None:
        return db_option
    kwargs: dict[str, Any] = {"help": option.help, "metavar": option.metavar}
    if option.takes == "flag":
        kwargs["is_flag"] = True
    elif option.takes == "values":
        kwargs["multiple"] = True
    if option.minimum is not None:
        kwargs |= {"type": click.FloatRange(min=option.minimum), "default": option.default, "show_default": True}
    return click.option(option.flag, option.dest, **kwargs)


run_options = options(*(_click_option(o) for o in OPTIONS))


@click.command(context_settings={"allow_interspersed_args": False})
@run_options
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def run(
    db: str | None,
    label: str | None,
    redact: tuple[str, ...],
    no_redact: bool,
    otlp: str | None,
    url: str | None,
    headers: tuple[str, ...],
    insecure: bool,
    timeout: float,
    command: tuple[str, ...],
) -> None:
    """Start COMMAND (the agent) and relay its stdio byte for byte, recording every frame.

    With --connect URL, relay stdio to a remote agent over WebSocket or Streamable HTTP instead.

    \b
    Example:  acp-relay run -- my-agent --acp
              acp-relay run --connect wss://agents.example/acp --header 'Authorization: Bearer $T'
    """
    policy = policy_from(redact, no_redact)
    if url is None:
        if not command:
            fail("run: give the agent's command after --, or --connect URL", 2)
        if headers or insecure:
            fail("run: --header and --insecure go with --connect", 2)
        from .relay import run as run_relay

        sys.exit(run_relay(list(command), resolve_db_path(db), label=label, policy=policy, otlp=otlp))
    if command:
        fail("run: give either --connect URL or an agent command, not both", 2)
    if otlp:
        fail("run: --otlp goes with a local agent (-- COMMAND), not --connect", 2)
    from ..protocol.remote import EndpointError, parse_header, transport_of

    try:
        transport_of(url)
        parsed = [parse_header(h) for h in headers]
    except EndpointError as exc:
        fail(f"run: {exc}", 2)
    from .connect import run_connect

    sys.exit(
        run_connect(
            url, resolve_db_path(db), headers=parsed, insecure=insecure, timeout=timeout, label=label, policy=policy
        )
    )
