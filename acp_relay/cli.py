"""The command line: each command is a thin layer over a function in the package."""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import click

from . import __version__
from .cli_support import (
    Tool,
    address_options,
    color_option,
    connection_option,
    db_option,
    fail,
    guard_stdout,
    json_line,
    json_option,
    note,
    one_of,
    open_existing,
    options,
    paged,
    pager_option,
    policy_from,
    read_db,
    redact_options,
    session_in,
    show_filter_options,
    wide_option,
)
from .protocol.errors import DB_UNUSABLE, USAGE
from .store.db import resolve_db_path


@click.group(cls=Tool, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="acp-relay")
def cli() -> None:
    """Record, inspect and replay Agent Client Protocol traffic.

    \b
    Every command that reads a session takes it the same way: SESSION is an id, a unique prefix of one,
    `last`, or ID@N (the session in connection N; `last@N` is the newest there), and -c/--connection N|last
    names a whole connection. Exit status: 0 success, 1 the answer a script tests for (check findings, diff
    differences, search no match), 2 usage error / no database / no such or an ambiguous session, 3 a
    timeout, 4 the peer died, 5 the database is unusable, 128+N a signal; `run` exits with the agent's status.
    """


@cli.command(context_settings={"allow_interspersed_args": False})
@db_option
@click.option("--label", help="A name for this connection, shown by `acp-relay show`.")
@redact_options(
    "Also redact this dotted path (params.prompt.*.text) or, as re:REGEX, matches in string values.",
    "Store credentials as they are (the default redacts them).",
    redact_first=True,
)
@click.option("--otlp", metavar="URL", help="Send each turn to this OTLP/HTTP collector as it ends (off the wire).")
@click.option(
    "--connect", "url", metavar="URL", help="A remote agent (ws://, wss://, http://, https://) instead of COMMAND."
)
@click.option(
    "--header",
    "headers",
    multiple=True,
    metavar="'NAME: VALUE'",
    help="With --connect: send this header (repeatable; the value is never recorded).",
)
@click.option("--insecure", is_flag=True, help="With --connect: do not verify the server's TLS certificate.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    help="With --connect: seconds to wait for the connection and each request.",
)
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
        from .record.relay import run as run_relay

        sys.exit(run_relay(list(command), resolve_db_path(db), label=label, policy=policy, otlp=otlp))
    if command:
        fail("run: give either --connect URL or an agent command, not both", 2)
    if otlp:
        fail("run: --otlp goes with a local agent (-- COMMAND), not --connect", 2)
    from .protocol.remote import EndpointError, parse_header, transport_of

    try:
        transport_of(url)
        parsed = [parse_header(h) for h in headers]
    except EndpointError as exc:
        fail(f"run: {exc}", 2)
    from .record.remote import run_connect

    sys.exit(
        run_connect(
            url, resolve_db_path(db), headers=parsed, insecure=insecure, timeout=timeout, label=label, policy=policy
        )
    )


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


def _listening(*, idle_timeout: float, redact: tuple[str, ...], no_redact: bool, **options: Any) -> dict[str, Any]:
    """listener_options' values as record/serve.py takes them (idle seconds, one redaction policy)."""
    return {**options, "idle": idle_timeout, "policy": policy_from(redact, no_redact)}


@cli.command(context_settings={"allow_interspersed_args": False})  # an unknown option is refused, as run's
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
    from .protocol.remote import EndpointError, parse_listen
    from .record.serve import ServeError, run_serve

    try:
        address = parse_listen(listen)
        code = run_serve(
            address,
            list(command),
            resolve_db_path(db),
            **_listening(**listener),
        )
    except (EndpointError, ServeError) as exc:
        fail(str(exc), 2)
    sys.exit(code)


@cli.command()
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
    from .protocol.remote import EndpointError, parse_header, parse_listen
    from .record.serve import ServeError, run_proxy

    try:
        code = run_proxy(
            parse_listen(listen),
            upstream,
            resolve_db_path(db),
            headers=[parse_header(h) for h in headers],
            insecure=insecure,
            timeout=timeout,
            **_listening(**listener),
        )
    except (EndpointError, ServeError) as exc:
        fail(str(exc), 2)
    sys.exit(code)


