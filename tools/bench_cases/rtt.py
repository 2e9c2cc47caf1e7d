"""The round-trip case: request/response latency through the relay against a plain pipe."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from .common import (
    BUDGET,
    INIT,
    MB,
    REQ,
    Chain,
    _relay_variants,
    last_connection,
    log,
    median,
    pct,
    rm_db,
)


def case_rtt(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """All chains are open at once and take turns in blocks of requests, so machine noise hits all alike.

    Each turn starts with a few unmeasured requests: the first round trips after a chain has been idle are
    slow for every variant (cold caches, sleeping CPUs) and would otherwise set the p99.
    """
    n, warm, block, rewarm = args.rtt_requests, 200, 1000, 25
    extra = _relay_variants(args)
    variants = ["direct", "cat", "pypipe", "relay", *extra]
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    clock = time.perf_counter_ns
    for rep in range(args.reps_rtt):
        chains = {}
        for v in variants:
            env = {**os.environ, "ACP_BENCH_PRELUDE": extra[v]} if v in extra else None
            chains[v] = Chain("relay-stats" if v == "relay" or v in extra else v, tmp / f"rtt-{v}-{rep}.db", env)
            chains[v].call(INIT)
        times: dict[str, list[float]] = {v: [] for v in variants}
        sent = dict.fromkeys(variants, 0)
        for v in variants:
            for _ in range(warm):
                sent[v] += 1
                chains[v].call(REQ % sent[v])
        for b, lo in enumerate(range(0, n, block)):
            k = (b + rep) % len(variants)
            for v in variants[k:] + variants[:k]:
                call, ts = chains[v].call, times[v]
                for _ in range(rewarm):
                    sent[v] += 1
                    call(REQ % sent[v])
                for _ in range(min(block, n - lo)):
                    sent[v] += 1
                    t = clock()
                    call(REQ % sent[v])
                    ts.append((clock() - t) / 1000.0)
        for v in variants:
            codes = chains[v].close()
            ts = times[v]
            res = {"p50_us": pct(ts, 50), "p99_us": pct(ts, 99), "mean_us": statistics.fmean(ts), "exit": codes}
            if v == "relay" or v in extra:
                db = tmp / f"rtt-{v}-{rep}.db"
                row = last_connection(db)
                expect = sent[v] + 1
                res["recorded_ok"] = row["n_c2a"] == expect and row["n_a2c"] == expect
                st = json.loads(Path(str(db) + ".stats").read_text())
                res["rss_mb"], res["cpu_s"] = st["hwm_kb"] * 1024 / MB, st["utime"] + st["stime"]
                rm_db(db)
                os.unlink(str(db) + ".stats")
            runs[v].append(res)
            log(f"  rtt {v:8s} rep {rep}: p50 {res['p50_us']:7.1f} us  p99 {res['p99_us']:7.1f} us")

    summary = {v: {k: median([r[k] for r in runs[v]]) for k in ("p50_us", "p99_us", "mean_us")} for v in variants}
    d = summary["direct"]
    rows: list[tuple[Any, ...]] = []
    for q, budget in (("p50_us", BUDGET["rtt_p50_us"]), ("p99_us", BUDGET["rtt_p99_us"])):
        added = summary["relay"][q] - d[q]
        rows.append(
            (
                f"round trip {q[:3]} (us)",
                summary["relay"][q],
                d[q],
                summary["relay"][q] / d[q],
                f"+{budget:.0f} us",
                f"+{added:.0f} us",
                added <= budget,
            )
        )
        rows.append(
            (
                f"  cat pipes {q[:3]} (us)",
                summary["cat"][q],
                d[q],
                summary["cat"][q] / d[q],
                "",
                f"+{summary['cat'][q] - d[q]:.0f} us",
                None,
            )
        )
        rows.append(
            (
                f"  python pipe {q[:3]} (us)",
                summary["pypipe"][q],
                d[q],
                summary["pypipe"][q] / d[q],
                "",
                f"+{summary['pypipe'][q] - d[q]:.0f} us",
                None,
            )
        )
    for v in extra:
        for q in ("p50_us", "p99_us"):
            rows.append(
                (
                    f"  variant {v} {q[:3]} (us)",
                    summary[v][q],
                    d[q],
                    summary[v][q] / d[q],
                    "",
                    f"+{summary[v][q] - d[q]:.0f} us",
                    None,
                )
            )
    ok = all(r.get("recorded_ok", True) for r in runs["relay"])
    rows.append(("round trip: every frame recorded", "yes" if ok else "NO", "", None, "all", "", ok))
    return {"runs": runs, "summary": summary, "rows": rows}
