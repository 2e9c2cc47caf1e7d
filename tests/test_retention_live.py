"""delete and prune never touch a connection a relay is still recording (issue 18). Before, `delete last`
took the live session and removed its frames under the running recorder (the row then disagreed with the
table)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import relay_cmd, rows, try_rows, wait_for

AGENT = (
    "import sys, time\n"
    'print(\'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"live-1","update":{}}}\', flush=True)\n'
    "sys.stdin.readline()\n"
)


def acp(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_relay", *args, "--db", str(db)], capture_output=True, text=True, timeout=60
    )


def test_a_live_session_is_neither_deleted_nor_pruned(db: Path) -> None:
    done = subprocess.run(
        relay_cmd(db, "cat"), input=b'{"jsonrpc":"2.0","method":"x","params":{"sessionId":"old-1"}}\n'
    )
    assert done.returncode == 0
    relay = subprocess.Popen(relay_cmd(db, sys.executable, "-c", AGENT), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        wait_for(lambda: try_rows(db, "SELECT 1 FROM frames WHERE session_id = 'live-1'"), "the live session stored")
        for target in ("last", "live-1"):
            out = acp(db, "delete", target)
            assert out.returncode == 2, out
            assert out.stderr.splitlines()[0].startswith("acp-relay: delete: session live-1@2 is still being recorded")
        out = acp(db, "prune", "--older-than", "0s")
        assert out.returncode == 0, out.stderr
        assert rows(db, "SELECT count(*) FROM frames WHERE session_id = 'live-1'") == [(1,)]
        assert rows(db, "SELECT id FROM connections") == [(2,)]  # the ended one went, the live one stayed
    finally:
        assert relay.stdin is not None
        relay.stdin.write(b"\n")
        relay.stdin.close()
        relay.wait(30)
    wait_for(lambda: rows(db, "SELECT status FROM connections") == [("ended",)], "the relay to finish")
    out = acp(db, "delete", "last")
    assert out.returncode == 0 and out.stdout.startswith("deleted session live-1@2"), out