@cli.command()
@db_option
def demo(db: str | None) -> None:
    """Run a scripted demo agent and client through the relay, then print what was recorded."""
    from .demo import run_demo

    path = resolve_db_path(db)
    status = run_demo(path)
    sys.exit(status or _print_recording(path))


def _print_recording(db_path: os.PathLike[str]) -> int:
    """What a user would type next after the demo: the session list, the session's frames, its transcript."""
    for title, args in (
        ("$ acp-relay show", []),
        ("$ acp-relay show last", ["last"]),
        ("$ acp-relay show last --transcript", ["last", "--transcript"]),
    ):
        print(title, flush=True)
        try:
            cli.main(["show", "--db", str(db_path), *args], prog_name="acp-relay", standalone_mode=False)
        except SystemExit as exc:
            if exc.code:
                return int(exc.code)
        print(flush=True)
    return 0


@cli.command(context_settings={"max_content_width": 110})
@address_options()
@db_option
@click.option("--frame", type=int, metavar="N", help="One frame in full, with its request or response.")
@show_filter_options
@click.option("--limit", "-n", type=click.IntRange(min=0), metavar="N", help="The first N frames (or sessions).")
@click.option("--tail", "-t", type=click.IntRange(min=0), metavar="N", help="The last N frames.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new frames as a running relay records them.")
@click.option("--raw", is_flag=True, help="Exact recorded bytes, one frame per line.")
@json_option("One JSON object per line: index fields and message (a session listing: its columns).")
@click.option("--transcript", is_flag=True, help="The conversation as a person reads it.")
@click.option("--all", "show_all", is_flag=True, help="List every session, not only the latest 30.")
@wide_option
@pager_option
@color_option()
# Over 60 lines only through its help text and parameters: the body parses options and calls show/command.
def show(
    session: str | None,
    db: str | None,
    connection: str | None,
    frame: int | None,
    methods: tuple[str, ...],
    direction: str | None,
    kinds: tuple[str, ...],
    updates: tuple[str, ...],
    grep: str | None,
    since: str | None,
    until: str | None,
    errors: bool,
    limit: int | None,
    tail: int | None,
    follow: bool,
    raw: bool,
    as_json: bool,
    transcript: bool,
    show_all: bool,
    wide: bool,
    no_pager: bool,
    color: str,
) -> None:
    """Inspect recorded traffic: the sessions, newest first, or the frames of SESSION.

    \b
    SESSION is an id, a unique prefix of one, `last`, or ID@N (the session in connection N).
    Examples:
      acp-relay show                            # recent sessions
      acp-relay show last --tail 20             # the last 20 frames of the newest session
      acp-relay show last -m 'session/prompt' --errors
      acp-relay show last --transcript          # the conversation
      acp-relay show -f                         # follow the newest session live
      acp-relay show --frame 1234               # one frame in full
    """
    from .render.text import Style
    from .show.command import ShowOptions, run_show
    from .store.queries import Filters

    mode = one_of(raw=raw, json=as_json, transcript=transcript)
    follow_after = None
    if follow and session is None and connection is None and not resolve_db_path(db).exists():
        from .store.queries import wait_for_db

        follow_after = 0
        note(f"no database at {resolve_db_path(db)} yet: waiting for the first relay (Ctrl-C to stop)")
        try:
            conn = wait_for_db(resolve_db_path(db))
        except KeyboardInterrupt:  # the way out of --follow, as once it is following
            sys.exit(0)
    else:
        conn = read_db(db)
    flt = Filters.build(
        methods=methods,
        direction=direction,
        kinds=kinds,
        updates=updates,
        grep=grep,
        since=since,
        until=until,
        errors=errors,
    )
    opts = ShowOptions(session, connection, frame, flt, limit, tail, follow, mode or "lines", show_all, follow_after)
    style = Style.detect(sys.stdout, color, wide)
    pager = not (no_pager or follow or mode in ("raw", "json"))
    sys.exit(paged(pager, lambda out: run_show(conn, opts, out, note, style)))


