"""`acp-relay diff A B`: what changed between two recorded sessions, layer by layer.

Reads both sessions through store.queries (one pass each), folds them with protocol.diff's Digester and
`compute` returns each layer (the conversation turn by turn, the protocol sequence, the metadata the peers
announced, timing side by side); `render` prints those that differ. Exit status 0 when the compared layers
are the same, 1 when they differ, 2 for usage errors (unknown session, bad option, no database).
"""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import sys
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import IO, Any

from ..protocol.diff import IGNORABLE, LAYERS, Digester, Layer, SessionDigest, compare
from ..protocol.diff.compare import ADDED, HEADER, HUNK, REMOVED, SLOWER
from ..protocol.errors import ANSWER, OK, UserError
from ..protocol.jsonrpc import loads
from ..protocol.materialize import Event
from ..render.text import Style, clean, safe_dumps, write_painted
from ..store import queries, runs
from ..store.rows import database_file

SAME, DIFFERENT = OK, ANSWER  # the exit-code table's names, as diff means them


class DiffError(UserError):
    """A problem the user can fix: one line on stderr, exit status 2."""


def load_digest(conn: sqlite3.Connection, session: str) -> SessionDigest:
    """SESSION (id, prefix, `last`) folded for the diff layers."""
    try:
        view = queries.resolve_view(conn, session)
    except queries.UserError as exc:
        raise DiffError(str(exc)) from None
    name = f"{view.session_id}@{view.connection_id}" if view.session_id else f"connection {view.connection_id}"
    d = Digester(name, view.protocol_version or 1)
    for seq, direction, ts, raw in runs.iter_session_lines(conn, view):
        try:
            value = loads(raw[:-1] if raw.endswith(b"\r") else raw)
        except (ValueError, TypeError, UnicodeDecodeError, RecursionError):
            value = None
        for msg in value if isinstance(value, list) and value else [value]:
            d.feed(Event(seq, ts, direction, msg) if isinstance(msg, dict) else None, direction=direction)
    return d.finish()


def _load(path: str, session: str) -> SessionDigest:
    """B folded in the forked child: its own connection (a parent's connection is never used across fork)."""
    conn = queries.open_db(path)
    try:
        return load_digest(conn, session)
    finally:
        conn.close()


def _load_both(a: tuple[sqlite3.Connection, str], b: tuple[sqlite3.Connection, str]) -> list[SessionDigest]:
    """Both sessions; B in a forked child while this process folds A (each fold is CPU-bound Python)."""
    path_b = database_file(b[0])
    if sys.platform != "linux" or path_b is None:
        return [load_digest(*a), load_digest(*b)]
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        later = pool.submit(_load, path_b, b[1])
        first = load_digest(*a)
        return [first, later.result()]


def parse_ignore(values: Iterable[str]) -> frozenset[str]:
    """--ignore's layers (repeated or comma-separated); a DiffError names one that is not a layer."""
    out = set()
    for value in values:
        for name in value.split(","):
            name = name.strip()
            if name not in IGNORABLE:
                raise DiffError(f"--ignore takes {', '.join(IGNORABLE)}; not {name!r}")
            out.add(name)
    return frozenset(out)


def check_slowdown(max_slowdown: float | None) -> None:
    if max_slowdown is not None and not max_slowdown >= 1.0:
        raise DiffError(f"--max-slowdown takes a factor of 1 or more (2 = twice as slow), not {max_slowdown}")


def _refuse_one_session(conn: sqlite3.Connection, a: str, b: str) -> None:
    """A and B naming one session would compare it with itself and always say `same`: in CI, a gate that
    cannot fail (`diff sess-1 last` right after recording sess-1)."""
    va, vb = queries.resolve_view(conn, a), queries.resolve_view(conn, b)
    if (va.connection_id, va.session_id) == (vb.connection_id, vb.session_id):
        name = f"{va.session_id}@{va.connection_id}"
        raise DiffError(f"{a} and {b} are both session {name}: compare two different sessions (last@1 last)")


def _same_file(conn_a: sqlite3.Connection, conn_b: sqlite3.Connection) -> bool:
    if conn_b is conn_a:
        return True
    file_a, file_b = database_file(conn_a), database_file(conn_b)
    return file_a is not None and file_b is not None and os.path.realpath(file_a) == os.path.realpath(file_b)


