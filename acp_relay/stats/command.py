"""`acp-relay stats`: counts per method and variant, latencies, turn durations, first-chunk times, bytes.

For a session, a connection or the whole database: SQL aggregates for the counts, and a few indexed
look-ups per turn; only the frames that end a turn (prompt answers, v2 `state_update`) are parsed.
"""

from __future__ import annotations

import sqlite3
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from ..protocol import vocab
from ..protocol.content import percentile
from ..protocol.jsonrpc import loads_or_none
from ..protocol.words import counted
from ..render.text import Style, align, clean, dumps_line, fmt_ms, write_painted
from ..store import stats_queries as q
from ..store.queries import UserError, View, resolve_view


@dataclass
class Turn:
    """One prompt turn: from the session/prompt request to its answer (v1) or to `idle` (v2)."""

    session_id: str | None
    connection_id: int
    frame: int
    start: float
    end: float | None = None
    first_chunk: float | None = None
    stop_reason: str | None = None

    @property
    def duration_ms(self) -> float | None:
        return None if self.end is None else round((self.end - self.start) * 1000, 3)

    @property
    def first_chunk_ms(self) -> float | None:
        return None if self.first_chunk is None else round((self.first_chunk - self.start) * 1000, 3)


@dataclass
class Stats:
    scope: str
    frames: int = 0
    bytes: dict[str, int] = field(default_factory=lambda: {"c2a": 0, "a2c": 0})
    frames_by_direction: Counter[str] = field(default_factory=Counter)
    methods: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))  # method -> kind -> n
    variants: Counter[str] = field(default_factory=Counter)
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    turns: list[Turn] = field(default_factory=list)
    invalid: int = 0
    errors: int = 0
    batches: int = 0


def compute_stats(conn: sqlite3.Connection, view: View | None) -> Stats:
    """Stats of a view, or of every recorded frame when view is None.

    Counts and bytes are SQL aggregates; turns are found from the prompt requests, and each turn's end and
    first agent chunk by an indexed look-ahead in its session, so a million frames never cross into Python.
    Over 60 lines: a sequence of independent aggregate queries, each a few lines, read best in order.
    """
    if view is None:
        n_conn, n_sess = q.totals(conn)
        st = Stats(f"all recordings: {counted(n_conn, 'connection')}, {counted(n_sess, 'session')}")
    else:
        st = Stats(view.name + ("" if view.session_id is None else f" (connection {view.connection_id})"))
    where = q.scope(conn, view)
    for direction, kind, method, variant, n, size in q.frame_counts(conn, where):
        st.frames += n
        st.frames_by_direction[direction] += n
        st.bytes[direction] = st.bytes.get(direction, 0) + size
        if kind == "invalid":
            st.invalid += n
        elif kind == "batch":
            st.batches += n
        else:
            _count(st, kind, method, variant, n)
    for kind, method, variant, n in q.member_counts(conn, where):
        _count(st, kind, method, variant, n)
    for method, latency in q.latencies(conn, where):
        if method:
            st.latencies[method].append(latency)
    for values in st.latencies.values():
        values.sort()
    versions: dict[int, int] = {}
    answers = {(r[0], r[1]): r[2:] for r in q.prompt_answers(conn, where)}
    for fid, cid, seq, session, mono in q.prompts(conn, where):
        t = Turn(session, cid, fid, mono)
        _finish_turn(conn, t, answers.get((cid, seq)), _version(conn, versions, cid))
        st.turns.append(t)
    return st


def _count(st: Stats, kind: str, method: str | None, variant: str | None, n: int) -> None:
    st.methods[method or "(unmatched response)"][kind] += n
    if kind == "error":
        st.errors += n
    if variant:
        st.variants[variant] += n


def _finish_turn(conn: sqlite3.Connection, t: Turn, answer: tuple[Any, ...] | None, version: int) -> None:
    """Find the turn's end (v1: the prompt's answer; v2: the first `idle` after its insertion) and its first
    agent chunk."""
    if answer is not None and answer[0] == "error":
        t.end, t.stop_reason = answer[1], "error"
    elif answer is not None and version < 2:
        msg = loads_or_none(answer[2])
        result = msg.get("result") if isinstance(msg, dict) else None
        stop = result.get("stopReason") if isinstance(result, dict) else None
        t.end, t.stop_reason = answer[1], stop if isinstance(stop, str) else None
    if t.session_id is None:
        return
    start = t.frame
    if t.end is None and version >= 2:
        start = _inserted(conn, t, answer)
        idle = _first_idle(conn, t, start)
        if idle is not None:
            t.end, t.stop_reason = idle
    first = _first_update(
        conn, t, start, f"IN ('{vocab.AGENT_MESSAGE_CHUNK}', '{vocab.AGENT_MESSAGE}')", lambda m: True, a2c_only=True
    )
    if first is not None and (t.end is None or first[0] <= t.end):
        t.first_chunk = first[0]


