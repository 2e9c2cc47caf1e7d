"""Findings of `acp-relay check` for people: one line each, and the summary line (check and show --frame)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..protocol.check.rules import SEVERITIES, Finding, Rule
from ..protocol.check.tck import STATUSES, Requirement
from .text import Style, clean, escape

_COLORS = {"error": "31", "warning": "33", "info": "36"}


_PLAIN = Style()


def finding_line(
    f: Finding, style: Style = _PLAIN, *, conn: int | None = None, more: int = 0, last: int | None = None
) -> str:
    """`frame  severity  rule  message  [spec]  KIT-ID`; a connection-wide finding has `-` for its frame, one
    that breaks no requirement of the conformance kit has no id. With `conn`
    (check --all) the connection and session follow the frame; `more` identical findings folded into this
    one end the message as `(and N more through frame L)`."""
    frame = "-" if f.frame is None else str(f.frame)
    severity = style.paint(f"{escape(f.severity):<7}", _COLORS.get(f.severity))
    where = "" if conn is None else f"  c{conn}  {f.session or '-'}"
    folded = f" (and {more} more through frame {last})" if more else ""
    kit = f"  {f.tck}" if f.tck else ""
    # Every field escaped at once, around the painted severity (the message cut first, as one-line views are).
    return f"{frame:>7}{clean(where)}  {severity}  {escape(f'{f.rule}  {clean(f.message)}{folded}  [{f.spec}]{kit}')}"


def fold(found: Sequence[tuple[int, Finding]]) -> list[tuple[int, Finding, int, int | None]]:
    """Identical findings (rule, message, session, connection) on consecutive frames become one:
    (connection, first finding, how many more, the last one's frame)."""
    out: list[tuple[int, Finding, int, int | None]] = []
    for conn, f in found:
        if out and f.frame is not None:
            c0, f0, more, last = out[-1]
            after = last if last is not None else f0.frame
            same = (c0, f0.rule, f0.message, f0.session) == (conn, f.rule, f.message, f.session)
            if same and after is not None and f.frame == after + 1:
                out[-1] = (c0, f0, more + 1, f.frame)
                continue
        out.append((conn, f, 0, None))
    return out


def rule_summary_lines(found: Sequence[tuple[int, Finding]], with_conn: bool = False) -> list[str]:
    """One line per rule that fired, most frequent first: `rule  N findings, first at frame F`."""
    counts: dict[str, list[Any]] = {}
    for conn, f in found:
        entry = counts.setdefault(f.rule, [0, f, conn])
        entry[0] += 1
    width = max((len(r) for r in counts), default=0)
    out = []
    for rule, (n, first, conn) in sorted(counts.items(), key=lambda kv: (-kv[1][0], kv[0])):
        where = "the connection" if first.frame is None else f"frame {first.frame}"
        if with_conn:
            where += f" (c{conn})"
        out.append(f"{rule:<{width}}  {n} finding{'s' if n != 1 else ''}, first at {where}")
    return out


def summary_line(findings: Iterable[Finding], frames: int) -> str:
    """Counts per severity and the frames checked."""
    counts = dict.fromkeys(SEVERITIES, 0)
    for f in findings:
        counts[f.severity] += 1
    parts = [
        f"{counts['error']} error{'s' if counts['error'] != 1 else ''}",
        f"{counts['warning']} warning{'s' if counts['warning'] != 1 else ''}",
        f"{counts['info']} info",
    ]
    return ", ".join(parts) + f" in {frames} frame{'s' if frames != 1 else ''} checked"


def tck_text(by_version: dict[int, tuple[str, ...]]) -> str:
    """A rule's conformance kit ids, per version: `ACP-INIT-004 (v1), ACP-SESSION-002 (v1, v2)`, or `none`."""
    versions: dict[str, list[int]] = {}
    for v, ids in sorted(by_version.items()):
        for rid in ids:
            versions.setdefault(rid, []).append(v)
    if not versions:
        return "none"
    return ", ".join(f"{rid} ({', '.join(f'v{v}' for v in vs)})" for rid, vs in versions.items())


def rule_lines(rules: Iterable[Rule], tck: dict[str, dict[int, tuple[str, ...]]]) -> list[str]:
    """`check --rules`: id, severity, description, spec reference, the kit's ids."""
    rules = list(rules)
    width = max(len(r.id) for r in rules)
    return [
        f"{r.id:<{width}}  {r.severity:<7}  {r.description}  [{r.spec}]  tck: {tck_text(tck.get(r.id, {}))}"
        for r in rules
    ]


def coverage_lines(reqs: Sequence[Requirement]) -> list[str]:
    """`check --coverage`: one line per kit requirement, then a count per version and status."""
    width = max((len(r.id) for r in reqs), default=0)
    out = [
        f"v{r.version}  {r.id:<{width}}  {r.tier:<13}  {r.status:<13}  {', '.join(r.rules) or '-'}"
        + (f"  ({r.note})" if r.note else "")
        for r in reqs
    ]
    for version in sorted({r.version for r in reqs}):
        mine = [r for r in reqs if r.version == version]
        counts = ", ".join(f"{n} {s}" for s in STATUSES if (n := sum(r.status == s for r in mine)))
        out.append(f"v{version}: {len(mine)} kit requirements: {counts}")
    return out
