"""What `acp-relay run` with a local agent loads: its peak RSS is half of the flood's 80 MB budget (issue 18).

trio owns the relay process (issue 29: signals, the wait, the drain, the recorder's lifetime), imported once
the agent runs; the modules only the recorder child needs stay out of it; signals still reach the agent
(tests/test_relay.py forwards each one).
"""

from __future__ import annotations

import json
import signal
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
# trio's core only (run/shell.trio_core): the rest of the package (ssl, sockets, subprocesses) is 6 MB.
NOT_IN_THE_RELAY = (
    "ahocorasick_rs",
    "ssl",
    "trio._ssl",
    "trio._subprocess",
    "acp_relay.record.recorder",
    "acp_relay.store.writer",
)


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


# trio's core, then the whole package on the first other name: both work in one process.
CORE_THEN_ALL = """
import signal, sys
from acp_relay.run.shell import trio_core
core = trio_core()

async def main():
    async with core.open_nursery() as nursery:
        with core.open_signal_receiver(signal.SIGUSR1) as signals:
            signal.raise_signal(signal.SIGUSR1)
            async for signum in signals:
                break
        answer = await core.to_thread(lambda: 42)
        with core.move_on_after(0.001):
            await core.Event().wait()
        nursery.cancel_scope.cancel()
    return signum, answer

print(core.run(main), "ssl" in sys.modules)
import trio, trio.lowlevel

async def whole():
    await trio.sleep(0)
    return trio.lowlevel.open_process is not None and trio.TASK_STATUS_IGNORED is not None

print(trio.run(whole), "ssl" in sys.modules)
"""


def test_trio_core_alone_then_the_whole_package() -> None:
    out = subprocess.run([sys.executable, "-c", CORE_THEN_ALL], capture_output=True, timeout=60, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"({int(signal.SIGUSR1)}, 42) False", "True True"]
