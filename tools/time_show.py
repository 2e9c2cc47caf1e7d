"""Time `acp-relay show` on a big recording: wall clock and peak memory of each command, via /usr/bin/time -v.

    python tools/gen_db.py /tmp/big.db          # once: 1,000,000 frames
    python tools/time_show.py /tmp/big.db        # median and min of 5 runs per command

Each command is a fresh process (interpreter start-up included), output to /dev/null, as a user would run it.
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import statistics
import subprocess
import sys
from pathlib import Path


def measure(cmd: list[str]) -> tuple[float, int]:
    """(wall seconds, peak RSS in KiB) of one run."""
    proc = subprocess.run(
        ["/usr/bin/time", "-v", *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", proc.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    assert wall and rss, proc.stderr
    seconds = int(wall.group(1) or 0) * 3600 + int(wall.group(2)) * 60 + float(wall.group(3))
    return seconds, int(rss.group(1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db", type=Path)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    conn = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
    frames = conn.execute("SELECT count(*) FROM frames").fetchone()[0]
    big, big_n = conn.execute(
        "SELECT s.session_id, (SELECT count(*) FROM frames f WHERE f.session_id = s.session_id) n "
        "FROM sessions s ORDER BY n DESC LIMIT 1"
    ).fetchone()
    mid = conn.execute(
        "SELECT session_id FROM sessions ORDER BY id LIMIT 1 OFFSET (SELECT count(*) / 2 FROM sessions)"
    ).fetchone()[0]
    conn.close()
    show = [sys.executable, "-m", "acp_relay", "show", "--db", str(args.db)]
    cases = [
        ("show  (list the latest 30 sessions)", show),
        (f"show {big} --tail 100  ({big_n} frames)", show + [big, "--tail", "100"]),
        ("show last --tail 100", show + ["last", "--tail", "100"]),
        (f"show {mid} --tail 100", show + [mid, "--tail", "100"]),
        (f"show {big} --tail 100 --method 'session/prompt'", show + [big, "--tail", "100", "-m", "session/prompt"]),
        (f"show {big}  (every frame, to /dev/null)", show + [big]),
        ("show --all  (every session)", show + ["--all"]),
        ("python -c pass  (interpreter start-up)", [sys.executable, "-c", "pass"]),
    ]
    print(f"{args.db}: {frames} frames; {args.runs} runs each, interleaved (the machine may be shared)")
    print("  median    min   peak RSS")
    runs: dict[str, list[tuple[float, int]]] = {name: [] for name, _ in cases}
    for _ in range(args.runs):
        for name, cmd in cases:
            runs[name].append(measure(cmd))
    for name, got in runs.items():
        walls = [r[0] for r in got]
        print(
            f"  {statistics.median(walls):5.2f} s {min(walls):5.2f} s {max(r[1] for r in got) / 1024:6.1f} MiB  {name}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
