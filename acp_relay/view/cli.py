"""`acp-relay view`'s click declaration: view/command.py's `compute` gathers the page's data
(view/data.py), its `render` and `save` write the page."""

from __future__ import annotations

import click

from ..cli_support import address_options, db_option, fail, json_line, json_option, note, read_db


@click.command()
@address_options()
@db_option
@click.option(
    "--output",
    "-o",
    metavar="FILE",
    help="Write the page here (and do not open it); an existing file only with --force.",
)
@click.option("--force", is_flag=True, help="With -o: replace a regular file there (never a link, a device or a FIFO).")
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
    force: bool,
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
    from .command import compute, open_page, save

    page = compute(read_db(db), session, connection, check=check)
    for text in page.notes:
        note(text)
    try:
        path = save(page, output, force=force)
        if not (no_open or output or open_page(path)):
            note("could not start a browser; open the file yourself")
    except OSError as exc:
        fail(f"cannot write the page: {exc}")
    if as_json:
        click.echo(json_line({"page": str(path)}))
    else:
        from ..render.text import clean

        click.echo(clean(str(path)))  # a file name may hold controls too (--json has it exact)
