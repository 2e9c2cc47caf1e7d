"""CPU per frame of each recording stage, in-process, measured with process_time (machine load barely moves it).

    .venv/bin/python tools/recorder_cost.py [--size 200] [--frames 100000] [--message-id] [--reference]

The frames are the benchmark's flood (tools/bench_peers.py), cut into the 64 KiB chunks the relay reads.
Stages, as the recorder child runs them but on one thread:
  indexing  Recorder._process: framing, classification and correlation (Tracker.feed_rows), the redaction
            pre-check, the insert parameters;
  writing   Recorder._insert: the SQLite transactions (1 MiB of frames each) into the real schema.
The child's garbage collector settings (record/child.py) are applied. --message-id gives every frame a
messageId (v2 agents' chunks have one: their rows carry details JSON). --reference also times the
classifier's path (Tracker.feed, redaction pre-check, frame_rows, one INSERT per row) on the same frames.
Wall-clock throughput is tools/bench.py's job; this says where the CPU goes.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import bench_peers  # noqa: E402

from acp_relay import diagnostics  # noqa: E402
from acp_relay.protocol.redact import Policy  # noqa: E402
from acp_relay.protocol.tracker import A2C, Tracker  # noqa: E402
from acp_relay.record.child import GC_THRESHOLD  # noqa: E402
from acp_relay.record.recorder import Recorder  # noqa: E402
from acp_relay.store import db  # noqa: E402
from acp_relay.store.writer import INSERT_FRAME, Batch, frame_rows  # noqa: E402


def flood(size: int, count: int, message_id: bool) -> list[bytes]:
    tag = b'"messageId":"m1",' if message_id else b""
    kind = b'"sessionUpdate":"agent_message_chunk",'
    block = bench_peers.make_block(size - len(tag)).replace(kind, kind + tag)  # frames of `size` bytes still
    data = (block * (size * count // len(block) + 1))[: size * count]
    return [data[i : i + 65536] for i in range(0, len(data), 65536)]


def recorder_stages(chunks: list[bytes], tmp: Path) -> tuple[float, float]:
    rec = Recorder(tmp / "cost.db", argv=["cost"], cwd="/", label=None)
    rec._open()
    batches: list[Batch] = []
    rec._submit = batches.append  # type: ignore[method-assign,assignment]
    index = write = 0.0
    clock = time.process_time
    for i in range(0, len(chunks), 16):  # the writer takes what is queued; 16 chunks is one sub-batch
        t0 = clock()
        rec._process([(A2C, c, 1e9 + j, j * 1e-5) for j, c in enumerate(chunks[i : i + 16], i)])
        t1 = clock()
        for b in batches:
            rec._insert(b)
        batches.clear()
        index, write = index + t1 - t0, write + clock() - t1
    assert rec.conn is not None
    rec.conn.close()
    return index, write


def reference_stages(chunks: list[bytes], tmp: Path) -> tuple[float, float, float, float]:
    tracker, policy, frames = Tracker(), Policy(), []
    clock = time.process_time
    t0 = clock()
    for j, chunk in enumerate(chunks):
        frames += tracker.feed(A2C, chunk, 1e9 + j, j * 1e-5)
    t1 = clock()
    for f in frames:
        policy.might_apply(f.raw, tuple(m.method for m in f.index.messages))
    t2 = clock()
    rows, _ = frame_rows(1, frames)
    t3 = clock()
    conn = db.connect(tmp / "reference.db")
    conn.execute("INSERT INTO connections (id, started_at, argv) VALUES (1, 0, '[]')")
    t4 = clock()
    for i in range(0, len(rows), 5000):
        conn.execute("BEGIN")
        conn.executemany(INSERT_FRAME, rows[i : i + 5000])
        conn.execute("COMMIT")
    t5 = clock()
    conn.close()
    return t1 - t0, t2 - t1, t3 - t2, t5 - t4


def main() -> None:
    diagnostics.install()  # the recorder's warnings, on stderr
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--size", type=int, default=200, help=f"bytes per frame, newline included (>= {bench_peers.MIN_SIZE})"
    )
    ap.add_argument("--frames", type=int, default=100_000)
    ap.add_argument("--message-id", action="store_true", help="every frame carries a messageId")
    ap.add_argument("--reference", action="store_true", help="also time the classifier's path")
    args = ap.parse_args()
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD, 50, 1000)
    chunks = flood(args.size, args.frames, args.message_id)
    n = args.frames

    def us(seconds: float) -> str:
        return f"{seconds / n * 1e6:.2f} us"

    with tempfile.TemporaryDirectory() as tmp:
        index, write = recorder_stages(chunks, Path(tmp))
        total = index + write
        print(
            f"{args.size} B frames x {n}: indexing {us(index)}  writing {us(write)}  = {us(total)}/frame CPU "
            f"({n / total:,.0f} frames/s on one core)"
        )
        if args.reference:
            track, check, rows, insert = reference_stages(chunks, Path(tmp))
            ref = track + check + rows + insert
            print(
                f"  reference path: track {us(track)}  redaction check {us(check)}  rows {us(rows)}  "
                f"SQLite insert {us(insert)}  = {us(ref)}/frame CPU"
            )


if __name__ == "__main__":
    main()
