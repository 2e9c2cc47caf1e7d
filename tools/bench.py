"""The acp-relay benchmark: every case of issue 5, the relay side by side with a baseline in one run.

    .venv/bin/python tools/bench.py                 # full run (a few minutes)
    .venv/bin/python tools/bench.py --quick         # under a minute
    .venv/bin/python tools/bench.py --case rtt,flood --json /tmp/bench.json

Cases (`--case`, comma separated, names or numbers):
  1 rtt      5,000 requests one at a time to an agent that answers at once: direct, through two `cat`s,
             through a plain Python pass-through (no recording), and through `acp-relay run`.
  2 flood    the agent writes N frames of 200 B, 1 KiB, 64 KiB and 4 MiB as fast as it can: through the
             relay (recording) against `agent | cat`. Frames/s, MB/s, the relay's own peak RSS (VmHWM of
             the relay process, not the agent), output checked byte for byte, every frame in the database.
  3 start    spawn to `initialize` response: the agent directly, and through the relay.
  4 show     `acp-relay show` on a generated 1,000,000-frame database (tools/gen_db.py): list sessions,
             and the last 100 frames of a session. Skipped when gen_db.py or `show` is missing.
  5 bigline  one 64 MiB frame: the relay's peak RSS, and time against `cat`.
  6 search   `acp-relay search` on a copy of the same generated database: the first search (which builds the
             full-text index) against one full read of every frame's bytes, then later searches against
             `acp-relay --help`.
  7 check    `acp-relay check` on the generated database's 100,000-frame session (the show database):
             wall and CPU seconds, frames/s, against `acp-relay show` listing the same frames.
  8 diff     `acp-relay diff` of two generated 100,000-frame sessions (B: A with a changed answer every 50
             turns and an extra chunk every 40), against reading both sessions with `show --raw`.
  9 view     `acp-relay view` of a 100,000-frame session (the ordinary mix, and a flood of message chunks;
             tools/gen_db.py --sessions): time to write the page against `show --transcript` of the same
             session, its size against the session's raw bytes, and in headless Chromium (the system's,
             through Playwright) the time to the first painted screen against loading the same bytes as a
             page with no script, and the p95 of a scroll step. The browser part is skipped without them.
 10 otel     `acp-relay otel export` of the same two 100,000-frame sessions, as OTLP JSON (--file) and over
             OTLP/HTTP to a loopback collector started here (it reads and drops the requests), against
             `show --transcript` of the same session: wall and CPU seconds.
 11 lock     the agent streams 1 KiB frames (2,000 a second) and answers pings while another process holds
             the database's write lock (BEGIN IMMEDIATE) for 20 s (5 s with --quick), against the same run
             without the lock: the largest gap between chunks at the editor, the ping round trip's p99, and
             the time from the lock's release until every frame is stored (count and bytes checked).
 12 ws       remote ACP (tools/bench_ws_peer.py, a server on loopback): round trips of requests answered at
             once over WebSocket, clients on the socket itself (the websockets library, and a raw blocking
             socket: the floor) against an editor on stdio through `acp-relay run --connect ws://`, and
             the same over Streamable HTTP (an httpx client against `--connect http://`); a flood of 200 B
             notifications over WebSocket, received directly against through the relay (recorded, and at
             the editor), with the relay's own CPU per frame and peak RSS beside the stdio relay's flood;
             and the same flood's frames parsed on a plain socket by websockets' sans-I/O protocol (the
             relay's frame layer) and by wsproto's, each against the 50,000 frames/s floor.
 13 hostile a session holding a 64 MiB line of terminal controls (and a 64 MiB non-JSON line of them):
             `show`, `show --transcript`, `search`, `check`, `view` and `export` (ndjson, acp-devtools, sqlite)
             each within 300 MB peak RSS and 5 s, against
             `show --frame N --raw` printing the whole frame (which must stay exact); the session recorded
             three ways: imported, through `run` (an agent writing the lines) and through `run -- cat`.
 14 freeze   the lock case's stream with the database's filesystem frozen (fsfreeze) for 20 s (5 s with
             --quick) instead of the lock: the database on a private loop-mounted ext4, so it needs root and
             a free loop device (skipped with the reason otherwise). Three rates of 1 KiB frames: 50/s and
             500/s fit the buffers (about 25 MiB: the journal is frozen too) and must be stored whole;
             2,000/s passes them and must be counted exactly (stored + counted = written). Same gap budgets.
 15 recorder the recorder child alone (python -m acp_relay.record.child) reading prepared pipe records of
             200 B and 1 KiB flood frames from a file: CPU us per frame of this tree against a baseline tree
             (`git archive` of --recorder-baseline, default main) in the same run, and the same rows stored.
             CPU time of a fixed input moves far less with the machine's load than a flood's frames/s.

Runs alternate relay and baseline (rotating the order) several times; the tables show medians. The machine
is shared and has 2 cores: compare against the baseline of the same run, never against another run.

How it measures: the relay's RSS is its own VmHWM (read by the relay process itself at exit, through
`tools/bench_peers.py relay`, which runs the acp-relay CLI in-process), never the agent's. Flood output is
compared byte for byte with what the agent wrote, and the database is checked for every frame. A flood's
frames/s runs from the first byte at the editor to the relay's exit (so it includes the last commit); "last
byte at the editor" shows what the editor saw. `--variant NAME=PRELUDE.py` adds a relay run (round trip
case) with PRELUDE.py executed first, to try a fix as a monkeypatch without editing the package.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cases import (
    bigline,
    check,
    diff,
    flood,
    freeze,
    hostile,
    lock,
    otel,
    recorder,
    rtt,
    search,
    show,
    start,
    view,
    ws,
)
from bench_cases.common import (
    CASES,
    PY,
    ROOT,
    log,
)

CASE_FUNCTIONS = {
    "rtt": rtt.case_rtt,
    "flood": flood.case_flood,
    "bigline": bigline.case_bigline,
    "start": start.case_start,
    "show": show.case_show,
    "search": search.case_search,
    "check": check.case_check,
    "diff": diff.case_diff,
    "view": view.case_view,
    "otel": otel.case_otel,
    "lock": lock.case_lock,
    "freeze": freeze.case_freeze,
    "ws": ws.case_ws,
    "hostile": hostile.case_hostile,
    "recorder": recorder.case_recorder,
}


# -- driver ------------------------------------------------------------------------------------------------
def fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.3f}"
    return str(v)


def print_table(rows: list[tuple[Any, ...]]) -> None:
    head = ("figure", "relay", "baseline", "ratio", "budget", "added", "met")
    table = [head] + [
        (
            r[0],
            fmt(r[1]),
            fmt(r[2]),
            "" if r[3] is None else f"{r[3]:.2f}x",
            r[4],
            r[5],
            "" if r[6] is None else "yes" if r[6] else "NO",
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for j, row in enumerate(table):
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))))
        if j == 0:
            print("  ".join("-" * w for w in widths))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller floods, fewer repetitions: under a minute")
    ap.add_argument("--case", default=",".join(CASES), help=f"comma-separated: {', '.join(CASES)} (or 1-15)")
    ap.add_argument("--json", metavar="PATH", help="save every run and the summary as JSON")
    ap.add_argument("--reps", type=int, help="repetitions per case (default: by case and mode)")
    ap.add_argument("--rtt-requests", type=int, default=5000)
    ap.add_argument(
        "--show-frames",
        type=int,
        help="frames in the generated database (default 1,000,000; "
        "--quick uses 200,000 unless the 1,000,000 one is cached)",
    )
    ap.add_argument("--regen", action="store_true", help="regenerate the cached show and view databases")
    ap.add_argument("--view-frames", type=int, default=100_000, help="frames of each session the view case pages")
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=PRELUDE.py",
        help="also run the relay with PRELUDE.py executed first (a monkeypatch to try a fix)",
    )
    ap.add_argument("--diff-frames", type=int, default=100_000, help="frames per session in the diff case")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument(
        "--flood-baseline",
        metavar="REF",
        help="the flood case also runs the relay of this git ref (git archive), alternating with this tree's",
    )
    ap.add_argument(
        "--lock-baseline",
        metavar="REF",
        help="the lock case also runs its held stream through the relay of this git ref, alternating",
    )
    ap.add_argument(
        "--recorder-baseline", default="main", metavar="REF", help="the git ref the recorder case compares with"
    )
    a = ap.parse_args(argv)
    names = []
    for c in a.case.split(","):
        c = c.strip()
        if c.isdigit() and 1 <= int(c) <= len(CASES):
            c = CASES[int(c) - 1]
        if c not in CASES:
            ap.error(f"unknown case {c!r}")
        names.append(c)
    a.cases = names
    if a.show_frames is None:
        a.show_frames = 1_000_000
        cache = Path(tempfile.gettempdir()) / "acp-relay-bench-cache"
        if a.quick and not any(cache.glob("show-1000000-*.db")):
            a.show_frames = 200_000
    q = a.quick
    a.reps_rtt = a.reps or (2 if q else 5)
    a.reps_flood = a.reps or (2 if q else 3)
    a.reps_start = a.reps or (5 if q else 15)
    a.reps_show = a.reps or (3 if q else 7)
    a.reps_big = a.reps or (1 if q else 3)
    a.reps_search_first = a.reps or (1 if q else 2)
    a.reps_search = a.reps or (3 if q else 7)
    a.reps_diff = a.reps or (2 if q else 3)
    a.reps_view = a.reps or (1 if q else 3)
    a.reps_lock = a.reps or (1 if q else 2)
    a.reps_recorder = a.reps or (2 if q else 3)
    return a


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="acp-relay-bench-"))
    fns = CASE_FUNCTIONS
    results: dict[str, Any] = {
        "command": " ".join([Path(PY).name, "tools/bench.py", *(sys.argv[1:] if argv is None else argv)]),
        "quick": args.quick,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "cases": {},
    }
    try:
        git = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
        ).stdout.strip()
        results["commit"] = git.stdout.strip() + ("+dirty" if dirty else "")
    except OSError:
        pass
    t_all = time.perf_counter()
    rows: list[tuple[Any, ...]] = []
    try:
        for name in args.cases:
            log(f"== {name}  (load average {os.getloadavg()[0]:.2f})")
            t = time.perf_counter()
            res = fns[name](args, tmp)
            res["seconds"] = time.perf_counter() - t
            res["loadavg_after"] = os.getloadavg()
            results["cases"][name] = res
            rows += res["rows"]
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    results["seconds"] = time.perf_counter() - t_all
    print(
        f"\nacp-relay benchmark: {results['command']}  ({'quick' if args.quick else 'full'}, "
        f"{results['cpus']} cpus, python {results['python']}, {results['seconds']:.0f} s, commit "
        f"{results.get('commit', '?')}, load average at the end {os.getloadavg()[0]:.2f})\n"
    )
    print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=lambda b: repr(b)[:200]))
        print(f"\nsaved {args.json}")
    failed = [r[0] for r in rows if r[6] is False]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
