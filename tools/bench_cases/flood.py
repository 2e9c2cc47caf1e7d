"""The flood case: frames per second and MB/s through the relay, checked byte for byte, and its memory."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import bench_peers  # tools/ is on sys.path: bench.py runs from there

from .common import (
    BUDGET,
    MB,
    PEERS,
    PY,
    GiB,
    KiB,
    MiB,
    _io,
    agent_cmd,
    alternate,
    last_connection,
    log,
    median,
    rm_db,
)
from .recorder import baseline_tree


# -- case 2 and 5: flood, big line ------------------------------------------------------------------------
class Checker:
    """Compares a stream, chunk by chunk, with the flood's periodic output without holding it."""

    def __init__(self, size: int, count: int) -> None:
        self.block = bench_peers.make_block(size)
        self.total = size * count
        self.pos = 0
        self.ok = True

    def feed(self, chunk: bytes) -> None:
        n, off = len(chunk), 0
        if self.pos + n > self.total:
            self.ok = False
        block, L = self.block, len(self.block)
        while off < n and self.ok:
            i = self.pos % L
            k = min(n - off, L - i)
            piece = chunk if k == n else chunk[off : off + k]
            if not block.startswith(piece, i):  # compares in place, no copy of the block
                self.ok = False
            self.pos += k
            off += k
        self.pos += n - off

    def done(self) -> bool:
        return self.ok and self.pos == self.total


def flood_once(kind: str, size: int, count: int, tmp: Path, tag: str, tree: Path | None = None) -> dict[str, Any]:
    """One flood through `cat` (kind "cat") or the relay (any other kind; with `tree`, that checkout's
    acp_relay, the recorder child included, which inherits PYTHONPATH)."""
    agent = agent_cmd("flood", "--size", str(size), "--count", str(count))
    checker = Checker(size, count)
    db, stats = tmp / f"{tag}.db", tmp / f"{tag}.stats"
    P = subprocess.PIPE
    t0 = time.perf_counter()
    if kind == "cat":
        a = subprocess.Popen(agent, stdin=subprocess.DEVNULL, stdout=P, bufsize=0)
        c = subprocess.Popen(["cat"], stdin=a.stdout, stdout=P, bufsize=0)
        _io(a.stdout).close()
        procs, out, inp = [a, c], c.stdout, None
    else:
        p = subprocess.Popen(
            [PY, str(PEERS), "relay", "--stats", str(stats), "--", "run", "--db", str(db), "--", *agent],
            stdin=P,
            stdout=P,
            bufsize=0,
            env=None if tree is None else {**os.environ, "PYTHONPATH": str(tree)},
        )
        procs, out, inp = [p], p.stdout, p.stdin
    out = _io(out)
    fd = out.fileno()
    t_first = t_full = None
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        if t_first is None:
            t_first = time.perf_counter()
        checker.feed(chunk)
        if t_full is None and checker.pos >= checker.total:
            t_full = time.perf_counter()  # the last byte reached the editor (the relay may still be recording)
    t_eof = time.perf_counter()
    if inp is not None:
        inp.close()
    codes = [p.wait(600) for p in procs]
    t_exit = time.perf_counter()
    out.close()
    t_first = t_first or t_eof
    nbytes = size * count
    res: dict[str, Any] = {
        "kind": kind,
        "size": size,
        "count": count,
        "exit": codes,
        "bytes_ok": checker.done(),
        "start_s": t_first - t0,
        "fwd_s": (t_full or t_eof) - t_first,
        "total_s": t_exit - t_first,
    }
    span = res["total_s"] if kind != "cat" else res["fwd_s"]  # the relay's figure includes the last commit
    span = max(span, 1e-9)
    res["fps"] = count / span
    res["mbps"] = nbytes / span / MB
    res["fwd_mbps"] = nbytes / max(res["fwd_s"], 1e-9) / MB
    if kind != "cat":
        st = json.loads(stats.read_text())
        res["rss_mb"] = st["hwm_kb"] * 1024 / MB
        res["cpu_s"] = st["utime"] + st["stime"]
        row = last_connection(db)
        # The relay's recorder is a child process: its peak counts too (it writes it on the connection row).
        res["relay_rss_mb"] = res["rss_mb"]
        res["recorder_rss_mb"] = (row.get("recorder_rss_kb") or 0) * 1024 / MB
        res["rss_mb"] = res["relay_rss_mb"] + res["recorder_rss_mb"]
        block = checker.block
        last_i = (count - 1) % bench_peers.frames_per_block(size)
        res["db_ok"] = (
            row["n_a2c"] == count
            and row["len_a2c"] == count * (size - 1)
            and row["frames_unrecorded"] == 0
            and row["bytes_a2c"] == nbytes
            and row["first_raw"] == block[: size - 1]
            and row["last_raw"] == block[last_i * size : (last_i + 1) * size - 1]
        )
        res["db_frames"] = row["n_a2c"]
        res["db_mb"] = sum(os.path.getsize(str(db) + s) for s in ("", "-wal") if os.path.exists(str(db) + s)) / MB
        rm_db(db)
        stats.unlink()
    return res


