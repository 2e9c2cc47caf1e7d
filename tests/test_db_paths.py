"""Any --db path works: '#', '?', '%', spaces and non-ASCII letters in it (issue 18). Before, the read-only
`file:` URI was built without quoting: every read-only command failed, and SQLite opened a stray file named
up to the '?' or '#'."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import run_relay

NAMES = ["what?mode=rw", "a%20b#x", "mixed #?% ä"]  # each failed before except the spaces and letters alone
FRAME = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hello paths"}}}}\n'


def acp(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "acp_relay", *args], capture_output=True, timeout=60)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_every_reader_opens_a_database_whose_path_needs_quoting(tmp_path: Path, name: str) -> None:
    folder = tmp_path / name
    folder.mkdir()
    db = folder / f"{name}.db"
    assert run_relay(db, "cat", data=FRAME).returncode == 0
    before = sorted(p.name for p in tmp_path.rglob("*"))
    for args in (["show", "last", "--raw"], ["stats", "--json"], ["search", "hello"]):
        out = acp(*args, "--db", str(db))
        assert out.returncode == 0 and out.stderr == b"", (args, out.stderr)
        assert args[0] != "show" or FRAME.rstrip(b"\n") in out.stdout
    export = tmp_path / "export.db"
    assert acp("export", "last", "-o", str(export), "--db", str(db)).returncode == 0
    copy = folder / f"copy {name}.db"
    assert run_relay(copy, "cat", data=b"").returncode == 0
    out = acp("import", str(export), "--db", str(copy))
    assert out.returncode == 0, out.stderr
    after = {p.name for p in tmp_path.rglob("*")} - set(before)
    stray = {n for n in after if not n.startswith(("export.db", "other.db", f"copy {name}.db", f"{name}.db-"))}
    assert not stray, stray  # no file named up to a '?' or '#'
