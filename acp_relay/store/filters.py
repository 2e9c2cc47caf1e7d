"""The frame filters of `show` (and of the commands that take the same options), as SQL conditions."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .rows import DIRECTIONS, KIND_ALIASES, KINDS, UserError, compile_grep
from .sessions import unanswered_entries
from .units import duration_seconds
from .views import View

# -- filters ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TimeBound:
    """--since/--until: seconds on the shown time axis (relative), or a wall-clock instant (absolute)."""

    value: float
    absolute: bool


def parse_time(text: str) -> TimeBound:
    """`12.5`, `+90s`, `2m`, `-0.5` (relative to the shown time 0), or an ISO date/time in local time."""
    t = text.strip()
    neg = t.startswith("-")
    value = duration_seconds(t[1:] if neg else t)
    if value is not None:
        return TimeBound(-value if neg else value, False)
    try:
        dt = datetime.fromisoformat(t)
    except ValueError:
        raise UserError(
            f"cannot read the time {text!r}: give seconds as shown (12.5, 90s, 2m) or a date "
            "and time (2026-01-31T14:05:00)"
        ) from None
    return TimeBound(dt.timestamp(), True)


@dataclass(frozen=True)
class Filters:
    """Combinable frame filters (all must match; several values of one option are alternatives)."""

    methods: tuple[str, ...] = ()  # globs on the method (a response's is its request's)
    direction: str | None = None  # c2a | a2c
    kinds: tuple[str, ...] = ()
    updates: tuple[str, ...] = ()  # globs on the session/update variant
    grep: str | None = None  # regex over the raw bytes
    since: TimeBound | None = None
    until: TimeBound | None = None
    errors: bool = False  # error responses, invalid or flagged frames, requests left unanswered

    @classmethod
    def build(
        cls,
        *,
        methods: Iterable[str] = (),
        direction: str | None = None,
        kinds: Iterable[str] = (),
        updates: Iterable[str] = (),
        grep: str | None = None,
        since: str | None = None,
        until: str | None = None,
        errors: bool = False,
    ) -> Filters:
        """From command-line text, checking each value (UserError on a bad one)."""
        norm_kinds = []
        for k in kinds:
            k2 = KIND_ALIASES.get(k.lower(), k.lower())
            if k2 not in KINDS:
                raise UserError(f"--kind must be one of {', '.join(KINDS)}, not {k!r}")
            norm_kinds.append(k2)
        d = None
        if direction is not None:
            d = DIRECTIONS.get(direction.lower())
            if d is None:
                raise UserError(
                    f"--direction must be c2a (editor to agent) or a2c (agent to editor), not {direction!r}"
                )
        if grep is not None:
            compile_grep(grep)
        return cls(
            tuple(methods),
            d,
            tuple(norm_kinds),
            tuple(updates),
            grep,
            parse_time(since) if since else None,
            parse_time(until) if until else None,
            errors,
        )

    @property
    def active(self) -> bool:
        return bool(
            self.methods
            or self.direction
            or self.kinds
            or self.updates
            or self.grep
            or self.since
            or self.until
            or self.errors
        )


def _message_conditions(flt: Filters, p: str) -> tuple[list[str], list[Any]]:
    """Conditions on one message's index columns, for a frame (p='+f.') or a batch member (p='b.')."""
    conds: list[str] = []
    params: list[Any] = []
    if flt.kinds:
        conds.append(f"{p}kind IN ({', '.join('?' * len(flt.kinds))})")
        params += flt.kinds
    if flt.methods:
        conds.append("(" + " OR ".join(f"{p}method GLOB ?" for _ in flt.methods) + ")")
        params += flt.methods
    if flt.updates:
        conds.append("(" + " OR ".join(f"{p}update_kind GLOB ?" for _ in flt.updates) + ")")
        params += flt.updates
    return conds, params


def where_clause(conn: sqlite3.Connection, view: View, flt: Filters) -> tuple[str, list[Any]]:
    """The filters as one SQL condition. Columns carry a unary + so no filter steals the view's index."""
    parts: list[str] = []
    params: list[Any] = []
    conds, cparams = _message_conditions(flt, "+f.")
    if conds:
        mconds, mparams = _message_conditions(flt, "b.")
        parts.append(
            f"(({' AND '.join(conds)}) OR (+f.kind = 'batch' AND EXISTS (SELECT 1 FROM batch_messages b "
            f"WHERE b.frame_id = f.id AND {' AND '.join(mconds)})))"
        )
        params += cparams + mparams
    if flt.direction:
        parts.append("+f.direction = ?")
        params.append(flt.direction)
    for bound, op in ((flt.since, ">="), (flt.until, "<=")):
        if bound is not None:
            if bound.absolute:
                parts.append(f"+f.ts {op} ?")
                params.append(bound.value)
            else:
                parts.append(f"+f.mono {op} ?")
                params.append(view.base + bound.value)
    if flt.errors:
        pending = sorted(
            {
                p["seq"]
                for p in unanswered_entries(
                    conn.execute("SELECT unanswered FROM connections WHERE id = ?", (view.connection_id,)).fetchone()[0]
                )
                if isinstance(p.get("seq"), int) and (view.session_id is None or p.get("session_id") == view.session_id)
            }
        )
        alts = [
            "+f.kind IN ('error', 'invalid')",
            "+f.parse != 'ok'",
            "+f.unterminated = 1",
            "(+f.kind = 'batch' AND EXISTS (SELECT 1 FROM batch_messages b WHERE b.frame_id = f.id "
            "AND b.kind IN ('error', 'invalid')))",
        ]
        if pending:
            alts.append(f"+f.seq IN ({', '.join(str(s) for s in pending)})")
        parts.append("(" + " OR ".join(alts) + ")")
    if flt.grep is not None:
        parts.append("f.raw REGEXP ?")
        params.append(flt.grep)
    return (" AND ".join(parts) or "1"), params
