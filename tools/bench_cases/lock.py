"""The lock case: streaming while another process holds the write lock, and the catching up after."""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

from .common import (
    BUDGET,
    PY,
    KiB,
    _io,
    agent_cmd,
    alternate,
    last_connection,
    log,
    median,
    pct,
    relay_cmd,
    rm_db,
)

# -- case 11: lock ------------------------------------------------------------------------------------------
LOCKER = (
    "import sqlite3, sys, time\n"
    "c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=60)\n"
    "c.execute('BEGIN IMMEDIATE')\n"
    "print('locked', flush=True)\n"
    "time.sleep(float(sys.argv[2]))\n"
    "c.execute('COMMIT')\n"
    "print('released', flush=True)\n"
)


def lock_once(tmp: Path, tag: str, lock_s: float | None, seconds: float, size: int, rate: float) -> dict[str, Any]:
    """One stream through the relay with pings every 20 ms, the write lock held for `lock_s` (or not)."""
    import threading

    db, sent_file = tmp / f"lock-{tag}.db", tmp / f"lock-{tag}.sent"
    env = {**os.environ, "ACP_BENCH_SENT": str(sent_file)}
    agent = agent_cmd("stream", "--size", str(size), "--rate", str(rate), "--seconds", str(seconds))
    P = subprocess.PIPE
    proc = subprocess.Popen([*relay_cmd(), "run", "--db", str(db), "--", *agent], stdin=P, stdout=P, env=env)
    inp, out = _io(proc.stdin), _io(proc.stdout)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the recorder has made its row: the lock now stops its commits
        try:
            if last_connection(db).get("id"):
                break
        except (sqlite3.Error, TypeError):  # no database, no table or no row yet
            pass
        time.sleep(0.02)
    locker = released = None
    if lock_s is not None:
        locker = subprocess.Popen([PY, "-c", LOCKER, str(db), str(lock_s)], stdout=P, text=True)
        assert _io(locker.stdout).readline() == "locked\n"  # type: ignore[arg-type]
    sent_at: dict[int, int] = {}
    rtts: list[float] = []
    arrivals: list[int] = []
    stop = threading.Event()
    clock = time.perf_counter_ns

    def pinger() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            sent_at[i] = clock()
            try:
                inp.write(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % i)
                inp.flush()
            except OSError:
                return
            stop.wait(0.02)

    threading.Thread(target=pinger, daemon=True).start()
    buf, nbytes, total = b"", 0, 0
    fd = out.fileno()
    while chunk := os.read(fd, 1 << 16):
        now = clock()
        total += len(chunk)
        arrivals.append(now)
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            if line.startswith(b'{"jsonrpc":"2.0","id":'):
                rtts.append((now - sent_at[int(line[22 : line.index(b",", 22)])]) / 1e6)
            else:
                nbytes += len(line) + 1
        if locker is not None and released is None and locker.poll() is not None:
            released = time.perf_counter()
        if len(arrivals) > 1 and now - arrivals[0] > seconds * 1e9:
            stop.set()
    stop.set()
    inp.close()
    code = proc.wait(600)
    t_exit = time.perf_counter()
    if locker is not None:
        locker.wait(60)
        released = released or t_exit
    sent = int(sent_file.read_text())
    row = last_connection(db)
    gaps = [(b - a) / 1e6 for a, b in zip(arrivals, arrivals[1:], strict=False)]
    res = {
        "exit": code,
        "largest_gap_ms": max(gaps, default=0.0),
        "ping_p99_ms": pct(rtts, 99) if rtts else float("nan"),
        "pings": len(rtts),
        "drain_s": (t_exit - released) if released else 0.0,
        "frames_sent": sent,
        # every frame the agent wrote (stream and answers) stored, and its bytes: what the editor received
        "stored_ok": row["frames_unrecorded"] == 0 and row["n_a2c"] == sent + len(rtts) and row["bytes_a2c"] == total,
        "bytes_ok": nbytes == sent * size,
    }
    rm_db(db)
    sent_file.unlink()
    return res


def case_lock(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    lock_s = 5.0 if args.quick else 20.0
    seconds, size, rate = lock_s + 3.0, 1 * KiB, 2000.0

    def one(kind: str, rep: int) -> dict[str, Any]:
        r = lock_once(tmp, f"{kind}-{rep}", lock_s if kind == "locked" else None, seconds, size, rate)
        log(
            f"  lock {kind:6s} rep {rep}: largest gap {r['largest_gap_ms']:7.1f} ms  ping p99 {r['ping_p99_ms']:6.2f} ms"
            f"  drain {r['drain_s']:5.1f} s  stored {'ok' if r['stored_ok'] else 'BAD'}"
        )
        return r

    runs = alternate(args.reps_lock, ["locked", "free"], one)
    lk, fr = runs["locked"], runs["free"]
    s = {k: median([r[k] for r in lk]) for k in ("largest_gap_ms", "ping_p99_ms", "drain_s")}
    base = {k: median([r[k] for r in fr]) for k in ("largest_gap_ms", "ping_p99_ms")}
    ok = all(r["stored_ok"] and r["bytes_ok"] for r in lk + fr)
    added = s["largest_gap_ms"] - base["largest_gap_ms"]
    ratio = s["ping_p99_ms"] / base["ping_p99_ms"]
    rows = [
        (
            f"lock {lock_s:.0f} s: largest gap at the editor (ms)",
            s["largest_gap_ms"],
            base["largest_gap_ms"],
            s["largest_gap_ms"] / max(base["largest_gap_ms"], 1e-9),
            f"+{BUDGET['lock_gap_ms']:.0f} ms",
            f"{added:+.1f} ms",
            added <= BUDGET["lock_gap_ms"],
        ),
        (
            "  ping round trip p99 (ms)",
            s["ping_p99_ms"],
            base["ping_p99_ms"],
            ratio,
            f"x{BUDGET['lock_ping_p99']:.0f}",
            f"x{ratio:.2f}",
            ratio <= BUDGET["lock_ping_p99"],
        ),
        (
            "  every frame stored after release (s)",
            s["drain_s"],
            "",
            None,
            f"<= {BUDGET['lock_drain_s']:.0f} s",
            "",
            s["drain_s"] <= BUDGET["lock_drain_s"] and ok,
        ),
    ]
    return {"runs": runs, "summary": {**s, "base": base, "ok": ok}, "rows": rows}
