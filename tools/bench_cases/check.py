"""The check case: frames per second `acp-relay check` judges."""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from .common import (
    BUDGET,
    _generated_db,
    _largest_session,
    alternate,
    log,
    median,
    relay_cmd,
)


# -- case 7: check -----------------------------------------------------------------------------------------
def case_check(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """`check` on the largest session against the baseline `show` of the same frames, alternating."""
    db, why = _generated_db(args)
    if why or db is None:
        log(f"  check: SKIPPED ({why})")
        return {"skipped": why, "rows": [("check", f"skipped: {why}", "", None, ">= 20,000 frames/s", "", None)]}
    big = _largest_session(db)
    commands = {
        "check": [*relay_cmd(), "check", "--db", str(db), big[0]],
        "baseline: show, same frames": [*relay_cmd(), "show", "--db", str(db), big[0], "--color", "never"],
    }

    def one(kind: str, rep: int) -> dict[str, Any]:
        before = os.times()
        t = time.perf_counter()
        r = subprocess.run(commands[kind], capture_output=True)
        dt = time.perf_counter() - t
        after = os.times()
        cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
        log(f"  check {kind:28s} rep {rep}: {dt:6.2f} s wall  {cpu:6.2f} s CPU  exit {r.returncode}")
        return {"s": dt, "cpu": cpu, "exit": r.returncode, "tail": r.stdout[-200:].decode("utf-8", "replace")}

    runs = alternate(args.reps_show, list(commands), one)
    wall = {k: median([r["s"] for r in v]) for k, v in runs.items()}
    cpu = {k: median([r["cpu"] for r in v]) for k, v in runs.items()}
    frames = big[1]
    ok = all(r["exit"] in (0, 1) and b"frames checked" in r["tail"].encode() for r in runs["check"])
    base = "baseline: show, same frames"
    fps_wall, fps_cpu = frames / wall["check"], frames / cpu["check"]
    rows = [
        (
            f"check: {frames:,}-frame session, wall (s)",
            wall["check"],
            wall[base],
            wall["check"] / wall[base],
            f"< {frames / BUDGET['check_fps']:.1f} s",
            "" if ok else "FAILED",
            ok and fps_wall >= BUDGET["check_fps"],
        ),
        ("check: same, CPU (s)", cpu["check"], cpu[base], cpu["check"] / cpu[base], "", "", None),
        (
            "check: frames/s (wall | CPU)",
            f"{fps_wall:,.0f} | {fps_cpu:,.0f}",
            "",
            None,
            ">= 20,000",
            "",
            fps_wall >= BUDGET["check_fps"],
        ),
        (f"  ({frames:,} frames of session {big[0]}; baseline `show` listing them)", "", "", None, "", "", None),
    ]
    return {"runs": runs, "wall": wall, "cpu": cpu, "frames": frames, "commands": commands, "rows": rows}
