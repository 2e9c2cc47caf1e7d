"""rerun owns the relay and agent it starts: SIGTERM, SIGINT or SIGHUP ends them, the connection is closed
by that signal, and rerun exits 128+N (issue 18). Before, SIGTERM left the relay, agent and recorder
running and the connection `running`; SIGINT exited 3 with a false timeout. replay exits 128+N too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import rows, try_rows, wait_for
from rerun_support import SDK_AGENT, record_v1

from acp_relay.store.liveness import pid_alive


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_the_relay_and_agent_rerun_started(tmp_path: Path, sig: signal.Signals) -> None:
    db = tmp_path / "relay.db"
    notes = tmp_path / "notes.txt"
    notes.write_text("notes\n")
    sid = record_v1(db, tmp_path, notes)
    env = {**os.environ, "SDK_AGENT_HANG_AT_TURN": "1"}  # the first prompt never ends
    rerun = subprocess.Popen(
        [sys.executable, "-m", "acp_relay", "rerun", f"{sid}@1", "--db", str(db), "--", *SDK_AGENT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    wait_for(
        lambda: try_rows(db, "SELECT 1 FROM frames WHERE connection_id = 2 AND method = 'session/prompt'"), "turn 1"
    )
    ((relay_pid,),) = rows(db, "SELECT relay_pid FROM connections WHERE id = 2")
    rerun.send_signal(sig)
    out, err = rerun.communicate(timeout=30)
    assert rerun.returncode == 128 + sig, err
    assert f"stopped by {sig.name}".encode() in err and b"Traceback" not in err
    wait_for(lambda: not pid_alive(relay_pid), "the relay to exit", timeout=10)
    wait_for(lambda: rows(db, "SELECT status FROM connections WHERE id = 2") != [("running",)], "the row", 10)
    ((status, closed_by, agent_pid),) = rows(db, "SELECT status, closed_by, agent_pid FROM connections WHERE id = 2")
    assert (status, closed_by) == ("ended", f"signal:{sig.name}")
    assert agent_pid and not pid_alive(agent_pid)


def test_replay_stopped_by_sigterm_exits_143(tmp_path: Path) -> None:
    db = tmp_path / "relay.db"
    done = subprocess.run(
        [sys.executable, "-m", "acp_relay", "demo", "--db", str(db)], capture_output=True, timeout=120
    )
    assert done.returncode == 0
    replay = subprocess.Popen(
        [sys.executable, "-m", "acp_relay", "replay", "last", "--db", str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert replay.stderr is not None
    line = replay.stderr.readline()  # "serving ...": it is up
    assert b"serving" in line or b"replay" in line, line
    time.sleep(0.2)
    replay.send_signal(signal.SIGTERM)
    _, err = replay.communicate(timeout=30)
    assert replay.returncode == 143 and b"Traceback" not in err, err
