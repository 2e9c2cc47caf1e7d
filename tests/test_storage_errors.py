"""Every command against a damaged, a full and a read-only database: one `acp-relay: COMMAND:` line (and
maybe a hint), a documented exit status, never a traceback (issue 18). Before, most of them ended in a
Python traceback and exit 1."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, run_relay

# (command, whether it must write to the database)
COMMANDS = [
    (["show"], False),
    (["show", "last"], False),
    (["stats"], False),
    (["check"], False),
    (["info", "last"], False),
    (["search", "hello"], True),
    (["export", "last", "-o", "{tmp}/out.db"], False),
    (["export", "last", "--format", "ndjson", "-o", "{tmp}/out.ndjson"], False),
    (["view", "last", "--no-open", "-o", "{tmp}/page.html"], False),
    (["diff", "last", "last"], False),
    (["replay", "last"], False),
    (["import", "{tmp}/other.db"], True),
    (["prune", "--older-than", "0s"], True),
    (["delete", "last"], True),
    (["recover"], False),
]

FULL_HOOK = """
import os
from acp_relay.store import db

_connect = db.connect


def connect(*args, **kwargs):
    conn = _connect(*args, **kwargs)
    if not kwargs.get("readonly"):
        conn.execute("PRAGMA max_page_count = %d" % conn.execute("PRAGMA page_count").fetchone()[0])
    return conn


db.connect = connect
"""

READ_ONLY_MOUNT = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database the demo recorded (several connections and sessions), and a capture to import."""
    base = tmp_path_factory.mktemp("recorded")
    db = base / "good.db"
    out = subprocess.run([sys.executable, "-m", "acp_relay", "demo", "--db", str(db)], capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr
    frame = (
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"x":"' + b"y" * 300 + b'"}}}\n'
    )
    assert run_relay(base / "big.db", "cat", data=frame * 3000).returncode == 0  # needs new pages to import
    return db


def run_all(db: Path, tmp: Path, env: dict[str, str] | None = None, wrap: list[str] | None = None) -> list[tuple]:
    if not (tmp / "other.db").exists():
        shutil.copy(tmp / "good.db", tmp / "other.db")  # something to import
    results = []
    for argv, writes in COMMANDS:
        args = [a.format(tmp=tmp) for a in argv]
        cmd = [*(wrap or []), sys.executable, "-m", "acp_relay", *args, "--db", str(db)]
        out = subprocess.run(cmd, capture_output=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
        results.append((args, writes, out))
    return results


def assert_clean(results: list[tuple], *, all_fail: bool) -> None:
    for args, writes, out in results:
        err = out.stderr.decode()
        assert "Traceback" not in err, (args, err)
        assert out.returncode in (0, 1, 2, 5), (args, out.returncode, err)
        if all_fail or writes:
            assert out.returncode in (2, 5), (args, out.returncode, err)
        if out.returncode in (2, 5):
            lines = err.splitlines()
            assert 1 <= len(lines) <= 2 and lines[0].startswith(f"acp-relay: {args[0]}: "), (args, err)
            assert len(lines) == 1 or lines[1].startswith("  hint: "), (args, err)


def test_every_command_on_a_damaged_database(recorded: Path, tmp_path: Path) -> None:
    db = tmp_path / "bad.db"
    shutil.copy(recorded, db)
    shutil.copy(recorded, tmp_path / "good.db")
    with open(db, "r+b") as f:  # the schema page stays, the pages of the tables go
        f.seek(16384)
        f.write(b"\xff" * (os.path.getsize(db) - 16384))
    results = run_all(db, tmp_path)
    assert_clean([r for r in results if r[0] != ["recover"]], all_fail=True)
    assert_clean([r for r in results if r[0] == ["recover"]], all_fail=False)


def test_every_command_on_a_full_disk(recorded: Path, tmp_path: Path) -> None:
    db = tmp_path / "full.db"
    shutil.copy(recorded, db)
    conn = sqlite3.connect(db)
    conn.execute("VACUUM")  # no free page left: anything new needs one more
    conn.close()
    shutil.copy(recorded, tmp_path / "good.db")
    shutil.copy(recorded.parent / "big.db", tmp_path / "other.db")
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(FULL_HOOK)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hook), str(ROOT)])}
    results = run_all(db, tmp_path, env=env)
    assert_clean([r for r in results if r[0][0] not in ("prune", "delete")], all_fail=False)
    # prune and delete free pages as they go; the others that write need new ones
    assert_clean([r for r in results if r[0][0] in ("import", "search")], all_fail=True)


def test_every_command_on_a_read_only_database(recorded: Path, tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    db = ro / "ro.db"
    shutil.copy(recorded, db)
    shutil.copy(recorded, tmp_path / "good.db")
    wrap: list[str] = []
    if os.geteuid() == 0:  # root ignores permission bits: a read-only bind mount in a private namespace
        wrap = ["unshare", "--mount", "--propagation", "private", "sh", "-c", READ_ONLY_MOUNT, "sh", str(ro)]
        if subprocess.run([*wrap, "true"], capture_output=True).returncode != 0:
            pytest.skip("cannot make a read-only directory as root here (no private mount namespace)")
    else:
        os.chmod(db, 0o444)
        os.chmod(ro, 0o555)
    try:
        results = run_all(db, tmp_path, wrap=wrap)
    finally:
        os.chmod(ro, 0o755)
    assert_clean(results, all_fail=False)
    assert_clean([r for r in results if r[0][0] in ("import", "prune", "delete")], all_fail=True)
