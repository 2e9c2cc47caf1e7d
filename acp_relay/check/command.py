"""`acp-relay check`: run the rule engine (protocol/check) over recorded frames and report the findings.

The engine is pure; this layer picks the frames (store.queries views), filters the findings by rule and
severity, prints them for people or as JSON Lines, and turns them into an exit status.
"""

from __future__ import annotations

import fnmatch
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..protocol.check.engine import check_frames
from ..protocol.check.rules import RANK, RULES, Finding
from ..protocol.check.tck import requirements, tck_ids
from ..protocol.check.transport import TRANSPORT_RULES, check_transport, relay_made, soften_split_order
from ..render.findings import coverage_lines, finding_line, fold, rule_lines, rule_summary_lines, summary_line
from ..render.text import Style, dumps_line
from ..store.check_queries import connection_ended, connection_ids, frames_to_check, session_origin
from ..store.queries import UserError, View, resolve_view
from ..store.transport import relay_answers, transport_events

ALL_RULES = {**RULES, **TRANSPORT_RULES}  # the message rules and the remote transport's (protocol/check/transport.py)

OK, FOUND_ERRORS, USAGE = 0, 1, 2


@dataclass
class CheckOptions:
    """Everything `acp-relay check` was asked for (see cli.py)."""

    session: str | None = None
    connection: str | None = None
    all: bool = False
    json: bool = False
    min_severity: str = "info"
    rules: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()


def select_rules(patterns: tuple[str, ...], option: str) -> set[str]:
    """Rule ids matching the patterns (an id or a glob such as `lifecycle.*`); UserError for one matching none."""
    out: set[str] = set()
    for p in patterns:
        found = {r for r in ALL_RULES if fnmatch.fnmatchcase(r, p)}
        if not found:
            raise UserError(f"{option} {p!r} matches no rule (list them with `acp-relay check --rules`)")
        out |= found
    return out


def views(conn: sqlite3.Connection, opts: CheckOptions) -> list[View]:
    """What to check: SESSION, a connection, every connection, or by default the newest connection."""
    if opts.all:
        if opts.session or opts.connection:
            raise UserError("--all checks every connection: give no SESSION or --connection with it")
        return [resolve_view(conn, None, cid) for cid in connection_ids(conn)]
    if opts.session is None and opts.connection is None:
        return [resolve_view(conn, None, "last")]
    return [resolve_view(conn, opts.session, opts.connection)]


def check_view(conn: sqlite3.Connection, view: View) -> tuple[list[Finding], int]:
    """All findings of one view, ordered by frame, and the number of frames checked."""
    frames = frames_to_check(conn, view)
    known: tuple[str, ...] = ()
    if view.session_id is not None and session_origin(conn, view.connection_id, view.session_id) == "subagent":
        known = (view.session_id,)  # announced by a subagent_update of its parent session, outside this view
    found, n = check_frames(frames, view.protocol_version, connection_ended(conn, view.connection_id), known)
    events = list(transport_events(conn, view.connection_id))
    found = relay_made(soften_split_order(found, events), relay_answers(conn, view.connection_id))
    return found + check_transport(events), n


def run_check(conn: sqlite3.Connection, opts: CheckOptions, out: Any, err: Callable[[str], None], style: Style) -> int:
    """Write the findings to the binary stream `out`; returns the exit status (0, or 1 on an error)."""
    wanted = select_rules(opts.rules, "--rule") if opts.rules else set(ALL_RULES)
    wanted -= select_rules(opts.ignore, "--ignore")
    floor = RANK[opts.min_severity]
    found_in: list[tuple[int, Finding]] = []  # (connection id, finding)
    frames = 0
    for view in views(conn, opts):
        for note in view.notes:
            err(note)
        found, n = check_view(conn, view)
        frames += n
        found_in += [(view.connection_id, f) for f in found if f.rule in wanted and RANK[f.severity] >= floor]
    found_in.sort(key=lambda cf: (cf[1].frame is None, cf[1].frame or 0))  # stable: engine order within a frame
    findings = [f for _, f in found_in]
    if opts.json:
        for f in findings:
            out.write(dumps_line(f.to_json()))
        err(summary_line(findings, frames))
    else:
        lines = [
            finding_line(f, style, conn=c if opts.all else None, more=more, last=last)
            for c, f, more, last in fold(found_in)
        ]
        if opts.all or len({f.rule for f in findings}) < len(findings):  # per rule, when it adds something
            lines += rule_summary_lines(found_in, opts.all)
        lines.append(summary_line(findings, frames))
        out.write(("\n".join(lines) + "\n").encode("utf-8", "replace"))
    return FOUND_ERRORS if any(f.severity == "error" for f in findings) else OK


def _rule_tck() -> dict[str, dict[int, tuple[str, ...]]]:
    return {r: {v: ids for v in (1, 2) if (ids := tck_ids(r, v))} for r in ALL_RULES}


def print_rules(out: Any, as_json: bool = False) -> int:
    """`check --rules`: every rule, with the conformance kit's requirement ids it implements per version."""
    tck = _rule_tck()
    if as_json:
        for r in ALL_RULES.values():
            obj: dict[str, Any] = {"id": r.id, "severity": r.severity, "description": r.description, "spec": r.spec}
            obj["tck"] = {f"v{v}": list(ids) for v, ids in tck[r.id].items()}
            out.write(dumps_line(obj))
        return OK
    for line in rule_lines(ALL_RULES.values(), tck):
        out.write((line + "\n").encode())
    return OK


def print_coverage(out: Any, protocol: int | None, as_json: bool = False) -> int:
    """`check --coverage`: each kit requirement and whether (and by which rules) a passive check judges it."""
    reqs = requirements(protocol)
    if as_json:
        for req in reqs:
            out.write(dumps_line(req.to_json()))
        return OK
    for line in coverage_lines(reqs):
        out.write((line + "\n").encode())
    return OK
