"""`acp-relay view`: write one self-contained HTML page of a recorded session and open it.

The page is a template (page.html) with its stylesheet (page.css), its script (page.js) and the session's
data (data.py) put in at build time. Recorded bytes only ever travel inside a JSON block whose `<` are
escaped, so nothing recorded can end that block; the script inserts them as text, never as markup; and a
Content-Security-Policy that names the hashes of our own style and script lets nothing else run or load.
"""

from __future__ import annotations

import base64
import hashlib
import html
import os
import sqlite3
import tempfile
import webbrowser
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import IO, Any

import orjson

from ..fdio import write_file_atomically
from ..render.text import clean
from ..store import db
from ..store.queries import resolve_view
from .data import page_data

_SLOTS = ("{{CSP}}", "{{TITLE}}", "{{CSS}}", "{{DATA}}", "{{JS}}")


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def embed_json(data: Any) -> bytes:
    """JSON that is safe inside <script type="application/json">: every `<` escaped, so no `</script>`."""
    return orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS).replace(b"<", b"\\u003c")


def render_page(data: dict[str, Any], title: str) -> bytes:
    """The whole page: template, inline style and script with their hashes in the CSP, the data block."""
    template, css, js = _asset("page.html"), _asset("page.css"), _asset("page.js")
    for name, text, closer in (("page.css", css, "</style"), ("page.js", js, "</script")):
        if closer in text.lower():
            raise RuntimeError(f"{name} must not contain {closer}")
    csp = (
        "default-src 'none'; "
        f"script-src {_hash(js)}; style-src {_hash(css)}; img-src data:; "
        "connect-src 'none'; font-src 'none'; media-src 'none'; object-src 'none'; frame-src 'none'; "
        "worker-src 'none'; manifest-src 'none'; base-uri 'none'; form-action 'none'"
    )
    values = {
        "{{CSP}}": html.escape(csp).encode(),
        "{{TITLE}}": html.escape(clean(title)).encode(),  # a recorded id: escaped as every view escapes it
        "{{CSS}}": css.encode("utf-8"),
        "{{DATA}}": embed_json(data),
        "{{JS}}": js.encode("utf-8"),
    }
    out: list[bytes] = []
    rest = template
    for slot in _SLOTS:  # in template order, each once: nothing substituted is searched again
        head, sep, rest = rest.partition(slot)
        if not sep:
            raise RuntimeError(f"page.html lacks {slot}")
        out += [head.encode("utf-8"), values[slot]]
    out.append(rest.encode("utf-8"))
    return b"".join(out)


@dataclass
class Page:
    """A session's (or connection's) page before it is written: its title and the data block it embeds."""

    title: str
    data: dict[str, Any]
    notes: list[str] = field(default_factory=list)  # about the session named (a prefix that matched twice...)


def compute(
    conn: sqlite3.Connection,
    session: str | None = None,
    connection: int | str | None = None,
    *,
    check: bool | None = None,
) -> Page:
    """The page of SESSION (default `last`) or a connection; `check` findings on it (None: when installed and
    the session is not too big)."""
    view = resolve_view(conn, session if session is not None or connection is not None else "last", connection)
    return Page(f"acp-relay view: {view.name}", page_data(conn, view, check), list(view.notes))


def render(page: Page, out: IO[bytes], style: Any = None) -> None:
    """The whole HTML document (render_page); no terminal style: `style` is taken for the common shape."""
    out.write(render_page(page.data, page.title))


def save(page: Page, output: str | None, *, force: bool = False) -> Path:
    """The page written to `output`, or to a private temporary file (write_page); its path."""
    return write_page(render_page(page.data, page.title), output, force=force)


def open_page(path: Path) -> bool:
    """Open the page in the browser; False when none could start."""
    return webbrowser.open(path.resolve().as_uri())


def write_page(page: bytes, output: str | None, *, force: bool = False) -> Path:
    """Write to `output` (mode 0600, like exports: a page holds the whole session; by fdio.check_target's
    rule: a new file, or with `force` a regular file replaced), or to a new private
    temporary file in the one directory of view pages (store.db.pages_dir), whose pages older than a day
    go at each view and all at `prune`."""
    if output:
        path = Path(output)
        write_file_atomically(path, page, force=force)
        return path
    where = db.pages_dir()
    if where is not None:
        db.clean_pages()
    fd, name = tempfile.mkstemp(prefix="acp-relay-view-", suffix=".html", dir=where)
    with os.fdopen(fd, "wb") as fh:
        fh.write(page)
    return Path(name)
