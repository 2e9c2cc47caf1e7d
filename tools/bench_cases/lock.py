"""The lock case: streaming while another process holds the write lock, and the catching up after. The
freeze case (freeze.py) runs the same stream with the database's filesystem frozen instead."""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable
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
from .recorder import baseline_tree

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

# A process that holds a fault on the database at `db` for `seconds`: it prints "locked" once the fault is
# on, and exits once it is off again.
Holder = Callable[[Path, float], list[str]]


def write_lock(db: Path, seconds: float) -> list[str]:
    return [PY, "-c", LOCKER, str(db), str(seconds)]


def _ticks(pid: int) -> int:
    """A process's CPU so far (user + system, in clock ticks): does the recorder spin on the lock?"""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return -1


def stream_once(
    db: Path, holder: Holder | None, hold_s: float, seconds: float, size: int, rate: float, tree: Path | None = None
) -> dict[str, Any]:
    """One stream through the relay with pings every 20 ms, with a fault held for `hold_s` (or none).
    With `tree`, that checkout's acp_relay (the recorder child inherits PYTHONPATH)."""
    sent_file = db.with_suffix(".sent")
    env = {**os.environ, "ACP_BENCH_SENT": str(sent_file)}
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    agent = agent_cmd("stream", "--size", str(size), "--rate", str(rate), "--seconds", str(seconds))
    P = subprocess.PIPE
    proc = subprocess.Popen([*relay_cmd(), "run", "--db", str(db), "--", *agent], stdin=P, stdout=P, env=env)
    inp, out = _io(proc.stdin), _io(proc.stdout)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the recorder has made its row: the fault now stops its commits
        try:
            if last_connection(db).get("id"):
                break
        except (sqlite3.Error, TypeError):  # no database, no table or no row yet
            pass
        time.sleep(0.02)
    recorder = int(last_connection(db).get("recorder_pid") or 0)
    clock = time.perf_counter_ns
    fault = released = released_ns = None
    held_at = clock()
    if holder is not None:
        fault = subprocess.Popen(holder(db, hold_s), stdout=P, text=True)
        assert _io(fault.stdout).readline() == "locked\n"  # type: ignore[arg-type]
        held_at = clock()
    sent_at: dict[int, int] = {}
    rtts: list[float] = []
    arrivals: list[int] = []
    cpu: list[tuple[int, int]] = []  # (when, the recorder's CPU ticks)
    stop = threading.Event()

    pings = [0]  # written whole to the relay

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
            pings[0] += 1
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
        if fault is not None and released is None and fault.poll() is not None:
            released, released_ns = time.perf_counter(), now
        if recorder and (not cpu or now - cpu[-1][0] > 500_000_000):
            cpu.append((now, _ticks(recorder)))
        if len(arrivals) > 1 and now - arrivals[0] > (seconds - 1.0) * 1e9:
            stop.set()  # a second before the agent's own end: every ping is carried and answered
    stop.set()
    try:
        inp.close()
    except BrokenPipeError:  # the agent ended first (its own clock), and a last ping was still buffered
        pass
    code = proc.wait(600)
    t_exit = time.perf_counter()
    if fault is not None:
        fault.wait(60)
        released = released or t_exit
    sent = int(sent_file.read_text())
    row = last_connection(db)
    gaps = [(b - a) / 1e6 for a, b in zip(arrivals, arrivals[1:], strict=False)]
    worst = max(range(len(gaps)), key=gaps.__getitem__, default=0)
    if fault is None:
        phase = "no fault"
    elif released_ns is None or arrivals[worst] < released_ns:
        phase = "held"
    else:
        phase = "after release"
    held_ticks = [b - a for (_, a), (t, b) in zip(cpu, cpu[1:], strict=False) if released_ns is None or t < released_ns]
    stored = row["n_a2c"]
    res = {
        "exit": code,
        "largest_gap_ms": max(gaps, default=0.0),
        "gap_at_s": (arrivals[worst] - held_at) / 1e9 if gaps else 0.0,  # from the fault's start (or the row's)
        "gap_phase": phase,
        "top_gaps_ms": sorted(gaps, reverse=True)[:5],
        "recorder_ticks_held": sum(held_ticks),  # 10 ms each: the recorder's CPU while the fault is held
        "ping_p99_ms": pct(rtts, 99) if rtts else float("nan"),
        "pings": len(rtts),
        "drain_s": (t_exit - released) if released else 0.0,
        "frames_sent": sent,
        "frames_unrecorded": row["frames_unrecorded"],
        # every frame the agent wrote (stream and answers) stored, and its bytes: what the editor received
        "stored_ok": row["frames_unrecorded"] == 0 and stored == sent + len(rtts) and row["bytes_a2c"] == total,
        # over the bound: what is not stored is counted, exactly (stream, answers and the pings themselves)
        "counted_ok": len(rtts) == pings[0]
        and row["n_a2c"] + row["n_c2a"] + row["frames_unrecorded"] == sent + len(rtts) + pings[0],
        "c2a_stored": row["n_c2a"],
        "pings_sent": pings[0],
        "a2c_stored": stored,
        "a2c_sent": sent + len(rtts),
        "bytes_ok": nbytes == sent * size,
    }
    rm_db(db)
    sent_file.unlink()
    return res


