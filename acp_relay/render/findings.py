"""Findings of `acp-relay check` for people: one line each, and the summary line (check and show --frame)."""

from __future__ import annotations

from collections.abc import Iterable

from ..protocol.check.rules import SEVERITIES, Finding, Rule
from .frames import Style, clean

_COLORS = {"error": "31", "warning": "33", "info": "36"}


_PLAIN = Style()


def finding_line(f: Finding, style: Style = _PLAIN) -> str:
    """`frame  severity  rule  message  [spec]`; a connection-wide finding has `-` for its frame."""
    frame = "-" if f.frame is None else str(f.frame)
    severity = style.paint(f"{f.severity:<7}", _COLORS.get(f.severity))
    return f"{frame:>7}  {severity}  {f.rule}  {clean(f.message)}  [{clean(f.spec)}]"


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


def rule_lines(rules: Iterable[Rule]) -> list[str]:
    """`check --rules`: id, severity, description, spec reference."""
    rules = list(rules)
    width = max(len(r.id) for r in rules)
    return [f"{r.id:<{width}}  {r.severity:<7}  {r.description}  [{r.spec}]" for r in rules]
