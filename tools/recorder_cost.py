"""Per-frame cost of each recording stage, in-process (no pipes, no other processes competing).

    .venv/bin/python tools/recorder_cost.py [--size 200] [--frames 100000]

Stages: framing + classification + correlation (Tracker.feed), the redaction pre-check, building the
insert parameters (frame_rows), and SQLite's insert into the real schema (executemany, 5,000 rows per
transaction). Use it to see where a flood's time goes; tools/bench.py measures the whole relay.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from acp_relay.protocol.redact import Policy
from acp_relay.protocol.tracker import A2C, Tracker
from acp_relay.store import db
from acp_relay.store.writer import INSERT_FRAME, frame_rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=200, help="bytes per frame (at least 170)")
    ap.add_argument("--frames", type=int, default=100_000)
    args = ap.parse_args()
    shape = (
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":'
        '"agent_message_chunk","messageId":"m1","content":{"type":"text","text":"%s"}}}}\n'
    )
    line = (shape % ("x" * max(0, args.size - len(shape % "") + 1))).encode()
    data = line * args.frames
    chunks = [data[i : i + 65536] for i in range(0, len(data), 65536)]
    n = args.frames

    tracker, policy, frames = Tracker(), Policy(), []
    t0 = time.perf_counter()
    for chunk in chunks:
        frames += tracker.feed(A2C, chunk, 1.0, 1.0)
    t1 = time.perf_counter()
    for f in frames:
        policy.might_apply(f.raw, tuple(m.method for m in f.index.messages))
    t2 = time.perf_counter()
    rows, _ = frame_rows(1, frames)
    t3 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        conn = db.connect(Path(tmp) / "cost.db")
        conn.execute("INSERT INTO connections (id, started_at, argv) VALUES (1, 0, '[]')")
        t4 = time.perf_counter()
        for i in range(0, len(rows), 5000):
            conn.execute("BEGIN")
            conn.executemany(INSERT_FRAME, rows[i : i + 5000])
            conn.execute("COMMIT")
        t5 = time.perf_counter()
        conn.close()

    def us(a: float, b: float) -> float:
        return (b - a) / n * 1e6

    total = us(t0, t3) + us(t4, t5)
    print(
        f"{len(line) - 1} B frames x {n}: track {us(t0, t1):.1f} us  redaction check {us(t1, t2):.1f} us  "
        f"rows {us(t2, t3):.1f} us  SQLite insert {us(t4, t5):.1f} us  = {total:.1f} us/frame "
        f"({1e6 / total:,.0f} frames/s on one core)"
    )


if __name__ == "__main__":
    main()
