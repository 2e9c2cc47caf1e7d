"""prune and delete: whole connections oldest first, one session's frames; safe beside a live relay."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import relay_cmd, rows, run_relay, try_rows, wait_for
from support.cli import run as run_cli

from acp_relay.store import db as dbmod
from acp_relay.store import retention, units


def line(i: int, session: str = "s") -> bytes:
    return b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"%s","update":{"i":%d,"pad":"%s"}}}\n' % (
        session.encode(),
        i,
        b"x" * 500,
    )


def test_parsers() -> None:
    assert units.parse_duration("30d") == 30 * 86400
    assert units.parse_duration("90m") == 5400
    assert units.parse_size("500MB") == 500_000_000
    assert units.parse_size("1KiB") == 1024
    with pytest.raises(ValueError):
        units.parse_duration("soon")
    with pytest.raises(ValueError):
        units.parse_size("big")


def record(db: Path, n: int, session: str = "s") -> None:
    assert run_relay(db, "cat", data=b"".join(line(i, session) for i in range(n))).returncode == 0


def test_prune_older_than_deletes_whole_old_connections(db: Path) -> None:
    record(db, 100, "old")
    record(db, 100, "new")
    conn = dbmod.connect(db)
    conn.execute(
        "UPDATE connections SET started_at = started_at - 40 * 86400, ended_at = ended_at - 40 * 86400 WHERE id = 1"
    )
    result = retention.prune(conn, older_than=30 * 86400)
    assert (result.connections, result.frames) == (1, 200)
    assert rows(db, "SELECT id FROM connections") == [(2,)]
    assert rows(db, "SELECT DISTINCT session_id FROM frames") == [("new",)]
    assert rows(db, "SELECT session_id FROM sessions") == [("new",)]


def test_prune_max_size_keeps_the_newest(db: Path) -> None:
    for k in range(4):
        record(db, 400, f"s{k}")
    conn = dbmod.connect(db)
    before = retention.db_size(conn)
    result = retention.prune(conn, max_size=before // 2)
    assert result.size_after <= before // 2 + 64 * 1024
    kept = [r[0] for r in rows(db, "SELECT id FROM connections ORDER BY id")]
    assert kept and kept[-1] == 4 and 1 not in kept
    assert retention.prune(conn, max_size=before * 10).connections == 0


def test_prune_never_deletes_a_live_connection_and_is_safe_while_it_writes(db: Path) -> None:
    record(db, 50, "done")
    proc = subprocess.Popen(relay_cmd(db, "cat"), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    for i in range(200):
        proc.stdin.write(line(i, "live"))  # type: ignore[union-attr]
    proc.stdin.flush()  # type: ignore[union-attr]
    wait_for(lambda: try_rows(db, "SELECT 1 FROM frames WHERE session_id = 'live' LIMIT 1"), "the live relay's frames")
    conn = dbmod.connect(db)
    result = retention.prune(conn, older_than=0, now=time.time() + 1)
    assert result.connections == 1  # the finished one only
    for i in range(200, 400):
        proc.stdin.write(line(i, "live"))  # type: ignore[union-attr]
    proc.stdin.close()  # type: ignore[union-attr]
    assert proc.wait(timeout=30) == 0
    assert rows(db, "SELECT count(*), count(DISTINCT connection_id) FROM frames") == [(800, 1)]
    assert rows(db, "SELECT frames, frames_unrecorded FROM connections") == [(800, 0)]


def test_delete_one_session(db: Path) -> None:
    record(db, 10, "keep-me")
    record(db, 10, "drop-me")
    out = subprocess.run(
        [sys.executable, "-m", "acp_relay", "delete", "--db", str(db), "drop"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0 and "deleted session drop-me@2 (20 frames)" in out.stdout
    assert rows(db, "SELECT DISTINCT session_id FROM frames") == [("keep-me",)]
    out = subprocess.run(
        [sys.executable, "-m", "acp_relay", "delete", "--db", str(db), "nothing"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 2 and out.stderr.startswith("acp-relay: delete: no session matches")


def test_prune_cli(db: Path) -> None:
    record(db, 10)
    out = subprocess.run(
        [sys.executable, "-m", "acp_relay", "prune", "--db", str(db), "--older-than", "0s", "--dry-run"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0 and out.stdout.startswith("would delete connection 1 started ")
    assert "would delete 1 connection (20 frames)" in out.stdout
    assert rows(db, "SELECT count(*) FROM frames") == [(20,)]
    out = subprocess.run(
        [sys.executable, "-m", "acp_relay", "prune", "--db", str(db)], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 2 and "--older-than" in out.stderr


@pytest.mark.parametrize(
    ("option", "value", "words"),
    [
        ("--older-than", "30", "has no unit"),
        ("--older-than", "0", "has no unit"),
        ("--max-size", "1000", "has no unit"),
        ("--max-size", "1", "has no unit"),
        ("--older-than", "soon", "not a duration"),
    ],
)
def test_prune_refuses_a_bare_number(db: Path, option: str, value: str, words: str) -> None:
    """A bare `--older-than 30` was 30 seconds and deleted every connection; `--max-size 1000` 1000 bytes."""
    record(db, 10)
    r = run_cli("prune", "--db", str(db), option, value)
    assert r.exit_code == 2 and r.stderr.startswith("acp-relay: prune: ") and words in r.stderr, r.stderr
    assert rows(db, "SELECT count(*) FROM frames") == [(20,)]


def test_prune_dry_run_estimates_the_size_after_and_json_lists_what_went(db: Path) -> None:
    for _ in range(3):
        record(db, 200)
    conn = dbmod.connect(db)
    conn.execute("UPDATE connections SET ended_at = ended_at - 40 * 86400 WHERE id < 3")
    conn.close()
    dry = run_cli("prune", "--db", str(db), "--older-than", "30d", "--dry-run", "--json")
    lines = [json.loads(x) for x in dry.stdout.splitlines()]
    assert [x.get("connection") for x in lines[:-1]] == [1, 2] and all(x["dry_run"] for x in lines)
    total = lines[-1]
    assert total["connections"] == 2 and total["frames"] == 800
    assert total["size_after"] < total["size_before"]  # an estimate, not "stays the same"
    assert rows(db, "SELECT count(*) FROM connections") == [(3,)]
    done = run_cli("prune", "--db", str(db), "--older-than", "30d", "--json")
    real = [json.loads(x) for x in done.stdout.splitlines()]
    assert [x.get("connection") for x in real[:-1]] == [1, 2] and real[-1]["frames"] == 800
    assert rows(db, "SELECT id FROM connections") == [(3,)]
    text = run_cli("prune", "--db", str(db), "--older-than", "0s", "--dry-run").stdout
    assert "would delete connection 3 started " in text and "-> about " not in text  # everything: exact


def test_the_listing_counts_what_is_left_after_each_delete(fixture_db: Path, tmp_path: Path) -> None:
    """FRAMES in the session list is the number of frames `show` lists for that row, after every delete: a
    connection whose last session was deleted said the frames it had once recorded."""
    import shutil

    db = tmp_path / "copy.db"
    shutil.copy(fixture_db, db)

    def listed() -> list[tuple[str, int, int]]:
        return [
            (row["session_id"], row["connection_id"], row["frames"])
            for row in map(json.loads, run_cli("show", "--db", str(db), "--json").stdout.splitlines())
        ]

    for doomed in ("sess-v2-beta@2", "sess-v1-alpha@1", "sess-v2-child@2"):
        assert run_cli("delete", "--db", str(db), doomed).exit_code == 0
        for sid, cid, frames in listed():
            which = ["-c", str(cid)] if sid is None else [f"{sid}@{cid}"]
            shown = run_cli("show", "--db", str(db), *which, "--json").stdout.splitlines()
            assert frames == len(shown), (doomed, sid, cid)


@pytest.mark.parametrize("older_than", ["1s", "30d"])
def test_the_dry_run_estimate_is_what_the_prune_leaves(fixture_db: Path, tmp_path: Path, older_than: str) -> None:
    """`--dry-run` said `393.2 KB -> about 0 B` where the prune left 360.4 KB: an empty database still holds
    its schema (a page per table and index). Deleting everything, the estimate is exact; deleting some, it is
    within a page per table of it; deleting nothing, it is the size now."""
    import shutil

    db = tmp_path / "copy.db"
    shutil.copy(fixture_db, db)
    conn = dbmod.connect(db)
    conn.execute("UPDATE connections SET ended_at = ended_at + 1e9 WHERE id = 3")  # ends in the future: kept
    conn.close()
    everything = older_than == "1s"
    if everything:
        conn = dbmod.connect(db)
        conn.execute("UPDATE connections SET ended_at = 0")
        conn.close()
    dry = json.loads(
        run_cli("prune", "--db", str(db), "--older-than", older_than, "--dry-run", "--json").stdout.splitlines()[-1]
    )
    real = json.loads(run_cli("prune", "--db", str(db), "--older-than", older_than, "--json").stdout.splitlines()[-1])
    assert dry["connections"] == real["connections"] and dry["size_before"] == real["size_before"]
    if everything or real["connections"] == 0:
        assert dry["size_after"] == real["size_after"], (dry, real)
    else:
        page = dbmod.connect(db).execute("PRAGMA page_size").fetchone()[0]
        assert abs(dry["size_after"] - real["size_after"]) <= 8 * page, (dry, real)


def test_the_dry_run_estimate_of_part_of_a_database(db: Path) -> None:
    for k in range(3):
        record(db, 300, f"s{k}")
    conn = dbmod.connect(db)
    conn.execute("UPDATE connections SET ended_at = ended_at - 40 * 86400 WHERE id = 1")
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    dry = retention.prune(dbmod.connect(db), older_than=30 * 86400, dry_run=True)
    real = retention.prune(dbmod.connect(db), older_than=30 * 86400)
    assert dry.connections == real.connections == 1
    assert abs(dry.size_after - real.size_after) <= 4 * page, (dry, real)
