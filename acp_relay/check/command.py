"""`acp-relay check`: run the rule engine (protocol/check) over recorded frames and report the findings.

The engine is pure; this layer picks the frames (store.queries views), filters the findings by rule and
severity, prints them for people or as JSON Lines, and turns them into an exit status.
"""

from __future__ import annotations

import fnmatch
import sqlite3
from dataclasses import dataclass, field
from typing import IO, Any

from ..protocol.check.rules import RANK, RULES, Finding
from ..protocol.check.tck import requirements, tck_ids
from ..protocol.check.transport import TRANSPORT_RULES
from ..protocol.check.verdict import verdict
from ..render.findings import coverage_lines, finding_line, fold, rule_lines, rule_summary_lines, summary_line
from ..render.text import Style, dumps_line
from ..store.check_queries import check_inputs, connection_ids, frames_to_check
from ..store.queries import UserError, View, resolve_view

ALL_RULES = {**RULES, **TRANSPORT_RULES}  # the message rules and the remote transport's (protocol/check/transport.py)

OK, FOUND_ERRORS, USAGE = 0, 1, 2


@dataclass
class Checked:
    """What `check` found: (connection id, finding) in frame order, after the rule and severity filters."""

    found: list[tuple[int, Finding]]
    frames: int  # frames checked
    every: bool  # --all: the findings name their connection
    notes: list[str] = field(default_factory=list)  # about the views checked (a prefix that matched twice...)

    @property
    def findings(self) -> list[Finding]:
        return [f for _, f in self.found]

    @property
    def status(self) -> int:
        """The exit status: 1 when a finding is an error, else 0."""
        return FOUND_ERRORS if any(f.severity == "error" for _, f in self.found) else OK


def select_rules(patterns: tuple[str, ...], option: str) -> set[str]:
    """Rule ids matching the patterns (an id or a glob such as `lifecycle.*`); UserError for one matching none."""
    out: set[str] = set()
    for p in patterns:
        found = {r for r in ALL_RULES if fnmatch.fnmatchcase(r, p)}
        if not found:
            raise UserError(f"{option} {p!r} matches no rule (list them with `acp-relay check --rules`)")
        out |= found
    return out


def views(conn: sqlite3.Connection, session: str | None, connection: int | str | None, every: bool) -> list[View]:
    """What to check: SESSION, a connection, every connection, or by default the newest connection."""
    if every:
        if session or connection:
            raise UserError("--all checks every connection: give no SESSION or --connection with it")
        return [resolve_view(conn, None, cid) for cid in connection_ids(conn)]
    if session is None and connection is None:
        return [resolve_view(conn, None, "last")]
    return [resolve_view(conn, session, connection)]


def check_view(conn: sqlite3.Connection, view: View) -> tuple[list[Finding], int]:
    """All findings of one view, ordered by frame, and the number of frames checked (view's are the same)."""
    return verdict(frames_to_check(conn, view), **check_inputs(conn, view))


def compute(
    conn: sqlite3.Connection,
    session: str | None = None,
    connection: int | str | None = None,
    *,
    every: bool = False,
    min_severity: str = "info",
    rules: tuple[str, ...] = (),
    ignore: tuple[str, ...] = (),
) -> Checked:
    """The findings of SESSION, a connection, every connection (`every`) or the newest connection, kept when
    their rule is wanted (`rules`, less `ignore`: ids or globs) and their severity is at least `min_severity`."""
    wanted = select_rules(rules, "--rule") if rules else set(ALL_RULES)
    wanted -= select_rules(ignore, "--ignore")
    floor = RANK[min_severity]
    checked = Checked([], 0, every)
    for view in views(conn, session, connection, every):
        checked.notes += view.notes
        found, n = check_view(conn, view)
        checked.frames += n
        checked.found += [(view.connection_id, f) for f in found if f.rule in wanted and RANK[f.severity] >= floor]
    checked.found.sort(key=lambda cf: (cf[1].frame is None, cf[1].frame or 0))  # stable: engine order in a frame
    return checked


def summary(checked: Checked) -> str:
    """The closing line: how many findings of each severity in how many frames."""
    return summary_line(checked.findings, checked.frames)


def render(checked: Checked, out: IO[bytes], style: Style | None = None) -> None:
    """A line per finding (repeats folded), a per-rule summary when it adds something, the summary line."""
    style = style or Style()
    found_in, findings = checked.found, checked.findings
    every = checked.every
    lines = [
        finding_line(f, style, conn=c if every else None, more=more, last=last) for c, f, more, last in fold(found_in)
    ]
    if every or len({f.rule for f in findings}) < len(findings):  # per rule, when it adds something
        lines += rule_summary_lines(found_in, every)
    lines.append(summary(checked))
    out.write(("\n".join(lines) + "\n").encode("utf-8", "replace"))


def render_json(checked: Checked, out: IO[bytes]) -> None:
    """--json: one object per finding and nothing else (the summary line goes to stderr)."""
    for f in checked.findings:
        out.write(dumps_line(f.to_json()))


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
