"""What `acp-relay run` with a local agent loads: its peak RSS is half of the flood's 80 MB budget (issue 18).

trio owns the relay process (issue 29: signals, the wait, the drain, the recorder's lifetime), imported once
the agent runs; the modules only the recorder child needs stay out of it; signals still reach the agent
(tests/test_relay.py forwards each one).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers import rows

# Runs the CLI in this process, as the console script does, and prints what it loaded.
PROBE = """
import json, sys
sys.argv = ["acp-relay", "run", "--db", sys.argv[1], "--", sys.executable, "-c", "print('hello')"]
from acp_relay.cli import main
try:
    main()
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""

# Loaded by the recorder child (or by the remote transports), never by a relay of a local agent.
NOT_IN_THE_RELAY = ("ahocorasick_rs", "acp_relay.record.recorder", "acp_relay.store.writer")


def test_the_stdio_relay_runs_trio_and_not_the_recorder(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    out = subprocess.run([sys.executable, "-c", PROBE, str(db)], capture_output=True, timeout=60)
    assert out.stdout == b"hello\n"
    report = json.loads(out.stderr.decode().strip().splitlines()[-1])
    assert report["code"] == 0
    loaded = set(report["modules"])
    assert [m for m in NOT_IN_THE_RELAY if m in loaded] == []
    assert "trio" in loaded
    assert rows(db, "SELECT direction, raw FROM frames") == [("a2c", b"hello")]
    assert rows(db, "SELECT status, exit_code FROM connections") == [("ended", 0)]