def _first_idle(conn: sqlite3.Connection, t: Turn, start: int) -> tuple[float, str | None] | None:
    """(mono, stopReason) of the session's first `idle` state_update after frame `start`."""

    def is_idle(message: Any) -> bool:
        params = message.get("params") if isinstance(message, dict) else None
        update = params.get("update") if isinstance(params, dict) else None
        return isinstance(update, dict) and update.get("state") == vocab.IDLE

    found = _first_update(conn, t, start, f"= '{vocab.STATE_UPDATE}'", is_idle)
    if found is None:
        return None
    stop = found[1]["params"]["update"].get("stopReason")
    return found[0], stop if isinstance(stop, str) else None


def _first_update(
    conn: sqlite3.Connection,
    t: Turn,
    start: int,
    kinds: str,
    accept: Callable[[Any], bool],
    a2c_only: bool = False,
) -> tuple[float, Any] | None:
    """(mono, message) of the session's first update of `kinds` after frame `start` that `accept`s, whether
    alone on its line or inside a batch (v2 agents may batch notifications). Each source is read lazily in
    frame order, so the look-ahead stops at the first match."""
    assert t.session_id is not None
    best: tuple[int, float, Any] | None = None
    for fid, mono, raw in q.updates_after(conn, t.session_id, t.connection_id, start, kinds, a2c_only):
        msg = loads_or_none(raw)
        if accept(msg):
            best = (fid, mono, msg)
            break
    limit = best[0] if best is not None else None
    for fid, idx, mono, raw in q.member_updates_after(conn, t.session_id, t.connection_id, start, kinds, a2c_only):
        if limit is not None and fid >= limit:
            break
        batch = loads_or_none(raw)
        msg = batch[idx] if isinstance(batch, list) and idx < len(batch) else None
        if accept(msg):
            return mono, msg
    return None if best is None else (best[1], best[2])


def _inserted(conn: sqlite3.Connection, t: Turn, answer: tuple[Any, ...] | None) -> int:
    """The frame from which a v2 turn's work counts: its acceptance (the seed: acceptance means insertion),
    or its user message when the agent reported it first. A prompt sent while the agent was running
    does not own the output and the idle of the work already running. Unaccepted: the prompt itself."""
    if answer is None or answer[0] != "response":
        return t.frame
    msg = loads_or_none(answer[2])
    mid = (
        msg.get("result", {}).get("messageId")
        if isinstance(msg, dict) and isinstance(msg.get("result"), dict)
        else None
    )
    if isinstance(mid, str) and t.session_id is not None:
        found = q.user_message_between(conn, t.session_id, t.connection_id, t.frame, answer[3], mid)
        if found is not None:
            return found
    return int(answer[3])


def _version(conn: sqlite3.Connection, cache: dict[int, int], cid: int) -> int:
    if cid not in cache:
        cache[cid] = q.protocol_version(conn, cid) or 1
    return cache[cid]


def _table(
    header: tuple[str, ...], rows: Sequence[tuple[str, ...]], left: frozenset[int] = frozenset({0})
) -> list[tuple[str, bool]]:
    """Aligned columns, text left, numbers right, as (line, heading): the header row is the heading."""
    cells = [header, *rows]
    right = set(range(len(header))) - left
    return [("  ".join(parts).rstrip(), i == 0) for i, parts in enumerate(align(cells, right))]


def _spread(values: list[float]) -> tuple[str, str, str]:
    s = sorted(values)
    return fmt_ms(percentile(s, 50)), fmt_ms(percentile(s, 95)), fmt_ms(s[-1] if s else None)


MAX_TURN_ROWS = 50


def render_stats(st: Stats) -> list[str]:
    """Plain text, stable for the same recording."""
    return [line for line, _ in stats_report(st)]


