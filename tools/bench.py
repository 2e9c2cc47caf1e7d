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
  12 hostile a session holding a 64 MiB line of terminal controls (and a 64 MiB non-JSON line of them):
             `show`, `show --transcript`, `search`, `check`, `view` each within 300 MB peak RSS and 5 s, against
             `show --frame N --raw` printing the whole frame (which must stay exact).

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
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools"
PEERS = TOOLS / "bench_peers.py"
GEN_DB = TOOLS / "gen_db.py"
PY = sys.executable
sys.path.insert(0, str(TOOLS))
import bench_peers  # noqa: E402

MB = 1e6
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
CASES = ["rtt", "flood", "start", "show", "bigline", "search", "check", "diff", "view", "otel", "lock", "hostile"]

BUDGET: dict[str, Any] = {
    "rtt_p50_us": 50.0,
    "rtt_p99_us": 150.0,
    "flood_fps": {200: 100_000, 1 * KiB: 60_000},
    "flood_mbps": {64 * KiB: 200.0, 4 * MiB: 200.0},
    "flood_rss_mb": 80.0,
    "bigline_rss_factor": 2.0,
    "start_ms": 150.0,
    "show_s": 0.3,
    "search_first_s": 60.0,
    "search_later_s": 0.5,
    "check_fps": 20_000.0,
    "diff_s": 5.0,
    "view_write_s": 5.0,
    "view_render_s": 2.0,
    "view_size": (1.5, 300_000),  # at most 1.5x the session's raw bytes + 300 KB
    "view_scroll_ms": 50.0,  # p95 of a scroll step (two animation frames are 33 ms)
    "otel_factor": 2.0,  # otel export of a session against show --transcript of it
    "lock_gap_ms": 5.0,  # the largest gap the editor sees, held lock against none: at most this much more
    "lock_ping_p99": 2.0,  # a ping's round-trip p99, held lock against none: at most this many times
    "lock_drain_s": 30.0,  # every frame stored this long after the lock is released
}


def _io(stream: IO[bytes] | None) -> IO[bytes]:
    """A pipe the Popen call asked for (so never None)."""
    assert stream is not None
    return stream


def relay_cmd() -> list[str]:
    exe = Path(PY).parent / "acp-relay"
    return [str(exe)] if exe.exists() else [PY, "-m", "acp_relay"]


def agent_cmd(*args: str) -> list[str]:
    return [PY, str(PEERS), *args]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def alternate(reps: int, variants: list[str], fn: Callable[[str, int], dict[str, Any]]) -> dict[str, list[dict]]:
    """Run each variant `reps` times, rotating which goes first so drift hits all of them alike."""
    out: dict[str, list[dict]] = {v: [] for v in variants}
    for r in range(reps):
        order = variants[r % len(variants) :] + variants[: r % len(variants)]
        for v in order:
            out[v].append(fn(v, r))
    return out


