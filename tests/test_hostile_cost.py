"""Issue 19, bounded cost: what reading or exporting a session costs follows its largest frame, not the sum of its
frames.

A session recorded through the relay can hold several huge hostile frames (an agent's reply after the
editor's last line, or `run -- cat` echoing each line back). Every read command must hold one of them at a
time: not the previous row while the cursor reads the next, not every agent frame waiting in check's
reordering queue, not SQLite's copy of a big value beside Python's. These tests compare a session of one
big frame with the same session holding four, by traced Python memory (in process) and by the peak RSS of
a command (a child process), so they fail on code that holds more than one."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from helpers import py_agent, relay_cmd

from acp_relay.protocol.check.order import HOLD_BYTES
from acp_relay.view.data import VIEW_FRAME_MAX

BIG = 16 << 20  # bytes of each big frame
SID = "cost-1"

# Answers the editor's requests; after the prompt, N big frames of hostile bytes in a row (the editor sends
# nothing more, so check's reordering would wait on every one of them): chunks, then non-JSON lines.
AGENT = r"""
import json, sys
n, big = int(sys.argv[1]), int(sys.argv[2])
def out(b):
    sys.stdout.buffer.write(b + b"\n")
    sys.stdout.buffer.flush()
for line in sys.stdin.buffer:
    msg = json.loads(line)
    if msg["method"] == "session/new":
        out(b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"cost-1"}}')
        continue
    for i in range(n):  # what the big frames carry is junk no view keeps: each frame's cost is transient
        junk = "\x1b]52;c;\x9b\u202e" * (big // 22)  # about `big` bytes once JSON-escaped
        chunk = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "cost-1", "update": {
            "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"}}, "_pad": junk}}
        out(json.dumps(chunk, ensure_ascii=False).encode())
    for i in range(n):
        out(b"\x1b[31m\x00\x9b\xff" * (big // 5))
    out(b'{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}')
    break
"""
EDITOR = b"".join(
    orjson.dumps(m) + b"\n"
    for m in (
        {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/p", "mcpServers": []}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": SID, "prompt": []}},
    )
)


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """The same session, recorded through `run`, with 1 and with 4 big frames of each kind."""
    out = {}
    for n in (1, 4):
        db = tmp_path_factory.mktemp("cost") / "relay.db"
        done = subprocess.run(
            relay_cmd(db, *py_agent(AGENT), str(n), str(BIG)), input=EDITOR, capture_output=True, timeout=120
        )
        assert done.returncode == 0 and done.stderr == b"", done.stderr
        conn = sqlite3.connect(db)
        big = conn.execute("SELECT count(*) FROM frames WHERE length > ?", (BIG // 2,)).fetchone()[0]
        conn.close()
        assert big == 2 * n  # every big frame was recorded whole
        out[n] = db
    return out


# A read, run in a child process of its own: its snippet sees `conn` and SID. The child reports its own peak
# RSS (VmHWM, of the memory map exec gave it): ru_maxrss would start from the forking test process's size.
CHILD = r"""
import io, sqlite3, sys
from acp_relay.check.command import check_view
from acp_relay.render.transcript import transcript_lines
from acp_relay.show.command import ShowOptions, compute, render
from acp_relay.store.queries import resolve_view
from acp_relay.view.data import page_data
SID = "cost-1"
try:
    if sys.argv[1] == "-m":
        import runpy
        sys.argv = ["acp-relay", *sys.argv[2:]]
        runpy.run_module("acp_relay", run_name="__main__")
    else:
        conn = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
        exec(sys.argv[2])
finally:
    hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0].split()[1]
    sys.stderr.write(f"\nVmHWM {hwm}\n")
"""
# What a read may keep of each extra frame by design, beyond one frame's transient cost: check's reordering
# holds at most HOLD_BYTES of waiting frames; a page embeds up to VIEW_FRAME_MAX bytes of each frame (as text
# and, for bytes that are not UTF-8, base64: a few times VIEW_FRAME_MAX in memory).
CHECKED = HOLD_BYTES
PAGE = HOLD_BYTES + 6 * 4 * VIEW_FRAME_MAX
READS = {
    "show SESSION": ("render(compute(conn, ShowOptions(session=SID)), io.BytesIO())", 0),
    "show -c": ("render(compute(conn, ShowOptions(connection='1')), io.BytesIO())", 0),
    "show --frame": ("render(compute(conn, ShowOptions(frame=BIG_FRAME)), io.BytesIO())", CHECKED),
    "show --transcript": ("transcript_lines(conn, resolve_view(conn, SID))", 0),
    "show --transcript -c": ("transcript_lines(conn, resolve_view(conn, None, '1'))", 0),
    "check SESSION": ("check_view(conn, resolve_view(conn, SID))", CHECKED),
    "check -c": ("check_view(conn, resolve_view(conn, None, '1'))", CHECKED),
    "view SESSION": ("page_data(conn, resolve_view(conn, SID), check=True)", PAGE),
    "view -c": ("page_data(conn, resolve_view(conn, None, '1'), check=True)", PAGE),
}


@pytest.mark.parametrize("name", list(READS))
def test_four_big_frames_cost_what_one_costs(sessions: dict[int, Path], name: str) -> None:
    code, kept = READS[name]
    one, four = (_peak_rss(str(sessions[n]), code.replace("BIG_FRAME", "4")) for n in (1, 4))
    assert four < one + BIG // 2 + kept, f"{name}: {one / 1e6:.1f} MB with one big frame, {four / 1e6:.1f} MB with four"


def _peak_rss(*args: str) -> int:
    """The peak RSS of a read in CHILD (a snippet, or `-m` and acp-relay's arguments), in bytes."""
    # A fixed mmap threshold: glibc otherwise raises it to the size of a freed big block, so that the next
    # big blocks come from a heap it may not give back: RSS then measures the allocator, not what is held.
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(1 << 20)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
    )
    assert done.returncode in (0, 1) and b"Traceback" not in done.stderr, done.stderr[-2000:]
    return int(done.stderr.split()[-1]) * 1024


def test_a_big_frame_is_read_once(sessions: dict[int, Path]) -> None:
    """`show --frame N --raw` of a big frame costs one copy of it: SQLite's copy of the value is not held
    beside Python's (the big value is read with incremental blob I/O)."""
    db = sessions[1]
    conn = sqlite3.connect(db)
    (big,) = conn.execute("SELECT id FROM frames WHERE length > ? ORDER BY id LIMIT 1", (BIG // 2,)).fetchone()
    (small,) = conn.execute("SELECT id FROM frames WHERE length < 1000 ORDER BY id LIMIT 1").fetchone()
    conn.close()
    cli = ("-m", "show", "--db", str(db), "--raw", "--frame")
    cost = _peak_rss(*cli, str(big)) - _peak_rss(*cli, str(small))
    assert cost < 1.5 * BIG, f"{cost / 1e6:.1f} MB for a frame of {BIG / 1e6:.1f} MB"


@pytest.mark.parametrize("fmt", ["ndjson", "acp-devtools", "sqlite"])
def test_four_big_frames_cost_what_one_costs_to_export(sessions: dict[int, Path], fmt: str, tmp_path: Path) -> None:
    """`export` writes a frame at a time (a big frame's values a piece at a time) into its file: it never
    holds the whole export, nor a chunk of big rows (sqlite)."""

    def cost(n: int) -> int:
        out = tmp_path / f"{n}.{fmt}"
        size = _peak_rss("-m", "export", "--db", str(sessions[n]), SID, "--format", fmt, "-o", str(out))
        assert out.stat().st_size > 2 * n * BIG  # every big frame was written
        return size

    one, four = cost(1), cost(4)
    assert four < one + BIG // 2, f"export {fmt}: {one / 1e6:.1f} MB with one big frame, {four / 1e6:.1f} MB with four"
