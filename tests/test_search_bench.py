"""The search benchmark (tools/bench.py case 6) on a generated 100,000-frame database: it runs, every search
exits as it should, and it reports the first search and later ones as ratios. No timing is asserted here:
speed is judged by the benchmark itself, against its baseline, on a quiet machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_search_benchmark_on_100k_frames(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    r = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "bench.py"), "--case", "search", "--show-frames", "100000",
         "--reps", "1", "--json", str(out)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert r.returncode in (0, 1), r.stderr[-2000:]  # 1: a budget missed on a busy machine, not a failure here
    case = json.loads(out.read_text())["cases"]["search"]
    assert case["frames"] >= 100_000
    runs = case["runs"]
    assert [x["exit"] for x in runs["first search (builds the index)"]] == [0]
    assert runs["rare word, every match"][0]["lines"] > 0
    assert runs["common word, first 20"][0]["lines"] == 40  # 20 matches, each with its snippet line
    assert [x["exit"] for x in runs["no match (exit 1)"]] == [1]
    assert [x["exit"] for x in runs["phrase, largest session"]] == [0]  # the flood session: "token N" chunks
    names = [row[0] for row in case["rows"]]
    assert any("first search" in n for n in names) and any("later" in n or "first 20" in n for n in names)
    assert all(row[3] is None or row[3] > 0 for row in case["rows"])  # ratios against the same run's baseline
