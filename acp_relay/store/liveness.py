"""Is a recording still being written? Process liveness from /proc, and marking connections whose relay died."""

from __future__ import annotations

import os
import sqlite3


def proc_stat_fields(pid: int) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (which may itself hold spaces and parentheses)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def cpu_ticks(pid: int) -> int:
    """User + system CPU ticks of a process so far (0 when it cannot be read)."""
    fields = proc_stat_fields(pid)
    try:
        return int(fields[11]) + int(fields[12]) if fields else 0
    except (IndexError, ValueError):
        return 0


def pid_alive(pid: int) -> bool:
    """A process that exists and is not a zombie (an orphan's zombie may linger when nobody reaps it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = proc_stat_fields(pid)
    return not fields or fields[0] != b"Z"


def mark_recorder_died(conn: sqlite3.Connection, relay_pid: int, recorder_pid: int, error: str | None) -> None:
    """A live relay saw its recorder die: its row says so at once (the exit status comes at close)."""
    conn.execute(
        "UPDATE connections SET status = 'recorder_died', error = ? WHERE recorder_pid = ? AND relay_pid = ? "
        "AND status = 'running'",
        (error, recorder_pid, relay_pid),
    )


def relay_connection(conn: sqlite3.Connection, relay_pid: int, recorder_pid: int | None) -> int | None:
    """The newest unfinished connection a relay (and its recorder, when known) recorded."""
    row = conn.execute(
        "SELECT id FROM connections WHERE relay_pid = ? AND (recorder_pid = ? OR ? IS NULL) "
        "AND status IN ('running', 'interrupted', 'recorder_died') ORDER BY id DESC LIMIT 1",
        (relay_pid, recorder_pid, recorder_pid),
    ).fetchone()
    return None if row is None else int(row[0])


def live_writer(conn: sqlite3.Connection, cid: int) -> int | None:
    """The pid of the relay (or recorder) still writing connection `cid`, or None when nobody is: a row
    `running`, or `recorder_died` before its relay closed it, whose process is alive."""
    row = conn.execute(
        "SELECT status, relay_pid, recorder_pid, ended_at FROM connections WHERE id = ?", (cid,)
    ).fetchone()
    if row is None or row[0] not in ("running", "recorder_died") or row[3] is not None:
        return None
    for pid in (row[1], row[2]):
        if pid and pid_alive(pid):
            return int(pid)
    return None


def mark_interrupted(conn: sqlite3.Connection) -> int:
    """Connections left 'running' by a relay that no longer exists (killed with SIGKILL, power loss)."""
    stale = stale_running(conn)
    for cid in stale:
        conn.execute(
            "UPDATE connections SET status = 'interrupted', closed_by = coalesce(closed_by, 'relay_killed'), "
            "ended_at = coalesce(ended_at, (SELECT max(ts) FROM frames WHERE connection_id = ?)) WHERE id = ?",
            (cid, cid),
        )
    # A relay that noticed its recorder's death marked its row at once, then died itself before closing it.
    orphans = [
        cid
        for cid, pid in conn.execute(
            "SELECT id, relay_pid FROM connections WHERE status = 'recorder_died' AND ended_at IS NULL"
        ).fetchall()
        if not (pid and pid_alive(pid))
    ]
    for cid in orphans:
        conn.execute(
            "UPDATE connections SET closed_by = coalesce(closed_by, 'relay_killed'), "
            "ended_at = (SELECT max(ts) FROM frames WHERE connection_id = ?) WHERE id = ?",
            (cid, cid),
        )
    return len(stale)


def stale_running(conn: sqlite3.Connection) -> list[int]:
    """The connections marked running whose relay (or its database writer) is gone; read-only (doctor)."""
    stale = []
    for cid, pid in conn.execute(
        "SELECT id, coalesce(recorder_pid, relay_pid) FROM connections WHERE status = 'running'"
    ):
        if not (pid and pid_alive(pid)):
            stale.append(cid)
    return stale
