"""`acp-relay doctor`'s click declaration; doctor/checks.py runs the checks."""

from __future__ import annotations

import os
import sys

import click

from ..cli_support import color_option, fail, guard_stdout
from ..protocol.errors import USAGE


@click.command()
@click.argument("editor", required=False, metavar="[zed|jetbrains]")
@click.option("--json", "as_json", is_flag=True, help="JSON Lines: one object per check.")
@color_option("ok green, warn yellow, FAIL red, on a terminal only; NO_COLOR turns it off.")
def doctor(editor: str | None, as_json: bool, color: str) -> None:
    """Check what the editors' configs start: acp-relay, the agent, the database. One line per check.

    \b
    Each line is ok, warn or FAIL, with a hint. Exit status: 0 nothing failed, 1 something did.
    Example:  acp-relay doctor zed
    """
    from ..render.text import Style
    from . import EDITORS, run_doctor

    if editor is not None and editor not in EDITORS:
        fail(f"unknown editor {editor!r}; doctor reads the configs of: {', '.join(EDITORS)}", USAGE)
    style = Style.detect(sys.stdout, color)
    sys.exit(guard_stdout(lambda: run_doctor(editor, sys.stdout, os.environ, as_json=as_json, style=style)))