@dataclass
class Compared:
    """Two sessions folded and compared: each layer says whether (and how) they differ."""

    a: SessionDigest
    b: SessionDigest
    layers: list[Layer]

    @property
    def differs(self) -> bool:
        return any(layer.differs for layer in self.layers)

    @property
    def status(self) -> int:
        """The exit status: 0 the same, 1 they differ."""
        return DIFFERENT if self.differs else SAME


def compute(
    conn: sqlite3.Connection,
    a: str,
    b: str,
    *,
    conn_b: sqlite3.Connection | None = None,
    ignore: Iterable[str] = (),
    max_slowdown: float | None = None,
) -> Compared:
    """Compare session A with session B (of `conn_b` when given, else of `conn`); a DiffError for a layer
    that is none, a factor under 1, or A and B one session of one database."""
    ignored = parse_ignore(ignore)
    check_slowdown(max_slowdown)
    if conn_b is None or _same_file(conn, conn_b):
        _refuse_one_session(conn, a, b)
    da, db = _load_both((conn, a), (conn_b if conn_b is not None else conn, b))
    return Compared(da, db, compare(da, db, ignore=ignored, max_slowdown=max_slowdown))


def render_json(compared: Compared, out: IO[bytes]) -> None:
    """--json: one object, a key per layer, and the exit status."""
    obj: dict[str, Any] = {"a": compared.a.name, "b": compared.b.name, "same": not compared.differs}
    obj |= {layer.name: layer.to_json() for layer in compared.layers}
    obj["exit"] = compared.status
    out.write(safe_dumps(obj) + b"\n")


# Each kind of line in the colors `git diff` gives it (color.diff.meta, frag, old, new): a layer's heading and
# the ---/+++ lines bold, the @@ ... @@ of a hunk cyan (the section after it plain), removed lines red, added
# green, context plain; a timing row slower than --max-slowdown red.
PAINT = {HEADER: "1", HUNK: "36", REMOVED: "31", ADDED: "32", SLOWER: "31"}


def render(compared: Compared, out: IO[bytes], style: Style | None = None) -> None:
    """The text report, every line escaped, then painted (only when `style` says color) by its kind."""
    style = style or Style()
    write_painted(out, _painted(report_lines(compared.a, compared.b, compared.layers)), style)


def _painted(lines: list[tuple[str, str]]) -> list[list[tuple[str, str | None]]]:
    """Each line as its (text, SGR code) pieces, the text one line cut to LINE_MAX (clean); a hunk header
    is painted up to its second @@, as git paints it."""
    out: list[list[tuple[str, str | None]]] = []
    for text, kind in lines:
        head, mark, rest = text.partition(" @@")
        if kind == HUNK and mark:
            out.append([(clean(head + mark), PAINT[HUNK]), (clean(rest), None)])
        else:
            out.append([(clean(text), PAINT.get(kind))])
    return out


def report_lines(a: SessionDigest, b: SessionDigest, layers: list[Layer]) -> list[tuple[str, str]]:
    """The text report as (line, its kind): a summary line, then each layer that differs (timing only with
    --max-slowdown)."""
    differing = [layer.name for layer in layers if layer.differs]
    head = f"A {a.name} ({_turns(a)})  B {b.name} ({_turns(b)}): "
    lines = [(head + (f"differ in {', '.join(differing)}" if differing else "same" + _compared(layers)), "")]
    for layer in layers:
        if layer.differs:
            title = f"## {layer.name}"
        elif layer.name == "timing" and not layer.ignored and layer.data.get("max_slowdown") is not None:
            title = f"## timing (within x{layer.data['max_slowdown']:g})"
        else:
            continue
        kinds = layer.kinds + [""] * (len(layer.lines) - len(layer.kinds))
        lines += [("", ""), (title, HEADER), *zip(layer.lines, kinds, strict=False)]
    return lines


def _turns(d: SessionDigest) -> str:
    n = len(d.state.turns)
    total = sum(t for t in d.turn_durations if t is not None)
    return f"{n} turn{'s' if n != 1 else ''}, {total:.2f}s"


def _compared(layers: list[Layer]) -> str:
    ignored = [layer.name for layer in layers if layer.ignored]
    compared = [n for n in LAYERS if n not in ignored]
    return f" ({', '.join(compared)} compared)" if ignored else ""
