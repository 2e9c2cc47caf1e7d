"""`acp-relay show`'s click declaration: options parsed here, show/command.py's `compute` reads what was
asked for and its `render` prints it."""

from __future__ import annotations

import functools
import sqlite3
import sys
from typing import Any

import click

from ..cli_support import (
    address_options,
    color_option,
    db_option,
    json_option,
    note,
    one_of,
    paged,
    pager_option,
    read_db,
    show_filter_options,
    wide_option,
)
from ..store.db import resolve_db_path


@click.command(context_settings={"max_content_width": 110})
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
    from ..render.text import Style
    from ..store.queries import Filters
    from .command import ShowOptions

    mode = one_of(raw=raw, json=as_json, transcript=transcript)
    conn, follow_after = _open(db, follow and session is None and connection is None)
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
    sys.exit(paged(pager, functools.partial(_report, conn, opts, style)))


def _report(conn: sqlite3.Connection, opts: Any, style: Any, out: Any) -> int:
    """What was asked for, read (show/command.py's `compute`) and printed to `out` (stdout, maybe paged)."""
    from .command import compute, render

    render(compute(conn, opts), out, style)
    return 0


def _open(db: str | None, may_wait: bool) -> tuple[sqlite3.Connection, int | None]:
    """The database, read-only; `show -f` with nothing named waits for the first relay to create it (and
    then follows from its first frame: `follow_after` 0)."""
    path = resolve_db_path(db)
    if not may_wait or path.exists():
        return read_db(db), None
    from ..store.queries import wait_for_db

    note(f"no database at {path} yet: waiting for the first relay (Ctrl-C to stop)")
    try:
        return wait_for_db(path), 0
    except KeyboardInterrupt:  # the way out of --follow, as once it is following
        sys.exit(0)