def _size_name(size: int) -> str:
    return f"{size // MiB} MiB" if size >= MiB else f"{size // KiB} KiB" if size >= KiB else f"{size} B"


def case_flood(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    if args.quick:
        plan = [(200, 80_000), (1 * KiB, 20_000), (64 * KiB, 512), (4 * MiB, 8)]
    else:
        plan = [(200, 1_000_000), (1 * KiB, 300_000), (64 * KiB, 16384), (4 * MiB, 128)]  # 64 KiB: the 1 GiB flood
    rows: list[tuple[Any, ...]] = []
    out: dict[str, Any] = {}
    # --flood-baseline REF: the relay of that commit too (`git archive`), alternating with this one.
    base = baseline_tree(args.flood_baseline, tmp) if args.flood_baseline else None
    kinds = ["relay", "cat"] + (["baseline"] if base else [])
    for size, count in plan:
        name = _size_name(size)

        def one(kind: str, rep: int, size: int = size, count: int = count, name: str = name) -> dict[str, Any]:
            tree = base if kind == "baseline" else None
            r = flood_once(kind, size, count, tmp, f"flood-{kind}-{size}-{rep}", tree)
            extra = (
                f"  rss {r['rss_mb']:5.1f} MB  cpu {r['cpu_s']:5.2f} s  db {'ok' if r['db_ok'] else 'BAD'}"
                if kind != "cat"
                else ""
            )
            log(
                f"  flood {name:>6} {kind:5s} rep {rep}: {r['fps']:10.0f} frames/s {r['mbps']:8.1f} MB/s  "
                f"bytes {'ok' if r['bytes_ok'] else 'BAD'}{extra}"
            )
            return r

        runs = alternate(args.reps_flood, kinds, one)
        rl, ct = runs["relay"], runs["cat"]
        s = {k: median([r[k] for r in rl]) for k in ("fps", "mbps", "fwd_mbps", "rss_mb", "cpu_s", "total_s")}
        s["rss_max_mb"] = max(r["rss_mb"] for r in rl)
        s["cat_fps"], s["cat_mbps"] = median([r["fps"] for r in ct]), median([r["mbps"] for r in ct])
        s["bytes_ok"] = all(r["bytes_ok"] for r in rl + ct)
        s["db_ok"] = all(r["db_ok"] for r in rl + runs.get("baseline", []))
        out[name] = {"runs": runs, "summary": s, "count": count, "bytes": size * count}
        gib = f" ({size * count / GiB:.2g} GiB)"
        if size in BUDGET["flood_fps"]:
            b = BUDGET["flood_fps"][size]
            rows.append(
                (
                    f"flood {name} x{count}: frames/s",
                    s["fps"],
                    s["cat_fps"],
                    s["fps"] / s["cat_fps"],
                    f">= {b:,}",
                    "",
                    s["fps"] >= b,
                )
            )
        else:
            b = BUDGET["flood_mbps"][size]
            rows.append(
                (
                    f"flood {name} x{count}: MB/s",
                    s["mbps"],
                    s["cat_mbps"],
                    s["mbps"] / s["cat_mbps"],
                    f">= {b:.0f}",
                    "",
                    s["mbps"] >= b,
                )
            )
        fwd = s["fwd_mbps"] * MB / size
        rows.append(
            (
                "  last byte at the editor, frames/s"
                if size in BUDGET["flood_fps"]
                else "  last byte at the editor, MB/s",
                fwd if size in BUDGET["flood_fps"] else s["fwd_mbps"],
                s["cat_fps"] if size in BUDGET["flood_fps"] else s["cat_mbps"],
                None,
                "",
                "",
                None,
            )
        )
        rows.append(
            (
                f"  relay + recorder peak RSS{gib} MB",
                s["rss_max_mb"],
                "",
                None,
                f"<= {BUDGET['flood_rss_mb']:.0f}",
                "",
                s["rss_max_mb"] <= BUDGET["flood_rss_mb"],
            )
        )
        if base is not None:
            bl = runs["baseline"]
            key, unit = ("fps", "frames/s") if size in BUDGET["flood_fps"] else ("mbps", "MB/s")
            b_fig, b_rss = median([r[key] for r in bl]), max(r["rss_mb"] for r in bl)
            s["baseline_" + key], s["baseline_rss_max_mb"] = b_fig, b_rss
            label = f"{args.flood_baseline}"
            rows.append((f"  against {label}'s relay, {unit}", s[key], b_fig, s[key] / b_fig, "", "", None))
            rows.append(
                (
                    f"  against {label}'s relay, peak RSS MB",
                    s["rss_max_mb"],
                    b_rss,
                    s["rss_max_mb"] / b_rss,
                    "",
                    "",
                    None,
                )
            )
        rows.append(
            (
                "  output bytes equal, all frames in db",
                "yes" if s["bytes_ok"] and s["db_ok"] else "NO",
                "",
                None,
                "all",
                "",
                s["bytes_ok"] and s["db_ok"],
            )
        )
    return {"sizes": out, "rows": rows}