@cli.command(context_settings={"max_content_width": 110})
@address_options()
@db_option
@click.option("--all", "check_all", is_flag=True, help="Every connection in the database.")
@click.option("--json", "as_json", is_flag=True, help="JSON Lines: one object per finding, nothing else on stdout.")
@click.option(
    "--min-severity",
    type=click.Choice(["info", "warning", "error"]),
    default="info",
    show_default=True,
    help="Leave out findings below this severity.",
)
@click.option("--rule", "rules", multiple=True, metavar="ID", help="Only this rule (an id or a glob: 'lifecycle.*').")
@click.option("--ignore", multiple=True, metavar="ID", help="Leave out this rule (an id or a glob).")
@click.option(
    "--rules", "list_rules", is_flag=True, help="List every rule: id, severity, description, spec, conformance kit ids."
)
@click.option(
    "--coverage",
    is_flag=True,
    help="List the conformance kit's requirements and how check covers each (rule/partial/...).",
)
@click.option("--protocol", type=click.Choice(["1", "2"]), help="With --coverage: one protocol version's requirements.")
@color_option()
def check(
    session: str | None,
    db: str | None,
    connection: str | None,
    check_all: bool,
    as_json: bool,
    min_severity: str,
    rules: tuple[str, ...],
    ignore: tuple[str, ...],
    list_rules: bool,
    coverage: bool,
    protocol: str | None,
    color: str,
) -> None:
    """Judge recorded traffic against JSON-RPC 2.0, the ACP schemas and the Prompt Lifecycle rules.

    \b
    SESSION is an id, a unique prefix of one, `last`, or ID@N; with no argument the newest connection
    is checked. One line per finding (frame, severity, rule, message, spec), then a summary.
    Exit status: 0 no error, 1 at least one error finding, 2 usage error, no such session or database.
    Examples:
      acp-relay check                       # the newest connection
      acp-relay check last --min-severity warning
      acp-relay check --all --json          # JSON Lines, for tools
      acp-relay check --rules               # every rule with its spec reference and kit ids
      acp-relay check --coverage --protocol 2   # what a clean check means against the conformance kit
    """
    from .check.command import CheckOptions, print_coverage, print_rules, run_check
    from .render.text import Style

    if list_rules:
        sys.exit(guard_stdout(lambda: print_rules(sys.stdout.buffer, as_json)))
    if coverage:
        version = int(protocol) if protocol else None
        sys.exit(guard_stdout(lambda: print_coverage(sys.stdout.buffer, version, as_json)))
    if protocol:
        fail("--protocol goes with --coverage", 2)
    opts = CheckOptions(session, connection, check_all, as_json, min_severity, rules, ignore)
    try:
        conn = read_db(db)
        style = Style.detect(sys.stdout, color)
        sys.exit(guard_stdout(lambda: run_check(conn, opts, sys.stdout.buffer, note, style)))
    except sqlite3.DatabaseError as exc:
        fail(f"cannot read the database: {exc}", DB_UNUSABLE)


@cli.command()
@address_options()
@db_option
@json_option("The numbers as one JSON object on one line.")
def stats(session: str | None, db: str | None, connection: str | None, as_json: bool) -> None:
    """Counts, latencies, turn durations and bytes: for SESSION, a connection, or the whole database.

    \b
    Example:  acp-relay stats last
    """
    from .stats import run_stats

    conn = read_db(db)
    sys.exit(guard_stdout(lambda: run_stats(conn, session, connection, sys.stdout.buffer, as_json=as_json)))


@cli.command()
@address_options()
@db_option
@click.option("--output", "-o", metavar="FILE", help="Write the page here (and do not open it).")
@click.option("--no-open", is_flag=True, help="Only write the page and print its path.")
@click.option(
    "--check/--no-check",
    "check",
    default=None,
    help="Run `check` over the frames for the page (default: when installed, up to 20,000 frames).",
)
@json_option("The page's path as one JSON object.")
def view(
    session: str | None,
    db: str | None,
    connection: str | None,
    output: str | None,
    no_open: bool,
    check: bool | None,
    as_json: bool,
) -> None:
    """Write SESSION (default `last`) as one self-contained HTML page and open it in the browser.

    \b
    The page has a sequence diagram, the frames in full, the transcript and a filter; it loads nothing
    from the network. By default it goes to a private temporary file; its path is printed.
    Example:  acp-relay view last --no-open
    """
    from .view.command import run_view

    try:
        path = run_view(read_db(db), session, connection, output, not (no_open or output), note, check)
    except OSError as exc:
        fail(f"cannot write the page: {exc}")
    if as_json:
        click.echo(json_line({"page": str(path)}))
    else:
        from .render.text import clean

        click.echo(clean(str(path)))  # a file name may hold controls too (--json has it exact)


