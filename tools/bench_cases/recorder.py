"""The recorder case: CPU per frame of the recorder child, this tree against a baseline tree, in one run.

The flood case's frames/s move with the machine's load (2 cores shared by several users); the CPU time a
process spends on a fixed input moves much less. Here the recorder child (`python -m
acp_relay.record.child`) of each tree reads the same prepared pipe records (tools/recorder_child_cost.py:
the flood's frames in the relay's 64 KiB chunks) from a file, indexes and commits them, and exits; its user
+ system time per frame is compared, runs alternating. The baseline is `git archive` of --recorder-baseline
(default main). Both databases must hold the same rows, byte for byte: the row hashes are compared.
"""

from __future__ import annotations

import argparse
import hashlib
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import recorder_child_cost  # tools/ is on sys.path: bench.py runs from there

from .common import BUDGET, ROOT, alternate, log, median, rm_db

COLUMNS = (
    "seq, direction, ts, mono, length, raw, parse, kind, method, rpc_id, session_id, update_kind, details, "
    "typeof(ts), typeof(rpc_id), typeof(details)"
)


def baseline_tree(ref: str, tmp: Path) -> Path:
    """The package as committed at `ref`, unpacked under tmp (once a run: the flood case uses it too)."""
    out = tmp / f"baseline-{ref.replace('/', '_')}"
    if out.exists():
        return out
    out.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out


def rows_hash(db: Path) -> str:
    """sha256 of every frame row (the stored columns, and the types of those whose type may vary)."""
    h = hashlib.sha256()
    conn = sqlite3.connect(db)
    try:
        for row in conn.execute(f"SELECT {COLUMNS} FROM frames ORDER BY seq"):
            h.update(repr(row).encode())
    finally:
        conn.close()
    return h.hexdigest()


def case_recorder(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    base = baseline_tree(args.recorder_baseline, tmp)
    trees = {"this": ROOT, "baseline": base}
    plan = [(200, 100_000), (1024, 30_000)] if args.quick else [(200, 300_000), (1024, 100_000)]
    rows: list[tuple[Any, ...]] = []
    out: dict[str, Any] = {"baseline": args.recorder_baseline}
    for size, count in plan:
        records = tmp / f"recorder-{size}.records"
        recorder_child_cost.write_records(records, size, count)
        hashes: dict[str, set[str]] = {"this": set(), "baseline": set()}

        def one(
            kind: str,
            rep: int,
            size: int = size,
            count: int = count,
            records: Path = records,
            hashes: dict[str, set[str]] = hashes,
        ) -> dict[str, Any]:
            db = tmp / f"recorder-{kind}-{size}-{rep}.db"
            user, system, wall, got = recorder_child_cost.run_child(trees[kind], records, db)
            hashes[kind].add(rows_hash(db) if got == count else f"BAD: {got} frames")
            rm_db(db)
            r = {"cpu_us": (user + system) / count * 1e6, "wall_us": wall / count * 1e6, "frames": got}
            log(
                f"  recorder {size:5d} B {kind:8s} rep {rep}: cpu {r['cpu_us']:6.2f} us/frame  "
                f"wall {r['wall_us']:6.2f} us/frame  {'ok' if got == count else f'BAD: {got} frames'}"
            )
            return r

        runs = alternate(args.reps_recorder, ["this", "baseline"], one)
        this, then = (median([r["cpu_us"] for r in runs[k]]) for k in ("this", "baseline"))
        same = len(hashes["this"]) == 1 and hashes["this"] == hashes["baseline"]
        same = same and not next(iter(hashes["this"])).startswith("BAD")
        name = f"{size} B" if size < 1024 else f"{size // 1024} KiB"
        rows += [
            # Two runs of the same tree differ by up to 10% here: a regression is beyond that.
            (f"recorder {name} x{count}: CPU us/frame", this, then, this / then, "<= 1.1x", "", this <= then * 1.1),
            (
                "  its ceiling on one core, frames/s",
                1e6 / this,
                1e6 / then,
                then / this,
                f">= {BUDGET['ws_flood_fps']:,}" if size == 200 else "",
                "",
                1e6 / this >= BUDGET["ws_flood_fps"] if size == 200 else None,
            ),
            ("  same rows stored as the baseline", "yes" if same else "NO", "", None, "all", "", same),
        ]
        out[name] = {"runs": runs, "cpu_us": this, "baseline_cpu_us": then, "same_rows": same}
        records.unlink()
    return {"sizes": out, "rows": rows}
