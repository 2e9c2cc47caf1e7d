"""`acp-relay stats`: counts per method and variant, latencies, turn durations, first-chunk times, bytes.

One streaming pass over the frames of a session, a connection or the whole database; only the few frames
that end a turn (prompt responses, v2 `state_update`) have their bytes read and parsed.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import IO, Any, Iterable, Iterator

from .classify import loads
from .show import FrameRow, ShowError, View, batch_members, iter_frames, resolve_view
from .show_format import fmt_ms

# Frames whose bytes stats needs: what ends a turn, and batches (to count their members).
_RAW_WHEN = ("f.update_kind = 'state_update' OR f.kind = 'batch' OR "
             "(f.kind IN ('response', 'error') AND f.method = 'session/prompt')")
_AGENT_TEXT = frozenset({"agent_message_chunk", "agent_message"})


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


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile of sorted values (no interpolation: every number printed was measured)."""
    if not values:
        return None
    return values[max(0, math.ceil(p / 100 * len(values)) - 1)]


def _whole_db(conn: sqlite3.Connection) -> Iterator[FrameRow]:
    cur = conn.cursor()
    cur.row_factory = lambda c, r: FrameRow(*r)
    from .show import FRAME_COLUMNS
    cols = ", ".join(f"f.{c}" if c != "raw" else f"CASE WHEN {_RAW_WHEN} THEN f.raw ELSE x'' END"
                     for c in FRAME_COLUMNS)
    yield from cur.execute(f"SELECT {cols} FROM frames f ORDER BY f.id")


def compute_stats(conn: sqlite3.Connection, view: View | None) -> Stats:
    """Stats of a view, or of every recorded frame when view is None."""
    if view is None:
        n_conn, n_sess = conn.execute("SELECT (SELECT count(*) FROM connections), (SELECT count(*) FROM sessions)"
                                      ).fetchone()
        st = Stats(f"all recordings: {n_conn} connections, {n_sess} sessions")
        rows: Iterable[FrameRow] = _whole_db(conn)
    else:
        st = Stats(view.name + ("" if view.session_id is None else f" (connection {view.connection_id})"))
        rows = iter_frames(conn, view, raw_when=_RAW_WHEN)
    versions: dict[int, int] = {}
    open_turns: dict[tuple[int, int], Turn] = {}  # (connection, prompt seq) -> turn
    latest: dict[tuple[int, str | None], Turn] = {}  # the session's newest open turn
    for f in rows:
        st.frames += 1
        st.frames_by_direction[f.direction] += 1
        st.bytes[f.direction] = st.bytes.get(f.direction, 0) + f.length + (0 if f.unterminated else 1)
        if f.kind == "invalid":
            st.invalid += 1
            continue
        if f.kind == "batch":
            st.batches += 1
            members = [(m["kind"], m["method"], m["update_kind"], m["latency_ms"], m["session_id"], m["request_seq"])
                       for m in batch_members(conn, f.id)]
        else:
            members = [(f.kind, f.method, f.update_kind, f.latency_ms, f.session_id, f.request_seq)]
        for kind, method, variant, latency, session, request_seq in members:
            st.methods[method or "(unmatched response)"][kind] += 1
            if kind == "error":
                st.errors += 1
            if variant:
                st.variants[variant] += 1
            if latency is not None and method:
                st.latencies[method].append(latency)
            key = (f.connection_id, session)
            if kind == "request" and method == "session/prompt" and f.direction == "c2a":
                t = Turn(session, f.connection_id, f.id, f.mono)
                st.turns.append(t)
                open_turns[(f.connection_id, f.seq)] = latest[key] = t
            elif variant in _AGENT_TEXT and f.direction == "a2c":
                t = latest.get(key)
                if t is not None and t.end is None and t.first_chunk is None:
                    t.first_chunk = f.mono
            elif kind in ("response", "error") and method == "session/prompt" and f.kind != "batch":
                t = open_turns.pop((f.connection_id, request_seq), None) if request_seq is not None else None
                if t is None:
                    continue
                if kind == "error":
                    t.end, t.stop_reason = f.mono, "error"
                elif _version(conn, versions, f.connection_id) < 2:
                    result = _parse(f.raw)
                    result = result.get("result") if isinstance(result, dict) else None
                    stop = result.get("stopReason") if isinstance(result, dict) else None
                    t.end, t.stop_reason = f.mono, stop if isinstance(stop, str) else None
                # v2: the answer only accepts the prompt; `state_update` idle ends the turn
            elif variant == "state_update" and f.kind != "batch":
                t = latest.get(key)
                msg = _parse(f.raw)
                update = msg.get("params", {}).get("update") if isinstance(msg, dict) else None
                if t is not None and t.end is None and isinstance(update, dict) and update.get("state") == "idle":
                    stop = update.get("stopReason")
                    t.end, t.stop_reason = f.mono, stop if isinstance(stop, str) else None
    for values in st.latencies.values():
        values.sort()
    return st