@cli.command()
@db_option
@click.option("--older-than", metavar="AGE", help="Delete connections that ended longer ago than AGE (30d, 12h, 90m).")
@click.option(
    "--max-size", metavar="SIZE", help="Then delete the oldest connections until the database fits SIZE (500MB)."
)
@click.option("--dry-run", is_flag=True, help="Say what would be deleted and the size after, delete nothing.")
@json_option("JSON Lines: one object per connection deleted, then the totals.")
def prune(db: str | None, older_than: str | None, max_size: str | None, dry_run: bool, as_json: bool) -> None:
    """Delete whole connections, oldest first, then reclaim the space. Safe while relays are writing.

    \b
    Example:  acp-relay prune --older-than 30d --max-size 500MB
    """
    from .render.text import clean, fmt_time
    from .store import retention, units

    if older_than is None and max_size is None:
        raise click.UsageError("give --older-than AGE, --max-size SIZE, or both")
    try:
        age = units.parse_duration(older_than) if older_than else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--older-than") from exc
    try:
        size = units.parse_size(max_size) if max_size else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--max-size") from exc
    conn = open_existing(db)
    result = retention.prune(conn, older_than=age, max_size=size, dry_run=dry_run)
    verb = "would delete" if dry_run else "deleted"
    for r in result.removed:
        if as_json:
            click.echo(
                json_line(
                    {
                        "connection": r.connection,
                        "started_at": r.started_at,
                        "label": r.label,
                        "frames": r.frames,
                        "dry_run": dry_run,
                    }
                )
            )
        else:
            label = f" [{clean(r.label)}]" if r.label else ""
            click.echo(f"{verb} connection {r.connection}{label} started {fmt_time(r.started_at)}: {r.frames} frames")
    if as_json:
        totals = {"connections": result.connections, "frames": result.frames, "size_before": result.size_before}
        click.echo(json_line({**totals, "size_after": result.size_after, "dry_run": dry_run}))
        return
    about = "about " if result.estimated else ""
    click.echo(
        f"{verb} {result.connections} connections ({result.frames} frames); "
        f"database {retention.human_size(result.size_before)} -> {about}{retention.human_size(result.size_after)}"
    )


@cli.command()
@db_option
@address_options(required=True, connection=False)
@json_option("What was deleted as one JSON object: session, connection, frames.")
def delete(db: str | None, session: str, as_json: bool) -> None:
    """Remove one session's frames (SESSION: an id, a unique prefix, `last`, or ID@N). Safe while relays are
    writing."""
    from .protocol.errors import UserError
    from .render.text import clean
    from .store import retention
    from .store.liveness import live_writer
    from .store.queries import resolve_view

    conn = open_existing(db)
    view = resolve_view(conn, session)
    assert view.session_id is not None
    name = f"{clean(view.session_id)}@{view.connection_id}"
    writer = live_writer(conn, view.connection_id)
    if writer is not None:  # `last` is usually the session being recorded: say which one, touch nothing
        raise UserError(
            f"session {name} is still being recorded (relay pid {writer}); nothing deleted",
            hint="delete it once that relay has exited",
        )
    frames = retention.delete_session(conn, view.session_id, view.connection_id)
    if as_json:
        click.echo(json_line({"session": view.session_id, "connection": view.connection_id, "frames": frames}))
    else:
        click.echo(f"deleted session {name} ({frames} frames)")


@cli.command()
@db_option
def recover(db: str | None) -> None:
    """Store what the spill journals beside the database kept for relays that died (SIGKILL, power loss).

    \b
    The next `acp-relay run` does the same on its own; this does it now.
    Example:  acp-relay recover
    """
    from .record.recover import run_recover

    sys.exit(run_recover(resolve_db_path(db), click.echo, note))


