"""A frozen filesystem (fsfreeze) under the database does not stall the wire, and what cannot be kept is
counted exactly (issue 18). The recorder and the spill journal are both on the frozen filesystem, so past
the relay's RAM queue frames are dropped; the relay must notice the frozen journal write at once instead
of waiting for it. Needs root and a free loop device (the database goes on a private loop-mounted ext4);
skipped otherwise. Bounded: the freezing process thaws by itself, and every path out thaws again.

tools/bench.py `--case freeze` holds the strict budgets; this checks that nothing stalls for long and that
the counts are exact."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, relay_cmd, rows
from test_spill import Editor, count_line, recorder_pid, stored_numbers, streamer

sys.path.insert(0, str(ROOT / "tools"))
from bench_cases.freeze import freezer, loop_filesystem, thaw, why_not


def frozen_run(tmp: Path, db: Path, freeze_for: float | None, n: int, size: int, pause: float) -> Editor:
    (tmp / "go").unlink(missing_ok=True)
    editor = Editor(relay_cmd(db, *streamer(tmp, n, size, pause)))
    recorder_pid(db)
    holder = None
    try:
        if freeze_for is not None:
            holder = subprocess.Popen(freezer(db, freeze_for), stdout=subprocess.PIPE, text=True)
            assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        (tmp / "go").touch()
        assert editor.finish(120) == 0
    finally:
        if holder is not None:
            holder.wait(60)
        thaw(db.parent)
    return editor


@pytest.mark.slow
def test_a_frozen_filesystem_does_not_stall_the_wire_and_counts_what_it_drops(tmp_path: Path) -> None:
    why = why_not()
    if why:
        pytest.skip(f"cannot freeze a filesystem here: {why}")
    with contextlib.ExitStack() as stack:
        try:
            mnt = stack.enter_context(loop_filesystem(tmp_path / "fs", size_mb=128))
        except OSError as exc:
            pytest.skip(f"cannot mount a loop filesystem here: {exc}")
        # 8 MiB/s for 5 s, frozen for 4 s of it: more than the RAM queue (16 MiB) and the recorder's own
        # queue hold, so frames are dropped while frozen; before and after, everything is stored.
        n, size, pause = 320, 64 << 10, 1 / 128
        free = frozen_run(tmp_path, mnt / "free.db", None, n, size, pause)
        db = mnt / "frozen.db"
        held = frozen_run(tmp_path, db, 4.0, n, size, pause)
        assert held.data == free.data and held.data.count(b"\n") == n
        assert held.largest_gap() < free.largest_gap() + 0.75, (held.largest_gap(), free.largest_gap())
        ((cid, frames, unrecorded, status),) = rows(db, "SELECT id, frames, frames_unrecorded, status FROM connections")
        assert status == "ended" and frames + unrecorded == n
        numbers = stored_numbers(db, cid)
        assert len(numbers) == frames and all(seq == number for seq, number in numbers)
        assert numbers[-1][0] == n, "frames after the thaw are stored again"
        assert (count_line(held.err) if unrecorded else 0) == unrecorded
        assert b"Traceback" not in held.err
