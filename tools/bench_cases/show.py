"""The show case: `acp-relay show` on a large generated database."""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

from .common import (
    BUDGET,
    PY,
    _generated_db,
    _largest_session,
    alternate,
    log,
    median,
    relay_cmd,
)


def case_show(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    db, why = _generated_db(args)
    if why or db is None:
        log(f"  show: SKIPPED ({why}; case 4 needs tools/gen_db.py and `acp-relay show`)")
        return {"skipped": why, "rows": [("show on 1M frames", f"skipped: {why}", "", None, "< 0.3 s", "", None)]}
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    n = conn.execute("SELECT max(id) FROM frames").fetchone()[0] or 0
    conn.close()
    big = _largest_session(db)
    show = [*relay_cmd(), "show", "--db", str(db), "--color", "never"]
    queries = {
        "list sessions": show,
        "last 100 frames, largest session": show + [big[0], "--tail", "100"],
        "last 100 frames, session `last`": show + ["last", "--tail", "100"],
        "baseline: acp-relay --help": [*relay_cmd(), "--help"],
        "baseline: python -c pass": [PY, "-c", "pass"],
    }

    def one(kind: str, rep: int) -> dict[str, Any]:
        t = time.perf_counter()
        r = subprocess.run(queries[kind], capture_output=True)
        dt = time.perf_counter() - t
        lines = r.stdout.count(b"\n")
        log(f"  show {kind:34s} rep {rep}: {dt * 1000:7.1f} ms  exit {r.returncode}  {lines} lines")
        return {"s": dt, "exit": r.returncode, "lines": lines, "err": r.stderr[-300:].decode("utf-8", "replace")}

    runs = alternate(args.reps_show, list(queries), one)
    s = {k: median([r["s"] for r in v]) for k, v in runs.items()}
    base = s["baseline: acp-relay --help"]
    rows: list[tuple[Any, ...]] = []
    for k in list(queries)[:3]:
        ok = all(r["exit"] == 0 for r in runs[k])
        rows.append(
            (
                f"show: {k} (s)",
                s[k],
                base,
                s[k] / base,
                "< 0.3 s",
                "" if ok else "EXIT != 0",
                ok and s[k] < BUDGET["show_s"],
            )
        )
    rows.append(
        (
            f"  ({n:,} frames; largest session {big[1]:,} frames; baseline `acp-relay --help`)",
            "",
            "",
            None,
            "",
            "",
            None,
        )
    )
    return {
        "runs": runs,
        "summary": s,
        "frames": n,
        "largest_session": list(big),
        "db": str(db),
        "commands": queries,
        "rows": rows,
    }
