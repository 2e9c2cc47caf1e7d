"""The big-line case: one huge line through the relay, and the memory it costs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .common import (
    BUDGET,
    MB,
    KiB,
    MiB,
    alternate,
    log,
    median,
)
from .flood import flood_once


def case_bigline(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    size = 64 * MiB

    def one(kind: str, rep: int) -> dict[str, Any]:
        if kind == "idle":
            r = flood_once("relay", 1 * KiB, 10, tmp, f"idle-{rep}")
        else:
            r = flood_once(kind, size, 1, tmp, f"big-{kind}-{rep}")
        extra = f"  rss {r['rss_mb']:6.1f} MB" if "rss_mb" in r else ""
        log(
            f"  bigline {kind:5s} rep {rep}: {r['total_s'] if kind != 'cat' else r['fwd_s']:6.3f} s  "
            f"bytes {'ok' if r['bytes_ok'] else 'BAD'}{extra}"
        )
        return r

    runs = alternate(args.reps_big, ["relay", "cat", "idle"], one)
    rl, ct, idle = runs["relay"], runs["cat"], runs["idle"]
    s = {
        "time_s": median([r["total_s"] for r in rl]),
        "cat_s": median([r["fwd_s"] for r in ct]),
        "rss_mb": max(r["rss_mb"] for r in rl),
        "idle_rss_mb": median([r["rss_mb"] for r in idle]),
        "ok": all(r["bytes_ok"] for r in rl + ct) and all(r["db_ok"] for r in rl),
    }
    extra = s["rss_mb"] - s["idle_rss_mb"]
    limit = BUDGET["bigline_rss_factor"] * size / MB
    rows = [
        ("big line 64 MiB: time (s)", s["time_s"], s["cat_s"], s["time_s"] / s["cat_s"], "", "", None),
        (
            "  relay + recorder peak RSS MB (idle in base)",
            s["rss_mb"],
            s["idle_rss_mb"],
            None,
            f"+<= {limit:.0f}",
            f"+{extra:.0f} MB",
            extra <= limit,
        ),
        ("  output bytes equal, frame in db", "yes" if s["ok"] else "NO", "", None, "all", "", s["ok"]),
    ]
    return {"runs": runs, "summary": s, "rows": rows}
