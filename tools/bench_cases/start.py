"""The start case: how long `acp-relay run` takes to start an agent."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from .common import (
    BUDGET,
    INIT,
    Chain,
    alternate,
    log,
    median,
    rm_db,
)


# -- case 3: start -----------------------------------------------------------------------------------------
def case_start(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    db = tmp / "start.db"

    def one(kind: str, rep: int) -> dict[str, Any]:
        t0 = time.perf_counter()
        chain = Chain(kind, db)
        chain.call(INIT)
        t = time.perf_counter() - t0
        chain.close()
        log(f"  start {kind:6s} rep {rep}: {t * 1000:6.1f} ms")
        return {"ms": t * 1000}

    Chain("relay", db).close()  # the database exists already, as it does for every start but the first
    fresh = tmp / "start-fresh.db"
    t0 = time.perf_counter()
    c = Chain("relay", fresh)
    c.call(INIT)
    fresh_ms = (time.perf_counter() - t0) * 1000
    c.close()
    runs = alternate(args.reps_start, ["direct", "relay"], one)
    d, r = median([x["ms"] for x in runs["direct"]]), median([x["ms"] for x in runs["relay"]])
    rows = [
        (
            "start to initialize response (ms)",
            r,
            d,
            r / d,
            f"+{BUDGET['start_ms']:.0f} ms",
            f"+{r - d:.0f} ms",
            r - d <= BUDGET["start_ms"],
        ),
        ("  same, new database (one run, ms)", fresh_ms, d, fresh_ms / d, "", f"+{fresh_ms - d:.0f} ms", None),
    ]
    rm_db(db)
    rm_db(fresh)
    return {"runs": runs, "summary": {"direct_ms": d, "relay_ms": r, "fresh_db_ms": fresh_ms}, "rows": rows}
