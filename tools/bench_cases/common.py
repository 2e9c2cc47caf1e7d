"""What the benchmark's cases share (tools/bench.py runs them): paths, budgets, process and timing helpers,
the cached generated databases."""

from __future__ import annotations

import argparse
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent.parent


TOOLS = ROOT / "tools"


PEERS = TOOLS / "bench_peers.py"


GEN_DB = TOOLS / "gen_db.py"


PY = sys.executable


MB = 1e6


KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


CASES = [
    "rtt",
    "flood",
    "start",
    "show",
    "bigline",
    "search",
    "check",
    "diff",
    "view",
    "otel",
    "lock",
    "ws",
    "hostile",
    "freeze",
    "recorder",
]


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
    "ws_rtt_p50_us": 100.0,  # run --connect ws:// against a client on the socket: at most this much more
    "ws_flood_fps": 50_000,  # 200 B notifications over WebSocket, recorded
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
