"""`acp-relay diff A B`: what changed between two recorded sessions, layer by layer.

Reads both sessions through store.queries (one pass each), folds them with protocol.diff's Digester and
prints the layers that differ: the conversation turn by turn, the protocol sequence, the metadata the
peers announced, and timing side by side. Exit status 0 when the compared layers are the same, 1 when
they differ, 2 for usage errors (unknown session, bad option, no database).
"""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import IO, Any

from ..protocol.diff import IGNORABLE, LAYERS, Digester, Layer, SessionDigest, compare
from ..protocol.errors import ANSWER, OK, USAGE, UserError
from ..protocol.jsonrpc import loads
from ..protocol.materialize import Event
from ..render.text import clean, safe_dumps
from ..store import queries, runs

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


def _load(path: str | os.PathLike[str], session: str) -> SessionDigest:
    conn = queries.open_db(path)
    try:
        return load_digest(conn, session)
    finally:
        conn.close()


def _load_both(a: tuple[str | os.PathLike[str], str], b: tuple[str | os.PathLike[str], str]) -> list[SessionDigest]:
    """Both sessions; B in a forked child while this process folds A (each fold is CPU-bound Python)."""
    if sys.platform != "linux":
        return [_load(*a), _load(*b)]
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        later = pool.submit(_load, *b)
        first = _load(*a)
        return [first, later.result()]


def parse_ignore(values: tuple[str, ...]) -> frozenset[str]:
    out = set()
    for value in values:
        for name in value.split(","):
            name = name.strip()
            if name not in IGNORABLE:
                raise DiffError(f"--ignore takes {', '.join(IGNORABLE)}; not {name!r}")
            out.add(name)
    return frozenset(out)


def _refuse_one_session(path: str | os.PathLike[str], a: str, b: str) -> None:
    """A and B naming one session would compare it with itself and always say `same`: in CI, a gate that
    cannot fail (`diff sess-1 last` right after recording sess-1)."""
    conn = queries.open_db(path)
    try:
        va, vb = queries.resolve_view(conn, a), queries.resolve_view(conn, b)
    finally:
        conn.close()
    if (va.connection_id, va.session_id) == (vb.connection_id, vb.session_id):
        name = f"{va.session_id}@{va.connection_id}"
        raise DiffError(f"{a} and {b} are both session {name}: compare two different sessions (last@1 last)")


def run_diff(
    db_a: str | os.PathLike[str],
    a: str,
    b: str,
    out: IO[str],
    *,
    db_b: str | os.PathLike[str] | None = None,
    ignore: tuple[str, ...] = (),
    max_slowdown: float | None = None,
    as_json: bool = False,
    warn: Callable[[str], None] = lambda text: None,
) -> int:
    """Compare A and B; print the layers that differ (or one JSON object); return the exit status."""
    try:
        ignored = parse_ignore(ignore)
        if max_slowdown is not None and not max_slowdown >= 1.0:
            raise DiffError(f"--max-slowdown takes a factor of 1 or more (2 = twice as slow), not {max_slowdown}")
        if db_b is None or os.path.realpath(db_b) == os.path.realpath(db_a):
            _refuse_one_session(db_a, a, b)
        digests = _load_both((db_a, a), (db_b if db_b is not None else db_a, b))
    except UserError as exc:
        warn(str(exc) + (f" ({exc.hint})" if exc.hint else ""))
        return USAGE
    layers = compare(digests[0], digests[1], ignore=ignored, max_slowdown=max_slowdown)
    differs = any(layer.differs for layer in layers)
    status = DIFFERENT if differs else SAME
    if as_json:
        obj: dict[str, Any] = {"a": digests[0].name, "b": digests[1].name, "same": not differs}
        obj |= {layer.name: layer.to_json() for layer in layers}
        obj["exit"] = status
        out.write(safe_dumps(obj).decode("utf-8", "replace") + "\n")
        return status
    out.write("\n".join(clean(line) for line in render(digests[0], digests[1], layers)) + "\n")
    return status


def render(a: SessionDigest, b: SessionDigest, layers: list[Layer]) -> list[str]:
    """The text report: a summary line, then each layer that differs (timing only with --max-slowdown)."""
    differing = [layer.name for layer in layers if layer.differs]
    head = f"A {a.name} ({_turns(a)})  B {b.name} ({_turns(b)}): "
    lines = [head + (f"differ in {', '.join(differing)}" if differing else "same" + _compared(layers))]
    for layer in layers:
        if layer.differs:
            lines += ["", f"## {layer.name}", *layer.lines]
        elif layer.name == "timing" and not layer.ignored and layer.data.get("max_slowdown") is not None:
            lines += ["", f"## timing (within x{layer.data['max_slowdown']:g})", *layer.lines]
    return lines


def _turns(d: SessionDigest) -> str:
    n = len(d.state.turns)
    total = sum(t for t in d.turn_durations if t is not None)
    return f"{n} turn{'s' if n != 1 else ''}, {total:.2f}s"


def _compared(layers: list[Layer]) -> str:
    ignored = [layer.name for layer in layers if layer.ignored]
    compared = [n for n in LAYERS if n not in ignored]
    return f" ({', '.join(compared)} compared)" if ignored else ""
