"""CPU per frame of the whole recorder child process, fed the relay's records from a file (no relay, no agent).

    .venv/bin/python tools/recorder_child_cost.py [--size 200] [--frames 200000] [--reps 2] [--tree DIR]...

The benchmark's flood frames (tools/bench_peers.py), in the relay's 64 KiB chunks, are written once as the
pipe records record/pipe.py sends; `python -m acp_relay.record.child` then reads them from that file as
its stdin, indexes and commits them, and exits. Its user + system time per frame counts both of its
threads and everything the GIL and SQLite cost them; wall time is printed too but moves with the
machine's load. Each --tree (another checkout, e.g. `git worktree add --detach /tmp/old main`) runs the
same records with its own acp_relay, alternating with this one: compare in one run, quote ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import bench_peers  # noqa: E402

from acp_relay.record.pipe import CLOSE, EOF_BASE, HEADER, STREAMS  # noqa: E402

CHUNK = 1 << 16  # what the relay reads at a time


def write_records(path: Path, size: int, count: int) -> None:
    block = bench_peers.make_block(size)
    total, pos, t = size * count, 0, 0.0
    a2c = STREAMS.index("a2c")
    with open(path, "wb") as f:
        while pos < total:
            k = min(CHUNK, total - pos)
            off = pos % len(block)
            piece = (block + block)[off : off + k] if off + k > len(block) else block[off : off + k]
            f.write(HEADER.pack(a2c, len(piece), 1e9 + t, t) + piece)
            pos, t = pos + k, t + 1e-5
        f.write(HEADER.pack(EOF_BASE + a2c, 0, 1e9 + t, t))
        f.write(HEADER.pack(CLOSE, 2, 1e9 + t, 0.0) + b"{}")


def run_child(tree: Path, records: Path, db: Path) -> tuple[float, float, float, int]:
    """(user s, system s, wall s, frames recorded) of one recorder child over the records."""
    config: dict[str, object] = {
        "db": str(db),
        "argv": ["cost"],
        "cwd": "/",
        "label": None,
        "relay_pid": os.getpid(),
        "policy": {},
    }
    env = {**os.environ, "PYTHONPATH": str(tree)}
    t0 = time.perf_counter()
    with open(records, "rb") as inp:
        child = subprocess.Popen(
            [sys.executable, "-m", "acp_relay.record.child", json.dumps(config)], stdin=inp, cwd=tree, env=env
        )
        _, _, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - t0
    conn = sqlite3.connect(db)
    try:
        frames = conn.execute("SELECT count(*) FROM frames").fetchone()[0]
    finally:
        conn.close()
    return usage.ru_utime, usage.ru_stime, wall, frames


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--size", type=int, default=200, help=f"bytes per frame, newline included (>= {bench_peers.MIN_SIZE})"
    )
    ap.add_argument("--frames", type=int, default=200_000)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--tree", action="append", default=[], type=Path, help="another checkout to run alongside")
    args = ap.parse_args()
    trees = [ROOT, *[t.resolve() for t in args.tree]]
    n = args.frames
    with tempfile.TemporaryDirectory() as tmp:
        records = Path(tmp) / "records"
        write_records(records, args.size, n)
        for rep in range(args.reps):
            for i, tree in enumerate(trees[rep % len(trees) :] + trees[: rep % len(trees)]):
                user, system, wall, got = run_child(tree, records, Path(tmp) / f"{rep}-{i}.db")
                status = "ok" if got == n else f"BAD: {got} frames recorded"
                print(
                    f"{tree}: {args.size} B x {n}: cpu {(user + system) / n * 1e6:8.2f} us/frame "
                    f"(user {user / n * 1e6:.2f}, sys {system / n * 1e6:.2f})  wall {wall / n * 1e6:8.2f} us/frame "
                    f"({n / wall:,.0f} frames/s)  {status}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
