"""The ws case: remote ACP over WebSocket (tools/bench_ws_peer.py): round trips and a flood, the relay
(`acp-relay run --connect ws://`) against a client on the socket itself, and the stdio relay's flood in
the same run as the recorder's reference."""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

from .common import BUDGET, PY, REQ, TOOLS, Chain, _io, log, median, pct, relay_cmd, rm_db
from .flood import flood_once


def _ws_peer(*args: str) -> tuple[subprocess.Popen[bytes], str]:
    p = subprocess.Popen([PY, str(TOOLS / "bench_ws_peer.py"), *args], stdout=subprocess.PIPE)
    port = _io(p.stdout).readline().decode().strip()
    return p, f"ws://127.0.0.1:{port}/acp"


class WsDirect:
    """The baseline: a client on the WebSocket itself (one text frame per request, its answer awaited)."""

    def __init__(self, url: str) -> None:
        from websockets.sync.client import connect

        self.ws = connect(url, max_size=None, compression=None)

    def call(self, line: bytes) -> bytes:
        self.ws.send(line[:-1].decode())
        return str(self.ws.recv()).encode()

    def close(self) -> list[int]:
        self.ws.close()
        return [0]


class WsRelay(Chain):
    """An editor on stdio, `acp-relay run --connect URL` between it and the WebSocket."""

    def __init__(self, url: str, db: Path) -> None:
        P = subprocess.PIPE
        p = subprocess.Popen([*relay_cmd(), "run", "--db", str(db), "--connect", url], stdin=P, stdout=P, bufsize=0)
        self.procs, self.w, self.r = [p], _io(p.stdin), _io(p.stdout)
        self.wfd, self.rfd = self.w.fileno(), self.r.fileno()
        self.buf = b""


def case_ws(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    n, block = (1000 if args.quick else 3000), 250
    runs: dict[str, list[dict]] = {"direct": [], "relay": [], "flood direct": [], "flood relay": []}
    clock = time.perf_counter_ns
    for rep in range(args.reps_rtt):
        peer, url = _ws_peer("echo")
        try:
            db = tmp / f"ws-rtt-{rep}.db"
            chains: dict[str, Any] = {"direct": WsDirect(url), "relay": WsRelay(url, db)}
            times: dict[str, list[float]] = {v: [] for v in chains}
            sent = 0
            for v in chains:
                for _ in range(100):  # warm-up, not measured
                    sent += 1
                    chains[v].call(REQ % sent)
            for b, _lo in enumerate(range(0, n, block)):
                for v in list(chains)[b % 2 :] + list(chains)[: b % 2]:
                    for _ in range(block):
                        sent += 1
                        t = clock()
                        chains[v].call(REQ % sent)
                        times[v].append((clock() - t) / 1000.0)
            for v, c in chains.items():
                c.close()
                runs[v].append({"p50_us": pct(times[v], 50), "p99_us": pct(times[v], 99)})
                log(
                    f"  ws rtt {v:7s} rep {rep}: p50 {runs[v][-1]['p50_us']:7.1f} us  p99 {runs[v][-1]['p99_us']:7.1f} us"
                )
            rm_db(db)
        finally:
            peer.kill()
            peer.wait()
    count = 20_000 if args.quick else 100_000
    for rep in range(args.reps_flood):
        for kind in ("flood direct", "flood relay") if rep % 2 == 0 else ("flood relay", "flood direct"):
            peer, url = _ws_peer("flood", str(count), "200")
            try:
                db = tmp / f"ws-flood-{rep}.db"
                t0 = time.perf_counter()
                first: float | None = None
                got = 0
                if kind == "flood direct":
                    from websockets.exceptions import ConnectionClosed
                    from websockets.sync.client import connect

                    with connect(url, max_size=None, compression=None) as ws:
                        ws.send("go")
                        try:
                            while True:
                                ws.recv()
                                first = first or time.perf_counter()
                                got += 1
                        except ConnectionClosed:
                            pass
                    recorded = got
                else:
                    P = subprocess.PIPE
                    p = subprocess.Popen([*relay_cmd(), "run", "--db", str(db), "--connect", url], stdin=P, stdout=P)
                    os.write(_io(p.stdin).fileno(), b'{"jsonrpc":"2.0","method":"go"}\n')
                    while chunk := os.read(_io(p.stdout).fileno(), 1 << 16):
                        first = first or time.perf_counter()
                        got += chunk.count(b"\n")
                    p.wait(120)
                    conn = sqlite3.connect(db)
                    recorded = conn.execute("SELECT count(*) FROM frames WHERE direction = 'a2c'").fetchone()[0]
                    conn.close()
                # As the stdio flood case counts: from the first byte at the client to the end (for the
                # relay, its exit: the last commit included), so start-up is not in the rate.
                secs = time.perf_counter() - (first or t0)
                runs[kind].append({"fps": count / secs, "got": got, "recorded": recorded})
                log(f"  ws {kind:12s} rep {rep}: {count / secs:9,.0f} frames/s  got {got}  recorded {recorded}")
                rm_db(db)
            finally:
                peer.kill()
                peer.wait()
    summary = {
        v: {k: median([r[k] for r in runs[v]]) for k in runs[v][0] if k not in ("got", "recorded")} for v in runs
    }
    d, r = summary["direct"], summary["relay"]
    rows: list[tuple[Any, ...]] = []
    for q in ("p50_us", "p99_us"):
        added = r[q] - d[q]
        budget = BUDGET["ws_rtt_p50_us"] if q == "p50_us" else None
        rows.append(
            (
                f"ws round trip {q[:3]} (us)",
                r[q],
                d[q],
                r[q] / d[q],
                f"+{budget:.0f} us" if budget else "",
                f"+{added:.0f} us",
                added <= budget if budget else None,
            )
        )
    fr, fd = summary["flood relay"]["fps"], summary["flood direct"]["fps"]
    rows.append(
        (
            "ws flood 200 B (frames/s)",
            fr,
            fd,
            fr / fd,
            f">= {BUDGET['ws_flood_fps']:,}",
            "",
            fr >= BUDGET["ws_flood_fps"],
        )
    )
    # The same flood from a stdio agent through `acp-relay run` in the same run: what the recorder alone
    # allows on this machine now, so the WebSocket path's own cost reads apart from it.
    stdio = median([flood_once("relay", 200, count, tmp, f"ws-ref-{i}")["fps"] for i in range(args.reps_flood)])
    summary["flood stdio relay"] = {"fps": stdio}
    rows.append(("  stdio relay flood 200 B, same run (frames/s)", stdio, fd, stdio / fd, "", "", None))
    whole = all(x["got"] == count and x["recorded"] == count for x in runs["flood relay"])
    rows.append(("ws flood: every frame forwarded and recorded", "yes" if whole else "NO", "", None, "all", "", whole))
    return {"runs": runs, "summary": summary, "rows": rows}