@cli.command()
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
        from .protocol.remote import EndpointError, parse_listen
        from .replay.listen import run_listen
        from .store.views import resolve_view
        from .transport.listen import ListenError

        resolve_view(read_db(db), session_in(session, connection))  # a missing session fails now, not per client
        args = [session] if session is not None else []
        args += ["-c", str(connection)] if connection is not None else []
        args += ["--speed", speed] + (["--strict"] if strict else [])
        try:
            code = run_listen(parse_listen(listen), resolve_db_path(db), args, token=token)
        except (EndpointError, ListenError) as exc:
            fail(str(exc), 2)
        sys.exit(code)
    from .replay import run_replay

    sys.exit(run_replay(resolve_db_path(db), session_in(session, connection), speed=speed, strict=strict, log=note))


@cli.command(context_settings={"allow_interspersed_args": True})
@address_options(required=True, connection=False)
@db_option
@click.option("--cwd", type=click.Path(file_okay=False), help="Working directory for the agent and session/new.")
@click.option(
    "--timeout", type=click.FloatRange(min=0, min_open=True), default=120.0, show_default=True, help="Seconds per turn."
)
@click.option(
    "--answer",
    type=click.Choice(["recorded", "allow", "deny"]),
    default="recorded",
    show_default=True,
    help="Permission requests the recording has no choice for (recorded: deny them).",
)
@click.option(
    "--fs",
    type=click.Choice(["recorded", "real", "none"]),
    default="recorded",
    show_default=True,
    help="File reads from the recording, from the real files under --cwd, or refused; writes only with real.",
)
@click.option("--label", help='A name for the new connection (default "rerun of SESSION").')
@click.option("--json", "as_json", is_flag=True, help="One JSON object: session, connection, turns, completed, exit.")
@click.argument("agent", nargs=-1, required=True, type=click.UNPROCESSED)
def rerun(
    session: str,
    db: str | None,
    cwd: str | None,
    timeout: float,
    answer: str,
    fs: str,
    label: str | None,
    as_json: bool,
    agent: tuple[str, ...],
) -> None:
    """Stand in for the editor: play recorded SESSION against a live AGENT, recorded as a new run.

    \b
    SESSION is an id, a unique prefix, `last`, or ID@N (`last@N`: the newest session of connection N).
    Exit status: 0 every turn completed, 3 a turn timed out, 4 the agent exited early, 2 usage.
    Example:  acp-relay rerun last@1 -- my-agent --acp && acp-relay diff last@1 last
    """
    from .rerun import Options, print_result, run_rerun

    path = resolve_db_path(db)
    opts = Options(cwd=os.path.abspath(cwd) if cwd else None, timeout=timeout, answer=answer, fs=fs)
    result = run_rerun(path, session, list(agent), options=opts, label=label, log=note)
    if result.exit != 0:
        note(result.message)
    if result.exit != 2:
        print_result(result, sys.stdout, as_json)
    sys.exit(result.exit)


@cli.command(context_settings={"max_content_width": 110})
@click.argument("a")
@click.argument("b")
@db_option
@click.option("--db-b", type=click.Path(dir_okay=False), help="Take B from this database file.")
@click.option(
    "--ignore",
    multiple=True,
    metavar="LAYER",
    help="conversation, protocol, metadata, timing, or a part of the conversation: thoughts, tools, plans, "
    "permissions (repeat or comma-separate).",
)
@click.option(
    "--max-slowdown",
    type=float,
    metavar="FACTOR",
    help="Timing differs when B is more than FACTOR times slower than A (a turn or a method's p50/p95).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object with a key per layer.")
def diff(
    a: str, b: str, db: str | None, db_b: str | None, ignore: tuple[str, ...], max_slowdown: float | None, as_json: bool
) -> None:
    """Compare two recorded sessions: conversation, protocol, metadata and timing, in that order.

    \b
    A and B: session ids, unique prefixes, `last`, or ID@N (`last@N`: the newest session of connection N).
    Exit status: 0 the same, 1 they differ, 2 usage error (A and B the same session too).
    Timing differs only with --max-slowdown.
    Example:  acp-relay diff last@2 last --ignore thoughts
    """
    from .diff import run_diff

    path = resolve_db_path(db)
    path_b = resolve_db_path(db_b) if db_b else None

    def diff_them() -> int:
        return run_diff(
            path, a, b, sys.stdout, db_b=path_b, ignore=ignore, max_slowdown=max_slowdown, as_json=as_json, warn=note
        )

    sys.exit(guard_stdout(diff_them))


