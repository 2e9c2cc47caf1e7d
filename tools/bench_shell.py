"""`acp-relay run` of this tree side by side with a baseline tree (`git worktree add /tmp/base REF`), alternating,
in the same minute: `run -- true` wall and CPU, peak RSS (VmHWM), round trip p50/p99, spawn to the first answer.
usage: .venv/bin/python tools/bench_shell.py NEW_TREE BASE_TREE [REPS [CASES]]
CASES: comma separated among start,rtt (default both): `start` is run -- true, RSS and the first answer."""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PY = sys.executable
NEW, BASE = sys.argv[1], sys.argv[2]
REPS = int(sys.argv[3]) if len(sys.argv) > 3 else 15
CASES = set(sys.argv[4].split(",")) if len(sys.argv) > 4 else {"start", "rtt"}
PEERS = str(Path(NEW) / "tools" / "bench_peers.py")
ECHO = [PY, PEERS, "echo"]
INIT = (
    b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,'
    b'"clientCapabilities":{},"clientInfo":{"name":"bench","version":"0"}}}\n'
)
PROBE = """
import sys
stats = sys.argv.pop(1)
sys.argv = ["acp-relay", *sys.argv[1:]]
from acp_relay.__main__ import main
try:
    main()
finally:
    hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
    open(stats, "w").write(hwm)
"""
tmp = Path(tempfile.mkdtemp())


def _close(p):
    assert p.stdin is not None
    p.stdin.close()


def env(tree):
    return {**os.environ, "PYTHONPATH": tree}


def relay(tree, db, *agent, probe=None):
    pre = [PY, "-c", PROBE, probe] if probe else [PY, "-m", "acp_relay"]
    return pre + ["run", "--db", str(db), "--", *agent]


def true_wall(tree, db):
    t = time.perf_counter()
    subprocess.run(relay(tree, db, "true"), env=env(tree), cwd=tree, check=True)
    return time.perf_counter() - t


def rss(tree, db):
    st = tmp / "hwm"
    p = subprocess.Popen(
        relay(tree, db, *ECHO, probe=str(st)),
        env=env(tree),
        cwd=tree,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        bufsize=0,
    )
    rtt_calls(p, 300)
    _close(p)
    p.wait()
    return int(st.read_text()) / 1024


def rtt_calls(p, n, out=None):
    buf = b""
    fdw, fdr = p.stdin.fileno(), p.stdout.fileno()
    for i in range(n):
        line = INIT if i == 0 else b'{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{}}\n' % i
        t = time.perf_counter()
        os.write(fdw, line)
        while b"\n" not in buf:
            buf += os.read(fdr, 65536)
        _, buf = buf.split(b"\n", 1)
        if out is not None:
            out.append(time.perf_counter() - t)


def rtt(tree, db, n=3000, settle=1.0):
    """Round trips one at a time: with `settle`, once the recorder and trio have started (steady state);
    without, from the first answer on (while both start)."""
    p = subprocess.Popen(
        relay(tree, db, *ECHO), env=env(tree), cwd=tree, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
    )
    lat: list[float] = []
    rtt_calls(p, 1)
    time.sleep(settle)
    rtt_calls(p, n, lat)
    _close(p)
    p.wait()
    lat.sort()
    return lat[len(lat) // 2] * 1e6, lat[int(len(lat) * 0.99)] * 1e6


def first(tree, db):
    t = time.perf_counter()
    p = subprocess.Popen(
        relay(tree, db, *ECHO), env=env(tree), cwd=tree, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
    )
    rtt_calls(p, 1)
    ms = (time.perf_counter() - t) * 1000
    _close(p)
    p.wait()
    return ms


def cpu_true(tree, db):
    r0 = os.times()
    subprocess.run(relay(tree, db, "true"), env=env(tree), cwd=tree, check=True)
    r1 = os.times()
    return r1.children_user - r0.children_user + r1.children_system - r0.children_system


res: dict[str, dict[str, list[float]]] = {
    k: {"new": [], "base": []}
    for k in ("true_s", "cpu_s", "rss_mb", "p50_us", "p99_us", "early_p50_us", "early_p99_us", "first_ms")
}
trees = {"new": NEW, "base": BASE}
for name, tree in trees.items():  # databases exist before timing
    subprocess.run(relay(tree, tmp / f"{name}.db", "true"), env=env(tree), cwd=tree)
for rep in range(REPS):
    order = list(trees.items()) if rep % 2 == 0 else list(reversed(trees.items()))
    for name, tree in order:
        db = tmp / f"{name}.db"
        if "start" in CASES:
            res["true_s"][name].append(true_wall(tree, db))
            res["cpu_s"][name].append(cpu_true(tree, db))
            res["first_ms"][name].append(first(tree, db))
            res["rss_mb"][name].append(rss(tree, db))
        if "rtt" in CASES and (rep < max(3, REPS // 3) or {"rtt"} == CASES):
            p50, p99 = rtt(tree, db)
            res["p50_us"][name].append(p50)
            res["p99_us"][name].append(p99)
            p50, p99 = rtt(tree, db, settle=0.0)
            res["early_p50_us"][name].append(p50)
            res["early_p99_us"][name].append(p99)
for k, v in res.items():
    if not v["new"]:
        continue
    n, b = statistics.median(v["new"]), statistics.median(v["base"])
    print(f"{k:9s} new {n:9.3f}  base {b:9.3f}  ratio {n / b:5.2f}  (n={len(v['new'])})")
(tmp / "res.json").write_text(json.dumps(res))
print("raw:", tmp / "res.json")
