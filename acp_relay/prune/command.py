"""`acp-relay prune`'s Python API: `compute` deletes (store/retention.prune: whole connections, oldest first,
never a live one), `render_lines` and `render_records` say what it did, as text or as JSON Lines records."""

from __future__ import annotations

import sqlite3
from typing import Any

from ..protocol.words import counted
from ..render.text import clean, fmt_time
from ..store import retention


def compute(
    conn: sqlite3.Connection, *, older_than: float | None, max_size: int | None, dry_run: bool
) -> retention.PruneResult:
    """Connections that ended over `older_than` seconds ago, then the oldest until the file fits `max_size`."""
    return retention.prune(conn, older_than=older_than, max_size=max_size, dry_run=dry_run)


def render_lines(result: retention.PruneResult, dry_run: bool) -> list[str]:
    """A line per connection deleted (labels escaped: they come from users), then the totals."""
    verb = "would delete" if dry_run else "deleted"
    lines = []
    for r in result.removed:
        label = f" [{clean(r.label)}]" if r.label else ""
        lines.append(
            f"{verb} connection {r.connection}{label} started {fmt_time(r.started_at)}: {counted(r.frames, 'frame')}"
        )
    about = "about " if result.estimated else ""
    before, after = retention.human_size(result.size_before), retention.human_size(result.size_after)
    lines.append(
        f"{verb} {counted(result.connections, 'connection')} ({counted(result.frames, 'frame')}); database {before} -> {about}{after}"
    )
    return lines


def render_records(result: retention.PruneResult, dry_run: bool) -> list[dict[str, Any]]:
    """A record per connection deleted, then the totals (--json)."""
    records: list[dict[str, Any]] = [
        {
            "connection": r.connection,
            "started_at": r.started_at,
            "label": r.label,
            "frames": r.frames,
            "dry_run": dry_run,
        }
        for r in result.removed
    ]
    totals = {"connections": result.connections, "frames": result.frames, "size_before": result.size_before}
    records.append({**totals, "size_after": result.size_after, "dry_run": dry_run})
    return records