@cli.command(name="export")
@address_options()
@db_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["sqlite", "ndjson", "acp-devtools"]),
    default="sqlite",
    show_default=True,
    help="sqlite: a standalone database; ndjson: one frame per line; acp-devtools: a SessionExport v1 file.",
)
@click.option("-o", "--output", metavar="FILE", help="Where to write (created 0600, never overwritten).")
@redact_options(
    "Also redact this dotted path or, as re:REGEX, matches in string values.",
    "Export credentials as stored (the default redacts them again).",
    redact_first=False,
)
def export_cmd(
    session: str | None,
    connection: int | str | None,
    db: str | None,
    fmt: str,
    output: str | None,
    no_redact: bool,
    redact: tuple[str, ...],
) -> None:
    """Write SESSION (an id, a prefix, `last`, ID@N) or a whole connection (-c N) to a file to share.

    \b
    sqlite (default) writes SESSION.acp-relay.db; ndjson and acp-devtools go to stdout without -o.
    Examples:
      acp-relay export last -o bug.db           # then: acp-relay show --db bug.db last
      acp-relay export last --format acp-devtools -o session.json
    """
    from .share.export import run_export

    policy = policy_from(redact, no_redact)
    sys.exit(run_export(read_db(db), session, connection, fmt, output, policy, note, sys.stdout.buffer))


@cli.command(name="import")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@db_option
@click.option("--label", help="A name for the imported connection(s) (default: the file name).")
@json_option("One JSON object per imported connection: file, format, connection, frames, sessions.")
def import_cmd(files: tuple[Path, ...], db: str | None, label: str | None, as_json: bool) -> None:
    """Bring captures in as connections with status `imported`: acp-relay exports (sqlite or ndjson),
    acp-devtools SessionExport v1 files, and ACP conductor traces (.jsons).

    \b
    Each file is one transaction: a bad file imports nothing. Exit 0 when every file was imported, 1 when
    one was not (bad, unknown format, or imported before).
    Example:  acp-relay import session.json && acp-relay show last
    """
    from .share.importer import ImportFailed, import_file
    from .store import db as dbmod

    try:
        conn = dbmod.connect(resolve_db_path(db))
    except (OSError, sqlite3.DatabaseError) as exc:
        fail(f"cannot open {resolve_db_path(db)}: {exc}", 5)
    status = 0
    for path in files:
        try:
            for record, line in import_file(conn, path, label, note):
                click.echo(json_line(record) if as_json else line)
        except ImportFailed as exc:
            note(str(exc))
            status = 1
    sys.exit(status)


@cli.command()
@address_options()
@db_option
@json_option("Everything as one JSON object.")
def info(session: str | None, connection: int | str | None, db: str | None, as_json: bool) -> None:
    """What SESSION's peers said about themselves: versions, capabilities both sides, auth methods, modes,
    config options and models, commands, extensions seen, and counts.

    \b
    Example:  acp-relay info last
    """
    from .share.info import run_info

    conn = read_db(db)
    sys.exit(guard_stdout(lambda: run_info(conn, session, connection, sys.stdout.buffer, as_json=as_json)))


