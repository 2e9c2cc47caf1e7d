"""`acp-relay import`'s click declaration; import_/command.py's `compute` brings the captures in, its
renderers say what came in (the folder cannot be named `import`, a Python keyword: PEP 8's trailing
underscore)."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import click

from ..cli_support import PLAIN_COLOR_HELP, color_option, db_option, fail, json_option, note
from ..store.db import resolve_db_path


@click.command(name="import")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@db_option
@click.option("--label", help="A name for the imported connection(s) (default: the file name).")
@json_option("One JSON object per imported connection: file, format, connection, frames, sessions.")
@color_option(PLAIN_COLOR_HELP)
def import_cmd(files: tuple[Path, ...], db: str | None, label: str | None, as_json: bool, color: str) -> None:
    """Bring captures in as connections with status `imported`: acp-relay exports (sqlite or ndjson),
    acp-devtools SessionExport v1 files, and ACP conductor traces (.jsons).

    \b
    Each file is one transaction: a bad file imports nothing. Exit 0 when every file was imported, 1 when
    one was not (bad, unknown format, or imported before).
    Example:  acp-relay import session.json && acp-relay show last
    """
    from ..store import db as dbmod

    where = resolve_db_path(db)
    with dbmod.removed_if_left_empty(where):  # a failed import into a new database leaves no empty one
        try:
            conn = dbmod.connect(where)
        except (OSError, sqlite3.DatabaseError) as exc:
            fail(f"cannot open {where}: {exc}", 5)
        try:
            status = _import_each(conn, files, label, as_json)
        finally:
            conn.close()
    sys.exit(status)


def _import_each(conn: sqlite3.Connection, files: tuple[Path, ...], label: str | None, as_json: bool) -> int:
    """Each file in its own transaction: 0 when every one came in, 1 when one did not (said, the rest go on)."""
    from .command import ImportFailed, compute, render, render_json

    status = 0
    for path in files:
        try:
            imported = compute(conn, path, label=label)
        except ImportFailed as exc:
            note(str(exc))
            status = 1
            continue
        if as_json:
            render_json(imported, sys.stdout.buffer)
        else:
            render(imported, sys.stdout.buffer)
        sys.stdout.buffer.flush()  # each file's lines before the next file's notes
    return status
