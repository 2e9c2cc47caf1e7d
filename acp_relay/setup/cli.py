"""`acp-relay setup`'s click declaration; setup/command.py plans and writes the change."""

from __future__ import annotations

import os
import sys

import click

from ..cli_support import PLAIN_COLOR_HELP, color_option, db_option, fail, guard_stdout


@click.command(context_settings={"max_content_width": 110})
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
@color_option(PLAIN_COLOR_HELP)
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
    color: str,
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
    from ..render.text import escape
    from . import Request, SetupError, run_setup

    req = Request(editor, list(agent), name, db, label, dry_run, wrap, unwrap, undo, force, list_entries)
    try:
        sys.exit(guard_stdout(lambda: run_setup(req, sys.stdout, os.environ)))
    except SetupError as exc:  # names and paths come from the user's file: escaped like any untrusted text
        fail(escape(str(exc)), exc.status, escape(exc.hint) if exc.hint else None)