def timed_run(cmd: list[str], kind: str, rep: int) -> dict[str, Any]:
    """One run of a command: wall and CPU seconds (user + sys of the child), exit status, its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True)
    dt = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    log(f"  {kind:40s} rep {rep}: {dt:6.2f} s  cpu {cpu:6.2f} s  exit {r.returncode}")
    return {"s": dt, "cpu_s": cpu, "exit": r.returncode, "out": r.stdout.decode(errors="replace").strip()}


def rm_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.unlink(str(path) + suffix)
        except FileNotFoundError:
            pass


def last_connection(db: Path) -> dict[str, Any]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        conn.row_factory = sqlite3.Row
        row = dict(conn.execute("SELECT * FROM connections ORDER BY id DESC LIMIT 1").fetchone())
        cid = row["id"]
        for direction in ("a2c", "c2a"):
            n, total = conn.execute(
                "SELECT count(*), coalesce(sum(length), 0) FROM frames WHERE connection_id = ? AND direction = ?",
                (cid, direction),
            ).fetchone()
            row[f"n_{direction}"], row[f"len_{direction}"] = n, total
        first = conn.execute(
            "SELECT raw FROM frames WHERE connection_id = ? AND direction = 'a2c' ORDER BY seq LIMIT 1", (cid,)
        ).fetchone()
        last = conn.execute(
            "SELECT raw FROM frames WHERE connection_id = ? AND direction = 'a2c' ORDER BY seq DESC LIMIT 1", (cid,)
        ).fetchone()
        row["first_raw"] = first[0] if first else None
        row["last_raw"] = last[0] if last else None
        return row
    finally:
        conn.close()


# -- case 1: round trip ------------------------------------------------------------------------------------
REQ = (
    b'{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"bench-session",'
    b'"prompt":[{"type":"text","text":"hello"}]}}\n'
)
INIT = (
    b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,'
    b'"clientCapabilities":{},"clientInfo":{"name":"bench","version":"0"}}}\n'
)


class Chain:
    """Processes between us and the echo agent: write to `w`, read from `r`."""

    def __init__(self, kind: str, db: Path, env: dict[str, str] | None = None) -> None:
        echo = agent_cmd("echo")
        P = subprocess.PIPE
        self.procs: list[subprocess.Popen] = []
        if kind == "direct":
            p = subprocess.Popen(echo, stdin=P, stdout=P, bufsize=0)
            self.procs, self.w, self.r = [p], p.stdin, p.stdout
        elif kind == "cat":
            c_in = subprocess.Popen(["cat"], stdin=P, stdout=P, bufsize=0)
            a = subprocess.Popen(echo, stdin=c_in.stdout, stdout=P, bufsize=0)
            c_out = subprocess.Popen(["cat"], stdin=a.stdout, stdout=P, bufsize=0)
            _io(c_in.stdout).close()
            _io(a.stdout).close()
            self.procs, self.w, self.r = [c_in, a, c_out], c_in.stdin, c_out.stdout
        elif kind == "pypipe":
            p = subprocess.Popen(agent_cmd("pipe", "--", *echo), stdin=P, stdout=P, bufsize=0)
            self.procs, self.w, self.r = [p], p.stdin, p.stdout
        elif kind == "relay":  # the console script itself: what an editor starts
            p = subprocess.Popen([*relay_cmd(), "run", "--db", str(db), "--", *echo], stdin=P, stdout=P, bufsize=0)
            self.procs, self.w, self.r = [p], p.stdin, p.stdout
        elif kind == "relay-stats":  # the same code in-process under bench_peers, which reports its peak RSS
            p = subprocess.Popen(
                agent_cmd("relay", "--stats", str(db) + ".stats", "--", "run", "--db", str(db), "--", *echo),
                stdin=P,
                stdout=P,
                bufsize=0,
                env=env,
            )
            self.procs, self.w, self.r = [p], p.stdin, p.stdout
        else:
            raise ValueError(kind)
        self.w, self.r = _io(self.w), _io(self.r)
        self.wfd, self.rfd = self.w.fileno(), self.r.fileno()
        self.buf = b""

    def call(self, line: bytes) -> bytes:
        os.write(self.wfd, line)
        buf = self.buf
        while b"\n" not in buf:
            chunk = os.read(self.rfd, 1 << 16)
            if not chunk:
                raise RuntimeError("agent closed its output")
            buf += chunk
        out, _, self.buf = buf.partition(b"\n")
        return out

    def close(self) -> list[int]:
        _io(self.w).close()
        while os.read(self.rfd, 1 << 16):
            pass
        _io(self.r).close()
        return [p.wait(30) for p in self.procs]


def _relay_variants(args: argparse.Namespace) -> dict[str, str]:
    """`--variant NAME=PRELUDE.py`: extra relay runs with a monkeypatch applied (see bench_peers `relay`)."""
    return dict(v.split("=", 1) for v in args.variant)


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


def flood_once(kind: str, size: int, count: int, tmp: Path, tag: str) -> dict[str, Any]:
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
    span = res["total_s"] if kind == "relay" else res["fwd_s"]  # the relay's figure includes the last commit
    span = max(span, 1e-9)
    res["fps"] = count / span
    res["mbps"] = nbytes / span / MB
    res["fwd_mbps"] = nbytes / max(res["fwd_s"], 1e-9) / MB
    if kind == "relay":
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
    for size, count in plan:
        name = _size_name(size)

        def one(kind: str, rep: int, size: int = size, count: int = count, name: str = name) -> dict[str, Any]:
            r = flood_once(kind, size, count, tmp, f"flood-{size}-{rep}")
            extra = (
                f"  rss {r['rss_mb']:5.1f} MB  cpu {r['cpu_s']:5.2f} s  db {'ok' if r['db_ok'] else 'BAD'}"
                if kind == "relay"
                else ""
            )
            log(
                f"  flood {name:>6} {kind:5s} rep {rep}: {r['fps']:10.0f} frames/s {r['mbps']:8.1f} MB/s  "
                f"bytes {'ok' if r['bytes_ok'] else 'BAD'}{extra}"
            )
            return r

        runs = alternate(args.reps_flood, ["relay", "cat"], one)
        rl, ct = runs["relay"], runs["cat"]
        s = {k: median([r[k] for r in rl]) for k in ("fps", "mbps", "fwd_mbps", "rss_mb", "cpu_s", "total_s")}
        s["rss_max_mb"] = max(r["rss_mb"] for r in rl)
        s["cat_fps"], s["cat_mbps"] = median([r["fps"] for r in ct]), median([r["mbps"] for r in ct])
        s["bytes_ok"] = all(r["bytes_ok"] for r in rl + ct)
        s["db_ok"] = all(r["db_ok"] for r in rl)
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


# -- case 3: start -----------------------------------------------------------------------------------------
def case_start(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    db = tmp / "start.db"

    def one(kind: str, rep: int) -> dict[str, Any]:
        t0 = time.perf_counter()
        chain = Chain(kind, db)
        chain.call(INIT)
        t = time.perf_counter() - t0
        chain.close()
        log(f"  start {kind:6s} rep {rep}: {t * 1000:6.1f} ms")
        return {"ms": t * 1000}

    Chain("relay", db).close()  # the database exists already, as it does for every start but the first
    fresh = tmp / "start-fresh.db"
    t0 = time.perf_counter()
    c = Chain("relay", fresh)
    c.call(INIT)
    fresh_ms = (time.perf_counter() - t0) * 1000
    c.close()
    runs = alternate(args.reps_start, ["direct", "relay"], one)
    d, r = median([x["ms"] for x in runs["direct"]]), median([x["ms"] for x in runs["relay"]])
    rows = [
        (
            "start to initialize response (ms)",
            r,
            d,
            r / d,
            f"+{BUDGET['start_ms']:.0f} ms",
            f"+{r - d:.0f} ms",
            r - d <= BUDGET["start_ms"],
        ),
        ("  same, new database (one run, ms)", fresh_ms, d, fresh_ms / d, "", f"+{fresh_ms - d:.0f} ms", None),
    ]
    rm_db(db)
    rm_db(fresh)
    return {"runs": runs, "summary": {"direct_ms": d, "relay_ms": r, "fresh_db_ms": fresh_ms}, "rows": rows}


# -- case 4: show ------------------------------------------------------------------------------------------
def _show_available() -> str | None:
    if not GEN_DB.exists():
        return "tools/gen_db.py is missing"
    r = subprocess.run([*relay_cmd(), "show", "--help"], capture_output=True, text=True)
    if r.returncode != 0:
        return "the `acp-relay show` command is missing"
    return None


def _show_db(args: argparse.Namespace) -> Path:
    """The generated database of --show-frames frames, cached across runs."""
    return _cached_db("show", args.show_frames, [], args.regen)


def _cached_db(kind: str, frames: int, gen_args: list[str], regen: bool) -> Path:
    """A gen_db.py database, cached across runs by kind, frame count and the code that shapes it (gen_db.py
    and the migrations); an older one of the same kind and count is removed when it is made again."""
    import hashlib

    h = hashlib.sha256(GEN_DB.read_bytes())
    for m in sorted((ROOT / "migrations").glob("*.sql")):
        h.update(m.read_bytes())
    cache = Path(tempfile.gettempdir()) / "acp-relay-bench-cache"
    cache.mkdir(exist_ok=True)
    db = cache / f"{kind}-{frames}-{h.hexdigest()[:12]}.db"
    if not db.exists() or regen:
        for old in cache.glob(f"{kind}-{frames}-*.db"):
            rm_db(old)
        cmd = [PY, str(GEN_DB), str(db), *gen_args, "--frames", str(frames)]
        log(f"  generating the database: {' '.join(cmd)}")
        t = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            rm_db(db)
            raise RuntimeError(f"gen_db.py failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
        log(f"  generated in {time.perf_counter() - t:.1f} s")
    return db


def _generated_db(args: argparse.Namespace, command: str = "show") -> tuple[Path | None, str | None]:
    """The generated database for a case that runs `acp-relay COMMAND` on it, or why the case is skipped."""
    why = _show_available()
    missing = command != "show" and subprocess.run([*relay_cmd(), command, "--help"], capture_output=True).returncode
    if not why and missing:
        why = f"the `acp-relay {command}` command is missing"
    if why:
        return None, why
    try:
        return _show_db(args), None
    except RuntimeError as exc:
        return None, str(exc)


def _largest_session(db: Path) -> tuple[str, int]:
    """The session with the most frames (its id and count): the worst case for a command on one session."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(
            "SELECT session_id, count(*) FROM frames WHERE session_id IS NOT NULL "
            "GROUP BY session_id ORDER BY count(*) DESC LIMIT 1"
        ).fetchone()
    finally:
        conn.close()


