"""Helpers the tests share: run `acp-relay run` as the editor would, and read what it recorded."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def relay_cmd(db: Path, *agent: str, label: str | None = None) -> list[str]:
    cmd = [sys.executable, "-m", "acp_relay", "run", "--db", str(db)]
    if label:
        cmd += ["--label", label]
    return [*cmd, "--", *agent]


def py_agent(code: str) -> list[str]:
    """An agent command that runs a snippet of Python."""
    return [sys.executable, "-c", code]


def run_relay(
    db: Path, *agent: str, data: bytes = b"", timeout: float = 60, **kw: Any
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(relay_cmd(db, *agent), input=data, capture_output=True, timeout=timeout, **kw)


def rows(db: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def stream_of(db: Path, direction: str, connection_id: int | None = None) -> bytes:
    """A direction's bytes as recorded: frames joined with \\n, the last one maybe unterminated."""
    cid = connection_id or rows(db, "SELECT max(id) FROM connections")[0][0]
    out = b""
    for raw, unterminated in rows(
        db,
        "SELECT raw, unterminated FROM frames WHERE connection_id = ? AND direction = ? ORDER BY seq",
        cid,
        direction,
    ):
        out += raw + (b"" if unterminated else b"\n")
    return out


def wait_for(condition: Callable[[], Any], what: str, timeout: float = 120, every: float = 0.05) -> Any:
    """Poll `condition` until it returns something true (and return that); fail after `timeout` seconds.

    For the tests that wait on another process: they wait for what they need, not for a guessed time. The
    timeout only ends a test that already failed, so it is generous: a loaded machine (load 8 to 19 on two
    cores) took more than 30 s to stream what an idle one streams in 2."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every)


def try_rows(db: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """`rows`, or [] while the database is not there yet (not created, not migrated, locked)."""
    try:
        return rows(db, sql, *args)
    except sqlite3.OperationalError:
        return []


def in_parallel(*calls: Callable[[], Any]) -> list[Any]:
    """Each call's result, the calls run at once in threads: for the independent read-only commands an
    end-to-end test runs on one recording (check, replay, show, export), each mostly a process start-up."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(calls)) as pool:
        futures = [pool.submit(call) for call in calls]
        return [f.result() for f in futures]


def doc_page(name: str) -> str:
    """A page of the documentation: README.md at the root, any other name under docs/."""
    return (ROOT / name if name == "README.md" else ROOT / "docs" / name).read_text()


def doc_section(name: str, heading: str) -> str:
    """The section of doc page `name` that starts at the line `heading` and ends before the next heading of its
    level or higher; lines inside code fences are never read as headings."""
    lines = doc_page(name).splitlines(keepends=True)
    start = [i for i, line in enumerate(lines) if line.rstrip("\n") == heading]
    assert len(start) == 1, f"{name}: {heading!r} is not one heading"
    level = len(heading) - len(heading.lstrip("#"))
    fenced = False
    for end in range(start[0] + 1, len(lines)):
        line = lines[end]
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (mark := line.split(" ", 1)[0]) and set(mark) == {"#"} and len(mark) <= level:
            return "".join(lines[start[0] : end])
    return "".join(lines[start[0] :])