def fault_case(
    name: str,
    holder: Holder,
    hold_s: float,
    reps: int,
    where: Path,
    *,
    rate: float = 2000.0,
    size: int = 1 * KiB,
    within_bounds: bool = True,
    baseline: Path | None = None,
) -> dict[str, Any]:
    """Alternate runs with the fault held and without, and judge them against the budgets: every rep is
    logged, the medians are judged. `within_bounds`: the fault's volume fits the relay's buffers, so every
    frame must be stored; else (a rate whose volume passes them, reported as such) what is not stored must
    be counted exactly."""
    seconds = hold_s + 3.0
    tag = f"{name} {rate:.0f}/s"

    def one(kind: str, rep: int) -> dict[str, Any]:
        r = stream_once(
            where / f"{name}-{rate:.0f}-{kind}-{rep}.db",
            None if kind == "free" else holder,
            hold_s,
            seconds,
            size,
            rate,
            baseline if kind == "base" else None,
        )
        log(
            f"  {tag} {kind:4s} rep {rep}: largest gap {r['largest_gap_ms']:7.1f} ms  ping p99 {r['ping_p99_ms']:6.2f} ms"
            f"  drain {r['drain_s']:5.1f} s  stored {'ok' if r['stored_ok'] else 'NOT ALL'}"
            f" ({r['a2c_stored']} of {r['a2c_sent']} agent frames, {r['frames_unrecorded']} counted unrecorded)"
            f"  largest at {r['gap_at_s']:5.1f} s ({r['gap_phase']}); next {', '.join(f'{g:.1f}' for g in r['top_gaps_ms'][1:4])};"
            f" recorder {r['recorder_ticks_held']} ticks while held"
        )
        return r

    runs = alternate(reps, ["held", "free"] + (["base"] if baseline else []), one)
    hd, fr = runs["held"], runs["free"]
    s = {k: median([r[k] for r in hd]) for k in ("largest_gap_ms", "ping_p99_ms", "drain_s")}
    base = {k: median([r[k] for r in fr]) for k in ("largest_gap_ms", "ping_p99_ms")}
    stored = all(r["stored_ok"] and r["bytes_ok"] for r in (hd + fr if within_bounds else fr))
    counted = all(r["counted_ok"] and r["bytes_ok"] for r in hd)
    added = s["largest_gap_ms"] - base["largest_gap_ms"]
    ratio = s["ping_p99_ms"] / base["ping_p99_ms"]
    what = {"lock": "lock", "freeze": "frozen filesystem"}.get(name, name)
    volume = f"{rate:.0f} x {size / KiB:g} KiB/s" + ("" if within_bounds else ", past the buffers")
    last = (
        (
            "  every frame stored after release (s)",
            s["drain_s"],
            "",
            None,
            f"<= {BUDGET['lock_drain_s']:.0f} s",
            "" if stored else f"{median([r['frames_unrecorded'] for r in hd]):.0f} counted",
            s["drain_s"] <= BUDGET["lock_drain_s"] and stored,
        )
        if within_bounds
        else (
            "  stored + counted = written (frames counted)",
            median([r["frames_unrecorded"] for r in hd]),
            "",
            None,
            "exact",
            "exact" if counted else "NOT EXACT",
            counted and stored,
        )
    )
    rows = [
        (
            f"{what} {hold_s:.0f} s, {volume}: largest gap at the editor (ms)",
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
        last,
    ]
    if baseline is not None:  # the same fault through the baseline's relay (held): this tree over it
        bh = {k: median([r[k] for r in runs["base"]]) for k in ("largest_gap_ms", "ping_p99_ms", "drain_s")}
        for key, label in (("largest_gap_ms", "largest gap"), ("ping_p99_ms", "ping p99"), ("drain_s", "drain")):
            rows.append((f"  held, vs baseline: {label}", s[key], bh[key], s[key] / max(bh[key], 1e-9), "", "", True))
    summary = {
        **s,
        "base": base,
        "baseline": bh if baseline is not None else None,
        "ok": stored if within_bounds else counted and stored,
        "rate": rate,
    }
    return {"runs": runs, "summary": summary, "rows": rows}


def case_lock(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    base = baseline_tree(args.lock_baseline, tmp) if getattr(args, "lock_baseline", None) else None
    return fault_case("lock", write_lock, 5.0 if args.quick else 20.0, args.reps_lock, tmp, baseline=base)