def _version(conn: sqlite3.Connection, cache: dict[int, int], cid: int) -> int:
    if cid not in cache:
        row = conn.execute("SELECT protocol_version FROM connections WHERE id = ?", (cid,)).fetchone()
        cache[cid] = (row[0] if row and isinstance(row[0], int) else 1)
    return cache[cid]


def _parse(raw: bytes) -> Any:
    try:
        return loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]], left: frozenset[int] = frozenset({0})) -> list[str]:
    """Aligned columns: text left, numbers right."""
    cells = [header, *rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return ["  ".join(c.ljust(widths[i]) if i in left else c.rjust(widths[i]) for i, c in enumerate(r)).rstrip()
            for r in cells]


def _spread(values: list[float]) -> tuple[str, str, str]:
    s = sorted(values)
    return fmt_ms(percentile(s, 50)), fmt_ms(percentile(s, 95)), fmt_ms(s[-1] if s else None)


MAX_TURN_ROWS = 50


def render_stats(st: Stats) -> list[str]:
    """Plain text, stable for the same recording."""
    out = [f"stats for {st.scope}",
           f"frames {st.frames}: {st.frames_by_direction['c2a']} editor -> agent, {st.frames_by_direction['a2c']} "
           f"agent -> editor; {st.invalid} invalid, {st.errors} error responses, {st.batches} batches",
           f"bytes  {st.bytes.get('c2a', 0)} editor -> agent, {st.bytes.get('a2c', 0)} agent -> editor", ""]
    rows = []
    for method in sorted(st.methods):
        c = st.methods[method]
        lat = st.latencies.get(method, [])
        rows.append((method, str(c["request"]), str(c["notification"]), str(c["response"]), str(c["error"]),
                     *(_spread(lat) if lat else ("-", "-", "-"))))
    out += _table(("METHOD", "REQUESTS", "NOTIFICATIONS", "RESULTS", "ERRORS", "P50", "P95", "MAX"), rows)
    if st.variants:
        out += [""] + _table(("UPDATE VARIANT", "COUNT"),
                             [(v, str(n)) for v, n in sorted(st.variants.items(), key=lambda x: (-x[1], x[0]))])
    out += ["", f"turns {len(st.turns)}"]
    if st.turns:
        durations = [t.duration_ms / 1000 for t in st.turns if t.duration_ms is not None]
        firsts = [t.first_chunk_ms / 1000 for t in st.turns if t.first_chunk_ms is not None]
        out += _table(("", "P50", "P95", "MAX"), [
            ("turn duration", *(_spread([d * 1000 for d in durations]) if durations else ("-",) * 3)),
            ("prompt to first agent chunk", *(_spread([d * 1000 for d in firsts]) if firsts else ("-",) * 3)),
        ])
        shown = st.turns[-MAX_TURN_ROWS:]
        out += [""] + _table(("TURN", "FRAME", "SESSION", "DURATION", "FIRST CHUNK", "STOP REASON"), [
            (str(i), str(t.frame), t.session_id or "-", fmt_ms(t.duration_ms), fmt_ms(t.first_chunk_ms),
             t.stop_reason or ("(open)" if t.end is None else "-"))
            for i, t in enumerate(shown, len(st.turns) - len(shown) + 1)], left=frozenset({2, 5}))
        if len(shown) < len(st.turns):
            out.append(f"(the last {len(shown)} of {len(st.turns)} turns)")
    return out


def stats_json(st: Stats) -> dict[str, Any]:
    return {
        "scope": st.scope, "frames": st.frames, "frames_by_direction": dict(st.frames_by_direction),
        "bytes": st.bytes, "invalid": st.invalid, "errors": st.errors, "batches": st.batches,
        "methods": {m: dict(c) for m, c in sorted(st.methods.items())},
        "variants": dict(sorted(st.variants.items())),
        "latency_ms": {m: {"count": len(v), "p50": percentile(v, 50), "p95": percentile(v, 95), "max": v[-1]}
                       for m, v in sorted(st.latencies.items()) if v},
        "turns": [{"frame": t.frame, "session": t.session_id, "connection": t.connection_id,
                   "duration_ms": t.duration_ms, "first_chunk_ms": t.first_chunk_ms, "stop_reason": t.stop_reason}
                  for t in st.turns],
    }


def run_stats(conn: sqlite3.Connection, session: str | None, connection: str | None, out: IO[bytes], *,
              as_json: bool = False) -> int:
    """`acp-relay stats [SESSION]`: SESSION or --connection narrow it; neither means every recording."""
    view = resolve_view(conn, session, connection) if session or connection else None
    st = compute_stats(conn, view)
    if as_json:
        out.write(json.dumps(stats_json(st), ensure_ascii=False).encode() + b"\n")
    else:
        out.write("".join(line + "\n" for line in render_stats(st)).encode("utf-8", "replace"))
    return 0


__all__ = ["Stats", "Turn", "compute_stats", "render_stats", "stats_json", "run_stats", "percentile", "ShowError"]
