"""`acp-relay view`'s click declaration: the page is built by view/command.py and view/data.py."""

from __future__ import annotations

import click

from ..cli_support import address_options, db_option, fail, json_line, json_option, note, read_db


@click.command()
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
    from .command import run_view

    try:
        path = run_view(read_db(db), session, connection, output, not (no_open or output), note, check)
    except OSError as exc:
        fail(f"cannot write the page: {exc}")
    if as_json:
        click.echo(json_line({"page": str(path)}))
    else:
        from ..render.text import clean

        click.echo(clean(str(path)))  # a file name may hold controls too (--json has it exact)