def case_show(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    db, why = _generated_db(args)
    if why or db is None:
        log(f"  show: SKIPPED ({why}; case 4 needs tools/gen_db.py and `acp-relay show`)")
        return {"skipped": why, "rows": [("show on 1M frames", f"skipped: {why}", "", None, "< 0.3 s", "", None)]}
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    n = conn.execute("SELECT max(id) FROM frames").fetchone()[0] or 0
    conn.close()
    big = _largest_session(db)
    show = [*relay_cmd(), "show", "--db", str(db), "--color", "never"]
    queries = {
        "list sessions": show,
        "last 100 frames, largest session": show + [big[0], "--tail", "100"],
        "last 100 frames, session `last`": show + ["last", "--tail", "100"],
        "baseline: acp-relay --help": [*relay_cmd(), "--help"],
        "baseline: python -c pass": [PY, "-c", "pass"],
    }

    def one(kind: str, rep: int) -> dict[str, Any]:
        t = time.perf_counter()
        r = subprocess.run(queries[kind], capture_output=True)
        dt = time.perf_counter() - t
        lines = r.stdout.count(b"\n")
        log(f"  show {kind:34s} rep {rep}: {dt * 1000:7.1f} ms  exit {r.returncode}  {lines} lines")
        return {"s": dt, "exit": r.returncode, "lines": lines, "err": r.stderr[-300:].decode("utf-8", "replace")}

    runs = alternate(args.reps_show, list(queries), one)
    s = {k: median([r["s"] for r in v]) for k, v in runs.items()}
    base = s["baseline: acp-relay --help"]
    rows: list[tuple[Any, ...]] = []
    for k in list(queries)[:3]:
        ok = all(r["exit"] == 0 for r in runs[k])
        rows.append(
            (
                f"show: {k} (s)",
                s[k],
                base,
                s[k] / base,
                "< 0.3 s",
                "" if ok else "EXIT != 0",
                ok and s[k] < BUDGET["show_s"],
            )
        )
    rows.append(
        (
            f"  ({n:,} frames; largest session {big[1]:,} frames; baseline `acp-relay --help`)",
            "",
            "",
            None,
            "",
            "",
            None,
        )
    )
    return {
        "runs": runs,
        "summary": s,
        "frames": n,
        "largest_session": list(big),
        "db": str(db),
        "commands": queries,
        "rows": rows,
    }


# -- case 6: search ----------------------------------------------------------------------------------------
SEARCH_FULL_READ = (
    "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
    "print(c.execute(\"SELECT count(*), sum(instr(raw, X'00')) FROM frames\").fetchone())"
)

SEARCH_IN_PROCESS = """
import json, sys, time
from acp_relay.store import db
from acp_relay.store.queries import resolve_view
from acp_relay.store.search import search, update_index
conn = db.connect(sys.argv[1], create=False)
out = {}
for args in json.loads(sys.argv[3]):
    t = time.perf_counter()
    update_index(conn)
    view = resolve_view(conn, args[args.index("--session") + 1]) if "--session" in args else None
    limit = int(args[args.index("--limit") + 1]) if "--limit" in args else None
    n = sum(1 for _ in search(conn, args[0], view=view, limit=limit))
    out[" ".join(args)] = time.perf_counter() - t
print(json.dumps(out))
"""


def case_search(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    src, why = _generated_db(args, "search")
    if why or src is None:
        log(f"  search: SKIPPED ({why})")
        return {"skipped": why, "rows": [("search", f"skipped: {why}", "", None, "", "", None)]}
    big = _largest_session(src)[0]
    conn = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    n = conn.execute("SELECT max(id) FROM frames").fetchone()[0] or 0
    # A phrase from the middle of that session (in the flood session, "token N": one match).
    phrase = conn.execute(
        "SELECT json_extract(CAST(raw AS TEXT), '$.params.update.content.text') FROM frames WHERE session_id = ? "
        "AND update_kind = 'agent_message_chunk' ORDER BY id LIMIT 1 OFFSET "
        "(SELECT count(*) / 2 FROM frames WHERE session_id = ? AND update_kind = 'agent_message_chunk')",
        (big, big),
    ).fetchone()[0]
    word = phrase.split()[0].replace('"', "")  # a word the session surely holds ("token" in the flood)
    phrase = '"' + " ".join(phrase.split()).replace('"', "") + '"'
    conn.close()
    work = tmp / "search.db"
    search = [*relay_cmd(), "search", "--db", str(work), "--color", "never"]

    def fresh() -> None:
        rm_db(work)
        shutil.copyfile(src, work)
        if Path(f"{src}-wal").exists():  # a database opened since it was made may hold pages there
            shutil.copyfile(f"{src}-wal", f"{work}-wal")

    def timed(cmd: list[str]) -> dict[str, Any]:
        t = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True)
        dt = time.perf_counter() - t
        return {
            "s": dt,
            "exit": r.returncode,
            "lines": r.stdout.count(b"\n"),
            "err": r.stderr[-300:].decode("utf-8", "replace"),
        }

    # The first search builds the index: each repetition on a fresh copy, beside one full read of the frames.
    first: dict[str, list[dict[str, Any]]] = {"first search (builds the index)": [], "baseline: read every frame": []}
    for rep in range(args.reps_search_first):
        fresh()
        for kind, cmd in (
            ("baseline: read every frame", [PY, "-c", SEARCH_FULL_READ, str(work)]),
            ("first search (builds the index)", search + ["overloaded", "--limit", "20"]),
        ):
            res = timed(cmd)
            log(f"  search {kind:36s} rep {rep}: {res['s']:7.2f} s  exit {res['exit']}")
            first[kind].append(res)
    later = {
        "rare word, every match": search + ["overloaded"],
        "common word, first 20": search + ["function", "--limit", "20"],
        "phrase, largest session": search + [phrase, "--session", big],
        "common word, largest session, first 20": search + [word, "--session", big, "--limit", "20"],
        "no match (exit 1)": search + ["zebra"],
        "baseline: acp-relay --help": [*relay_cmd(), "--help"],
    }

    def one(kind: str, rep: int) -> dict[str, Any]:
        res = timed(later[kind])
        log(f"  search {kind:36s} rep {rep}: {res['s'] * 1000:7.1f} ms  exit {res['exit']}  {res['lines']} lines")
        return res

    runs = alternate(args.reps_search, list(later), one)
    # The same later searches inside one process: what the index costs, without Python's start-up.
    inproc = subprocess.run(
        [PY, "-c", SEARCH_IN_PROCESS, str(work), big, json.dumps([c[len(search) :] for c in list(later.values())[:5]])],
        capture_output=True,
        text=True,
    )
    in_process = json.loads(inproc.stdout) if inproc.returncode == 0 else {}
    log(f"  search in process (s): {in_process or inproc.stderr[-300:]}")
    s = {k: median([r["s"] for r in v]) for k, v in {**first, **runs}.items()}
    size = work.stat().st_size
    rows: list[tuple[Any, ...]] = []
    k0, b0 = "first search (builds the index)", "baseline: read every frame"
    ok = all(r["exit"] == 0 for r in first[k0])
    rows.append((f"search: {k0} (s)", s[k0], s[b0], s[k0] / s[b0], "<= 60 s", "" if ok else "EXIT != 0",
                 ok and s[k0] <= float(BUDGET["search_first_s"])))  # fmt: skip
    base = s["baseline: acp-relay --help"]
    for k in list(later)[:5]:
        want = 1 if k.startswith("no match") else 0
        ok = all(r["exit"] == want for r in runs[k])
        rows.append((f"search: {k} (s)", s[k], base, s[k] / base, "< 0.5 s", "" if ok else "EXIT WRONG",
                     ok and s[k] < float(BUDGET["search_later_s"])))  # fmt: skip
    if in_process:
        rows.append(
            ("search: the same, in one process, median (s)", median(list(in_process.values())), "", None, "", "", None)
        )
    rows.append((f"  ({n:,} frames; database with its index {size / MB:,.0f} MB)", "", "", None, "", "", None))
    return {
        "in_process": in_process,
        "runs": {**first, **runs},
        "summary": s,
        "frames": n,
        "db_bytes": size,
        "largest_session": big,
        "commands": later,
        "rows": rows,
    }


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


# -- case 10: hostile -----------------------------------------------------------------------------------
HOSTILE_MB, HOSTILE_S = 300.0, 5.0  # issue 19's budget for each read command on a 64 MiB hostile line


_HOSTILE_GEN = r"""
import hashlib, json, sys
MiB = 1 << 20
sid = "hostile-1"
text = "\x1b\x07\x9b" * ((64 * MiB) // 14)  # 14 bytes of JSON each: \u001b, \u0007 and two of UTF-8
chunk = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": {
    "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}}
line = json.dumps(chunk, ensure_ascii=False, separators=(",", ":")).encode()
with open(sys.argv[1], "wb") as f:
    f.write(b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/p","mcpServers":[]}}\n')
    f.write(b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"hostile-1"}}\n')
    f.write(b'{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"hostile-1","prompt":'
            b'[{"type":"text","text":"go hostile"}]}}\n')
    f.write(line + b"\n")
    f.write(b"\x1b[31m\x00\x9b" * (8 * MiB) + b"\n")
    f.write(b'{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}\n')
print(hashlib.sha256(line + b"\n").hexdigest())
"""


def _hostile_db(tmp: Path) -> tuple[Path, int, str]:
    """A session with a 64 MiB agent chunk of escapes and a 64 MiB non-JSON line of them, recorded through
    the relay; the chunk's frame id and the sha256 of its line. Generated in a child process: a child's
    peak RSS starts from its parent's at fork, so this process must never hold the big line."""
    src, db = tmp / "hostile.ndjson", tmp / "hostile.db"
    digest = subprocess.run([PY, "-c", _HOSTILE_GEN, str(src)], capture_output=True, text=True, check=True).stdout
    with open(src, "rb") as f:
        subprocess.run(
            [*relay_cmd(), "run", "--db", str(db), "--", "cat"], stdin=f, stdout=subprocess.DEVNULL, check=True
        )
    src.unlink()
    with sqlite3.connect(db) as conn:
        (fid,) = conn.execute("SELECT id FROM frames WHERE length > ? AND kind = 'notification'", (MiB,)).fetchone()
    return db, fid, digest.strip()


def case_hostile(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    import hashlib

    db, fid, digest = _hostile_db(tmp)
    page = tmp / "hostile.html"
    base = "baseline: show --frame N --raw"
    commands = {
        "show SESSION": ["show", "hostile-1"],
        "show --transcript": ["show", "hostile-1", "--transcript"],
        "search": ["search", "hostile"],
        "check": ["check", "hostile-1"],
        "view": ["view", "hostile-1", "-o", str(page)],
        base: ["show", "--frame", str(fid), "--raw"],
    }

    def one(kind: str, rep: int) -> dict[str, Any]:
        page.unlink(missing_ok=True)
        t = time.perf_counter()
        p = subprocess.Popen([*relay_cmd(), *commands[kind], "--db", str(db)], stdout=subprocess.PIPE)
        h, n = hashlib.sha256(), 0
        while chunk := _io(p.stdout).read(1 << 20):  # streamed: this process stays small (see _hostile_db)
            h.update(chunk)
            n += len(chunk)
        _, status, usage = os.wait4(p.pid, 0)
        dt = time.perf_counter() - t
        rss = usage.ru_maxrss * 1024 / MB  # KiB on Linux
        ok = os.waitstatus_to_exitcode(status) in (0, 1) and (kind != base or h.hexdigest() == digest)
        log(f"  hostile {kind:32s} rep {rep}: {dt:6.2f} s  {rss:6.1f} MB  out {n:>10,} B  {'ok' if ok else 'BAD'}")
        return {"s": dt, "rss_mb": rss, "out": n, "ok": ok}

    runs = alternate(args.reps_big, list(commands), one)
    rows: list[tuple[Any, ...]] = []
    bs = median([r["s"] for r in runs[base]])
    for kind in commands:
        if kind == base:
            continue
        s, mb = median([r["s"] for r in runs[kind]]), max(r["rss_mb"] for r in runs[kind])
        ok = all(r["ok"] for r in runs[kind])
        rows.append(
            (f"hostile 64 MiB line: {kind} (s)", s, bs, s / bs, f"<= {HOSTILE_S:.0f} s", "", ok and s <= HOSTILE_S)
        )
        rows.append((f"  {kind}: peak RSS MB", mb, "", None, f"<= {HOSTILE_MB:.0f}", "", mb <= HOSTILE_MB))
    exact = all(r["ok"] for r in runs[base])
    rows.append(("  show --frame N --raw gives every byte", "yes" if exact else "NO", "", None, "exact", "", exact))
    return {"runs": runs, "rows": rows}


# -- case 8: diff ------------------------------------------------------------------------------------------
def _diff_session(sid: str, frames: int, variant: bool) -> list[tuple[str, bytes]]:
    """A v1 session of about `frames` frames: turns of streamed chunks, a tool call, a permission."""
    from gen_db import _msg, _update

    out: list[tuple[str, bytes]] = [
        ("c2a", _msg(id=0, method="initialize", params={"protocolVersion": 1, "clientInfo": {"name": "ed"}})),
        ("a2c", _msg(id=0, result={"protocolVersion": 1, "agentInfo": {"name": "bench-agent"}})),
        ("c2a", _msg(id=1, method="session/new", params={"cwd": "/w", "mcpServers": []})),
        ("a2c", _msg(id=1, result={"sessionId": sid})),
    ]
    turn = 0
    while len(out) < frames:
        turn += 1
        rid = turn + 1
        out.append(
            (
                "c2a",
                _msg(
                    id=rid,
                    method="session/prompt",
                    params={"sessionId": sid, "prompt": [{"type": "text", "text": f"step {turn}"}]},
                ),
            )
        )
        chunks = 40 + (1 if variant and turn % 40 == 0 else 0)
        for i in range(chunks):
            word = "changed" if variant and turn % 50 == 0 and i == 3 else f"w{i}"
            out.append(
                (
                    "a2c",
                    _update(
                        sid,
                        {
                            "sessionUpdate": "agent_message_chunk",
                            "messageId": f"m{turn}",
                            "content": {"type": "text", "text": word + " "},
                        },
                    ),
                )
            )
        tc = f"t{turn}"
        out.append(
            ("a2c", _update(sid, {"sessionUpdate": "tool_call", "toolCallId": tc, "title": "Read", "kind": "read"}))
        )
        out.append(
            (
                "a2c",
                _msg(
                    id=turn,
                    method="session/request_permission",
                    params={
                        "sessionId": sid,
                        "toolCall": {"toolCallId": tc},
                        "options": [{"optionId": "a", "kind": "allow_once", "name": "A"}],
                    },
                ),
            )
        )
        out.append(("c2a", _msg(id=turn, result={"outcome": {"outcome": "selected", "optionId": "a"}})))
        out.append(
            ("a2c", _update(sid, {"sessionUpdate": "tool_call_update", "toolCallId": tc, "status": "completed"}))
        )
        out.append(("a2c", _msg(id=rid, result={"stopReason": "end_turn"})))
    return out


def _diff_db(path: Path, frames: int) -> None:
    sys.path.insert(0, str(ROOT))
    from acp_relay.store import db as dbmod
    from acp_relay.store.scripted import ConnectionWriter

    conn = dbmod.connect(path)
    for n, (sid, variant) in enumerate((("bench-a", False), ("bench-b", True))):
        conn.execute("BEGIN")
        w = ConnectionWriter(conn, started_at=1_767_225_600.0 + n * 3600, argv=["bench-agent"], label=sid)
        mono = 0.0
        for i, (direction, line) in enumerate(_diff_session(sid, frames, variant)):
            mono += 0.001
            w.line(direction, line, mono)
            if i % 5000 == 0:
                w.flush()
        w.flush()
        w.close(ended_mono=mono + 0.01)
        conn.execute("COMMIT")
    conn.close()


def case_diff(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    db = tmp / "diff.db"
    t = time.perf_counter()
    _diff_db(db, args.diff_frames)
    log(f"  generated two {args.diff_frames:,}-frame sessions in {time.perf_counter() - t:.1f} s")
    base = [*relay_cmd(), "show", "--db", str(db), "--raw"]
    cmds = {
        "diff": [*relay_cmd(), "diff", "--db", str(db), "bench-a", "bench-b"],
        "baseline": ["sh", "-c", " && ".join(" ".join(base + [s]) + " >/dev/null" for s in ("bench-a", "bench-b"))],
    }

    def cpu() -> float:
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        return ru.ru_utime + ru.ru_stime

    def one(kind: str, rep: int) -> dict[str, Any]:
        t, c = time.perf_counter(), cpu()
        r = subprocess.run(cmds[kind], capture_output=True)
        dt, dc = time.perf_counter() - t, cpu() - c
        log(f"  diff {kind:9s} rep {rep}: {dt:6.2f} s  cpu {dc:6.2f} s  exit {r.returncode}")
        return {"s": dt, "cpu": dc, "exit": r.returncode, "out": r.stdout[:2000].decode("utf-8", "replace")}

    runs = alternate(args.reps_diff, list(cmds), one)
    s = {k: median([r["s"] for r in v]) for k, v in runs.items()}
    c = {k: median([r["cpu"] for r in v]) for k, v in runs.items()}
    ok = all(r["exit"] == 1 for r in runs["diff"]) and all(r["exit"] == 0 for r in runs["baseline"])
    rows = [
        (
            f"diff: two {args.diff_frames:,}-frame sessions (s)",
            s["diff"],
            s["baseline"],
            s["diff"] / s["baseline"],
            "< 5 s",
            "" if ok else "UNEXPECTED EXIT",
            ok and s["diff"] < BUDGET["diff_s"],
        ),
        (
            "diff: CPU seconds (user + sys, all processes)",
            c["diff"],
            c["baseline"],
            c["diff"] / c["baseline"],
            "",
            "",
            None,
        ),
        ("  (baseline: `show --raw` of both sessions)", "", "", None, "", "", None),
    ]
    return {"runs": runs, "summary": s, "cpu": c, "rows": rows}


# -- case 9: view ------------------------------------------------------------------------------------------
def _view_db(args: argparse.Namespace) -> Path:
    """Two sessions of --view-frames frames (gen_db.py --sessions), cached like the show database."""
    return _cached_db("view", args.view_frames, ["--sessions"], args.regen)


def _sessions_db(args: argparse.Namespace, *command: str) -> tuple[Path | None, str | None]:
    """The two-session database of the view and otel cases, or why the case is skipped."""
    if not GEN_DB.exists():
        return None, "tools/gen_db.py is missing"
    if subprocess.run([*relay_cmd(), *command, "--help"], capture_output=True).returncode != 0:
        return None, f"the `acp-relay {' '.join(command)}` command is missing"
    try:
        return _view_db(args), None
    except RuntimeError as exc:
        return None, str(exc)


def _bare_page(html: Path, out: Path) -> Path:
    """The page's data block alone in a page with no script: what the browser pays to read the bytes."""
    page = html.read_bytes()
    start = page.index(b'<script type="application/json"')
    end = page.index(b"</script>", start) + len(b"</script>")
    out.write_bytes(
        b'<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>' + page[start:end] + b"</body></html>"
    )
    return out


def _browser_runs(pages: dict[str, Path], reps: int) -> dict[str, Any]:
    """Per page: ms from navigation to the first painted screen (the bare page: to DOM ready), scroll p95."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return {"skipped": "Playwright is not installed"}
    chromium = next((p for p in ("/usr/bin/chromium", shutil.which("chromium")) if p and os.access(p, os.X_OK)), None)
    if chromium is None:
        return {"skipped": "no system Chromium"}
    out: dict[str, Any] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for rep in range(reps):
            for name, path in pages.items():
                page = browser.new_page(viewport={"width": 1440, "height": 860})
                page.goto(path.resolve().as_uri(), timeout=120_000)
                if name.startswith("bare"):
                    ms = page.evaluate("() => performance.timing.domInteractive - performance.timing.navigationStart")
                    res = {"first_ms": ms}
                else:
                    page.wait_for_selector("body[data-timing]", timeout=120_000)
                    timing = json.loads(page.get_attribute("body", "data-timing") or "{}")
                    page.wait_for_timeout(1500)  # the transcript's later slices
                    steps = page.evaluate(SCROLL_JS)
                    res = {
                        "first_ms": timing["painted"],
                        "timing": timing,
                        "scroll_p50_ms": steps[len(steps) // 2],
                        "scroll_p95_ms": steps[int(len(steps) * 0.95)],
                    }
                log(
                    f"  view {name:22s} rep {rep}: first screen {res['first_ms']:6.0f} ms"
                    + (f"  scroll p95 {res['scroll_p95_ms']:5.1f} ms" if "scroll_p95_ms" in res else "")
                )
                out.setdefault(name, []).append(res)
                page.close()
        browser.close()
    return out


# The first chunk run opened (a flood is one run: opened, it is 100,000 rows), then 60 scroll steps of 80
# rows each; each step's time is the scroll, the redraw and two animation frames.
SCROLL_JS = """async () => {
  const run = document.querySelector('#rows .row.run');
  if (run) { run.click(); await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))); }
  const s = document.getElementById('scroller'), out = [];
  for (let i = 0; i < 60; i++) {
    const t = performance.now();
    s.scrollTop += 2400;
    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    out.push(performance.now() - t);
  }
  return out.sort((a, b) => a - b);
}"""


def case_view(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    db, why = _sessions_db(args, "view")
    if why or db is None:
        log(f"  view: SKIPPED ({why})")
        return {"skipped": why, "rows": [("view of 100k frames", f"skipped: {why}", "", None, "", "", None)]}
    sessions = {"mixed": "long", "chunk flood": "flood"}
    raw = {}
    for name, sid in sessions.items():
        r = subprocess.run([*relay_cmd(), "show", "--db", str(db), sid, "--raw"], capture_output=True)
        raw[name] = len(r.stdout)
    runs_cmd = {}
    for name, sid in sessions.items():
        runs_cmd[f"view {name}"] = [*relay_cmd(), "view", "--db", str(db), sid, "-o", str(tmp / f"view-{sid}.html")]
        runs_cmd[f"baseline: show --transcript {name}"] = [*relay_cmd(), "show", "--db", str(db), sid, "--transcript"]

    runs = alternate(args.reps_view, list(runs_cmd), lambda kind, rep: timed_run(runs_cmd[kind], kind, rep))
    s = {k: median([r["s"] for r in v]) for k, v in runs.items()}
    cpu = {k: median([r["cpu_s"] for r in v]) for k, v in runs.items()}
    pages = {}
    for name, sid in sessions.items():
        html = tmp / f"view-{sid}.html"
        pages[f"page {name}"] = html
        pages[f"bare {name}"] = _bare_page(html, tmp / f"bare-{sid}.html")
    browser = _browser_runs(pages, args.reps_view)
    rows: list[tuple[Any, ...]] = []
    factor, extra = BUDGET["view_size"]
    for name in sessions:
        w, b = s[f"view {name}"], s[f"baseline: show --transcript {name}"]
        ok = all(r["exit"] == 0 for r in runs[f"view {name}"])
        rows.append(
            (
                f"view: write {name} {args.view_frames:,} frames (s)",
                w,
                b,
                w / b,
                "< 5 s",
                "" if ok else "EXIT != 0",
                ok and w < BUDGET["view_write_s"],
            )
        )
        wc, bc = cpu[f"view {name}"], cpu[f"baseline: show --transcript {name}"]
        rows.append(("  the same in CPU seconds (user + sys)", wc, bc, wc / bc, "", "", None))
        size = (tmp / f"view-{sessions[name]}.html").stat().st_size
        limit = factor * raw[name] + extra
        rows.append(
            (
                "  page size MB (baseline: raw bytes)",
                size / MB,
                raw[name] / MB,
                size / raw[name],
                f"<= {factor}x + 0.3",
                "",
                size <= limit,
            )
        )
        if "skipped" in browser:
            rows.append(("  first screen in Chromium", f"skipped: {browser['skipped']}", "", None, "", "", None))
            continue
        first = median([r["first_ms"] for r in browser[f"page {name}"]]) / 1000
        bare = median([r["first_ms"] for r in browser[f"bare {name}"]]) / 1000
        rows.append(
            (
                "  first screen in Chromium (s) (baseline: bare data page)",
                first,
                bare,
                first / bare,
                "< 2 s",
                "",
                first < BUDGET["view_render_s"],
            )
        )
        scroll = median([r["scroll_p95_ms"] for r in browser[f"page {name}"]])
        rows.append(
            (
                "  scroll step p95 (ms) (baseline: 2 frames)",
                scroll,
                33.3,
                scroll / 33.3,
                "< 50 ms",
                "",
                scroll < BUDGET["view_scroll_ms"],
            )
        )
        p50 = median([r["scroll_p50_ms"] for r in browser[f"page {name}"]])
        rows.append(("  scroll step p50 (ms) (baseline: 2 frames)", p50, 33.3, p50 / 33.3, "", "", None))
    return {"runs": runs, "summary": s, "raw_bytes": raw, "browser": browser, "db": str(db), "rows": rows}


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


class _NullCollector:
    """An OTLP/HTTP endpoint on loopback that reads each request and answers 200 (the otel case)."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def case_otel(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    db, why = _sessions_db(args, "otel", "export")
    if why or db is None:
        log(f"  otel: SKIPPED ({why})")
        return {"skipped": why, "rows": [("otel export of 100k frames", f"skipped: {why}", "", None, "", "", None)]}
    collector = _NullCollector()
    sessions = {"mixed": "long", "chunk flood": "flood"}
    runs_cmd = {}
    for name, prefix in sessions.items():
        runs_cmd[f"file {name}"] = [
            *relay_cmd(),
            "otel",
            "export",
            "--db",
            str(db),
            prefix,
            "--file",
            str(tmp / "t.jsonl"),
        ]
        runs_cmd[f"http {name}"] = [
            *relay_cmd(),
            "otel",
            "export",
            "--db",
            str(db),
            prefix,
            "--endpoint",
            collector.url,
        ]
        runs_cmd[f"baseline {name}"] = [*relay_cmd(), "show", "--db", str(db), prefix, "--transcript"]

    try:
        runs = alternate(args.reps_view, list(runs_cmd), lambda kind, rep: timed_run(runs_cmd[kind], kind, rep))
    finally:
        collector.close()
    rows: list[tuple[Any, ...]] = []
    factor = BUDGET["otel_factor"]
    for name in sessions:
        base = runs[f"baseline {name}"]
        for how in ("file", "http"):
            mine = runs[f"{how} {name}"]
            ok = all(r["exit"] == 0 for r in mine)
            w, b = median([r["s"] for r in mine]), median([r["s"] for r in base])
            label = "OTLP JSON file" if how == "file" else "OTLP/HTTP"
            spans = mine[-1]["out"].split("(")[-1].split(")")[0] if ok else "?"
            rows.append(
                (
                    f"otel export {name} 100k frames, {label}, {spans} (s)",
                    w,
                    b,
                    w / b,
                    f"<= {factor:g}x",
                    "" if ok else "EXIT != 0",
                    ok and w <= factor * b,
                )
            )
            wc, bc = median([r["cpu_s"] for r in mine]), median([r["cpu_s"] for r in base])
            rows.append(("  the same in CPU seconds (user + sys)", wc, bc, wc / bc, "", "", None))
    return {"runs": runs, "rows": rows}


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


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller floods, fewer repetitions: under a minute")
    ap.add_argument("--case", default=",".join(CASES), help=f"comma-separated: {', '.join(CASES)} (or 1-12)")
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
    return a


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="acp-relay-bench-"))
    fns = {
        "rtt": case_rtt,
        "flood": case_flood,
        "start": case_start,
        "show": case_show,
        "bigline": case_bigline,
        "search": case_search,
        "check": case_check,
        "diff": case_diff,
        "view": case_view,
        "otel": case_otel,
        "lock": case_lock,
        "hostile": case_hostile,
    }
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