@cli.command()
@click.argument("pattern")
@db_option
@click.option("--session", "-s", metavar="SESSION", help="Only this session (an id, a prefix, `last`, ID@N).")
@connection_option("Only this connection (or --session within it).")
@click.option("--method", "-m", "method", metavar="GLOB", help="Only frames whose method matches GLOB.")
@click.option("--limit", "-n", type=click.IntRange(min=1), metavar="N", help="The first N matches.")
@json_option("One JSON object per matching frame.")
@color_option("Highlight matches on a terminal only; NO_COLOR turns it off.")
def search(
    pattern: str,
    db: str | None,
    session: str | None,
    connection: int | str | None,
    method: str | None,
    limit: int | None,
    as_json: bool,
    color: str,
) -> None:
    """Full-text search over what people read: prompts, agent messages and thoughts, tool calls, plans,
    terminal output and error messages, in every recorded session.

    \b
    PATTERN is words (all must match), "a phrase", prefix*, or SQLite FTS5 syntax (a OR b, NOT c).
    The index is brought up to date first, so the first search of a big database takes a while.
    Exit 0 when something matched, 1 when nothing did, 2 on errors.
    Example:  acp-relay search 'failing test' --session last
    """
    from .render.text import Style
    from .search import run_search

    path = resolve_db_path(db)
    style = Style.detect(sys.stdout, color)
    out = sys.stdout.buffer
    where = (session, connection)
    sys.exit(guard_stdout(lambda: run_search(path, pattern, where, method, limit, out, style, as_json=as_json)))


@cli.command(context_settings={"max_content_width": 110})
@click.argument("editor", required=False, metavar="[zed|jetbrains|neovim|emacs]")
@click.option("--name", metavar="NAME", help='The entry\'s name in the editor (default "AGENT (recorded)").')
@db_option
@click.option("--label", metavar="TEXT", help="The connections' label (default: the entry's name).")
@click.option("--wrap", metavar="NAME", help="Put `acp-relay run` in front of the existing entry NAME.")
@click.option("--unwrap", metavar="NAME", help="Take `acp-relay run` out of entry NAME again.")
@click.option("--undo", is_flag=True, help="Take back setup's last change to the file, byte for byte.")
@click.option("--force", is_flag=True, help="With --undo: even if the file changed since setup wrote it.")
@click.option("--dry-run", is_flag=True, help="Print the diff, write nothing.")
@click.option("--list", "list_entries", is_flag=True, help="The agent entries of every known editor config.")
@click.argument("agent", nargs=-1, type=click.UNPROCESSED)
def setup(
    editor: str | None,
    name: str | None,
    db: str | None,
    label: str | None,
    wrap: str | None,
    unwrap: str | None,
    undo: bool,
    force: bool,
    dry_run: bool,
    list_entries: bool,
    agent: tuple[str, ...],
) -> None:
    """Record an agent: write it into EDITOR's config behind `acp-relay run`, with absolute paths.

    \b
    zed and jetbrains have their JSON config edited (comments and layout kept, a backup beside it, the
    diff printed); neovim and emacs get a snippet to paste. Running it twice changes nothing.
    Examples:
      acp-relay setup zed -- my-agent --acp     # a new entry "my-agent (recorded)"
      acp-relay setup zed --wrap "Claude Code"  # record an entry you already have
      acp-relay setup zed --undo                # the file as it was before the last change
      acp-relay setup --list
    """
    from .render.text import escape
    from .setup import Request, SetupError, run_setup

    req = Request(editor, list(agent), name, db, label, dry_run, wrap, unwrap, undo, force, list_entries)
    try:
        sys.exit(guard_stdout(lambda: run_setup(req, sys.stdout, note, os.environ)))
    except SetupError as exc:  # names and paths come from the user's file: escaped like any untrusted text
        fail(escape(str(exc)), exc.status, escape(exc.hint) if exc.hint else None)


@cli.command()
@click.argument("editor", required=False, metavar="[zed|jetbrains]")
@click.option("--json", "as_json", is_flag=True, help="JSON Lines: one object per check.")
def doctor(editor: str | None, as_json: bool) -> None:
    """Check what the editors' configs start: acp-relay, the agent, the database. One line per check.

    \b
    Each line is ok, warn or FAIL, with a hint. Exit status: 0 nothing failed, 1 something did.
    Example:  acp-relay doctor zed
    """
    from .doctor import EDITORS, run_doctor

    if editor is not None and editor not in EDITORS:
        fail(f"unknown editor {editor!r}; doctor reads the configs of: {', '.join(EDITORS)}", USAGE)
    sys.exit(guard_stdout(lambda: run_doctor(editor, sys.stdout, os.environ, as_json=as_json)))


