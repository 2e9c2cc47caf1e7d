"""A frozen filesystem (fsfreeze) under the database does not stall the wire, and what cannot be kept is
counted exactly (issue 18). The recorder and the spill journal are both on the frozen filesystem, so past
the relay's RAM queue frames are dropped; the relay must notice the frozen journal write at once instead
of waiting for it. Needs root and a free loop device (the database goes on a private loop-mounted ext4);
skipped otherwise. Bounded: the freezing process thaws by itself, and every path out thaws again.

tools/bench.py `--case freeze` measures the stalls; this checks, by events and not by clocks, that the wire
does not wait for the frozen disk and that the counts are exact."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, relay_cmd, rows, try_rows, wait_for
from test_spill import Editor, count_line, recorder_pid, stored_numbers

sys.path.insert(0, str(ROOT / "tools"))
from bench_cases.freeze import freezer, loop_filesystem, thaw, why_not

# argv: first count, text size, go-file, stop-file. STREAMER's numbered frames: the first part at once after
# go; then, once the stop-file's `.thawed` sibling exists, one small frame every 10 ms until the stop-file.
OPEN_ENDED = r"""
import os, sys, time
first, size, go, stop = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
out = sys.stdout.buffer
def frame(i, size):
    out.write(b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":'
              b'"agent_message_chunk","content":{"type":"text","text":"%d:%s"}}}}\n' % (i, b"x" * size))
    out.flush()
while not os.path.exists(go):
    time.sleep(0.01)
for i in range(1, first + 1):
    frame(i, size)
while not os.path.exists(stop + ".thawed"):
    time.sleep(0.01)
i = first
while not os.path.exists(stop):
    i += 1
    frame(i, 100)
    time.sleep(0.01)
"""


def stored_after(db: Path, first: int) -> bool:
    got = try_rows(db, "SELECT raw FROM frames WHERE direction = 'a2c' ORDER BY seq DESC LIMIT 1")
    return bool(got) and int(json.loads(got[0][0])["params"]["update"]["content"]["text"].split(":", 1)[0]) > first


@pytest.mark.slow
def test_a_frozen_filesystem_does_not_stall_the_wire_and_counts_what_it_drops(tmp_path: Path) -> None:
    """Frozen until the editor has all of 20 MiB (more than the RAM queue, 16 MiB, and the recorder's own
    queue hold, so frames are dropped while frozen): the wire did not wait for the frozen disk. Thawed, the
    agent streams on until a frame of its is stored again. No clock decides (before: a 4 s freeze and a
    largest-gap budget against a run without it)."""
    why = why_not()
    if why:
        pytest.skip(f"cannot freeze a filesystem here: {why}")
    with contextlib.ExitStack() as stack:
        try:
            mnt = stack.enter_context(loop_filesystem(tmp_path / "fs", size_mb=128))
        except OSError as exc:
            pytest.skip(f"cannot mount a loop filesystem here: {exc}")
        first, size = 320, 64 << 10
        db, go, stop = mnt / "frozen.db", tmp_path / "go", tmp_path / "stop"
        editor = Editor(relay_cmd(db, sys.executable, "-c", OPEN_ENDED, str(first), str(size), str(go), str(stop)))
        recorder_pid(db)
        holder = subprocess.Popen(freezer(db, 600), stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
            go.touch()
            wait_for(lambda: editor.data.count(b"\n") >= first, "the first part at the editor while frozen")
            assert holder.poll() is None, "still frozen"
        finally:
            thaw(db.parent)
            holder.kill()
            holder.wait(60)
        Path(f"{stop}.thawed").touch()
        wait_for(lambda: stored_after(db, first), "a frame sent after the thaw stored")
        stop.touch()
        assert editor.finish(120) == 0
        total = editor.data.count(b"\n")
        ((cid, frames, unrecorded, status),) = rows(db, "SELECT id, frames, frames_unrecorded, status FROM connections")
        assert status == "ended" and frames + unrecorded == total
        numbers = stored_numbers(db, cid)
        assert len(numbers) == frames and all(seq == number for seq, number in numbers)
        assert numbers[-1][0] == total, "frames after the thaw are stored again"
        assert (count_line(editor.err) if unrecorded else 0) == unrecorded
        assert b"Traceback" not in editor.err