def stats_report(st: Stats) -> list[tuple[str, bool]]:
    """render_stats' lines as (line, heading): the title and each table's header row are headings."""
    head = [
        f"stats for {clean(st.scope)}",
        f"frames {st.frames}: {st.frames_by_direction['c2a']} editor -> agent, {st.frames_by_direction['a2c']} "
        f"agent -> editor; {st.invalid} invalid, {counted(st.errors, 'error response')}, {counted(st.batches, 'batch', 'batches')}",
        f"bytes  {st.bytes.get('c2a', 0)} editor -> agent, {st.bytes.get('a2c', 0)} agent -> editor",
        "",
    ]
    out = [(line, i == 0) for i, line in enumerate(head)]
    rows = []
    for method in sorted(st.methods):
        c = st.methods[method]
        lat = st.latencies.get(method, [])
        rows.append(
            (
                clean(method),
                str(c["request"]),
                str(c["notification"]),
                str(c["response"]),
                str(c["error"]),
                *(_spread(lat) if lat else ("-", "-", "-")),
            )
        )
    out += _table(("METHOD", "REQUESTS", "NOTIFICATIONS", "RESULTS", "ERRORS", "P50", "P95", "MAX"), rows)
    if st.variants:
        out += [("", False)] + _table(
            ("UPDATE VARIANT", "COUNT"),
            [(clean(v), str(n)) for v, n in sorted(st.variants.items(), key=lambda x: (-x[1], x[0]))],
        )
    out += [("", False), (f"turns {len(st.turns)}", False)]
    if st.turns:
        durations = [t.duration_ms / 1000 for t in st.turns if t.duration_ms is not None]
        firsts = [t.first_chunk_ms / 1000 for t in st.turns if t.first_chunk_ms is not None]
        out += _table(
            ("", "P50", "P95", "MAX"),
            [
                ("turn duration", *(_spread([d * 1000 for d in durations]) if durations else ("-",) * 3)),
                ("prompt to first agent chunk", *(_spread([d * 1000 for d in firsts]) if firsts else ("-",) * 3)),
            ],
        )
        shown = st.turns[-MAX_TURN_ROWS:]
        out += [("", False)] + _table(
            ("TURN", "FRAME", "SESSION", "DURATION", "FIRST CHUNK", "STOP REASON"),
            [
                (
                    str(i),
                    str(t.frame),
                    clean(t.session_id or "-"),
                    fmt_ms(t.duration_ms),
                    fmt_ms(t.first_chunk_ms),
                    clean(t.stop_reason or ("(open)" if t.end is None else "-")),
                )
                for i, t in enumerate(shown, len(st.turns) - len(shown) + 1)
            ],
            left=frozenset({2, 5}),
        )
        if len(shown) < len(st.turns):
            out.append((f"(the last {len(shown)} of {counted(len(st.turns), 'turn')})", False))
    return out


def stats_json(st: Stats) -> dict[str, Any]:
    return {
        "scope": st.scope,
        "frames": st.frames,
        "frames_by_direction": dict(sorted(st.frames_by_direction.items())),
        "bytes": dict(sorted(st.bytes.items())),
        "invalid": st.invalid,
        "errors": st.errors,
        "batches": st.batches,
        "methods": {m: dict(sorted(c.items())) for m, c in sorted(st.methods.items())},
        "variants": dict(sorted(st.variants.items())),
        "latency_ms": {
            m: {"count": len(v), "p50": percentile(v, 50), "p95": percentile(v, 95), "max": v[-1]}
            for m, v in sorted(st.latencies.items())
            if v
        },
        "turns": [
            {
                "frame": t.frame,
                "session": t.session_id,
                "connection": t.connection_id,
                "duration_ms": t.duration_ms,
                "first_chunk_ms": t.first_chunk_ms,
                "stop_reason": t.stop_reason,
            }
            for t in st.turns
        ],
    }


def compute(conn: sqlite3.Connection, session: str | None = None, connection: int | str | None = None) -> Stats:
    """`acp-relay stats [SESSION]` as data: SESSION or `connection` narrow it; neither means every recording."""
    return compute_stats(conn, resolve_view(conn, session, connection) if session or connection else None)


def render(st: Stats, out: IO[bytes], style: Style | None = None) -> None:
    """The text report (render_stats' lines), its headings bold when `style` says color."""
    write_painted(out, ([(line, "1" if heading else None)] for line, heading in stats_report(st)), style or Style())


def render_json(st: Stats, out: IO[bytes]) -> None:
    """--json: one object (stats_json); recorded ids and labels: DEL, C1 and bidi escaped."""
    out.write(dumps_line(stats_json(st)))


__all__ = [
    "Stats",
    "Turn",
    "compute_stats",
    "render_stats",
    "stats_json",
    "compute",
    "render",
    "render_json",
    "percentile",
    "UserError",
]