@cli.group(invoke_without_command=True)
@click.pass_context
def otel(ctx: click.Context) -> None:
    """Recorded sessions as OpenTelemetry traces, for the tracing backend a team already runs.

    \b
    Example:  acp-relay otel export last --endpoint http://localhost:4318
    """
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


@otel.command(name="export", context_settings={"max_content_width": 110})
@click.argument("session", required=False, metavar="[SESSION]")
@db_option
@connection_option("Every session of connection N (or SESSION within it).")
@click.option("--since", metavar="AGE", help="The sessions active in the last AGE (30m, 12h, 1d).")
@click.option("--all", "export_all", is_flag=True, help="Every recorded session.")
@click.option("--endpoint", metavar="URL", help="The collector's base URL (default: OTEL_EXPORTER_OTLP_ENDPOINT).")
@click.option("--protocol", type=click.Choice(["http/protobuf", "grpc"]), help="Default: OTEL_EXPORTER_OTLP_PROTOCOL.")
@click.option("--header", "headers", multiple=True, metavar="K=V", help="A header for the collector (repeatable).")
@click.option("--file", "file", metavar="PATH", help="Write OTLP JSON lines to PATH instead of sending.")
@click.option("--content", is_flag=True, help="Include message text, tool input and output (after redaction).")
@click.option("--check", "with_check", is_flag=True, help="Add `acp-relay check` findings as span events.")
@click.option("--pending", is_flag=True, help="Send the spans `acp-relay run --otlp` could not send.")
@redact_options(
    "Also redact this dotted path or, as re:REGEX, matches in string values.",
    "Export credentials as stored (the default redacts them again).",
    redact_first=False,
)
def otel_export(
    session: str | None,
    db: str | None,
    connection: int | str | None,
    since: str | None,
    export_all: bool,
    endpoint: str | None,
    protocol: str | None,
    headers: tuple[str, ...],
    file: str | None,
    content: bool,
    with_check: bool,
    pending: bool,
    no_redact: bool,
    redact: tuple[str, ...],
) -> None:
    """Send recorded sessions to an OTLP collector as traces: one per session, a span per turn, tool call
    and request. SESSION is an id, a unique prefix, `last` (the default) or ID@N.

    \b
    Exit status: 0 all sent, 1 a session was not (collector down or refusing), 2 usage, no such session.
    Examples:
      acp-relay otel export last --endpoint http://localhost:4318
      acp-relay otel export --since 1d --header 'x-api-key=...'
      acp-relay otel export last --file trace.jsonl
      acp-relay otel export --pending           # what `run --otlp` could not send
    """
    from .otel.command import ExportOptions, run_export

    opts = ExportOptions(session, connection, since, export_all, endpoint, protocol, list(headers), file, content)
    opts.check, opts.policy = with_check, policy_from(redact, no_redact)
    opts.pending, opts.db_path = pending, resolve_db_path(db)
    try:
        sys.exit(run_export(read_db(db), opts, sys.stdout, note))
    except sqlite3.DatabaseError as exc:
        fail(f"cannot read the database: {exc}", DB_UNUSABLE)


@otel.command(name="follow", hidden=True)
@db_option
@click.option("--relay-pid", type=int, required=True)
@click.option("--after", type=float, required=True)
@click.option("--endpoint")
@click.option("--protocol", type=click.Choice(["http/protobuf", "grpc"]))
@click.option("--header", "headers", multiple=True)
@click.option("--content", is_flag=True)
@click.option("--redact", multiple=True)
@click.option("--no-redact", is_flag=True)
def otel_follow(
    db: str | None,
    relay_pid: int,
    after: float,
    endpoint: str | None,
    protocol: str | None,
    headers: tuple[str, ...],
    content: bool,
    redact: tuple[str, ...],
    no_redact: bool,
) -> None:
    """What `acp-relay run --otlp` starts beside the relay: send each turn of its connection as it ends."""
    from .otel.command import parse_headers
    from .otel.live import FollowOptions, follow

    opts = FollowOptions(resolve_db_path(db), relay_pid, after, endpoint, protocol, None, content)
    opts.policy = policy_from(redact, no_redact)
    opts.headers = parse_headers(list(headers))
    sys.exit(follow(opts, note))


def main() -> None:
    cli(prog_name="acp-relay")
