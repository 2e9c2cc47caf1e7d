"""The peer server (tests/peers/peer_server.py, started by conftest.py): a peer it runs behaves, seen from
whoever started it, as the process it stands in for: its streams, its exit status, the signals sent to it,
its death."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

PEERS = Path(__file__).resolve().parent


def start(*, forked: bool = True) -> subprocess.Popen[bytes]:
    """The SDK agent, through the server (forked) or as a process of its own."""
    listening()
    env = {**os.environ} if forked else {**os.environ, "ACP_PEER_SERVER": "off"}
    return subprocess.Popen(
        [sys.executable, str(PEERS / "sdk_agent.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def initialized(proc: subprocess.Popen[bytes]) -> None:
    """One initialize round trip: the agent is past its start-up, in its event loop."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n')
    proc.stdin.flush()
    assert b'"id":0' in proc.stdout.readline()


def listening() -> None:
    if os.environ.get("ACP_PEER_SERVER", "off") == "off":
        pytest.skip("no peer server (ACP_PEER_SERVER=off)")
    deadline = time.monotonic() + 30
    while not os.path.exists(os.environ["ACP_PEER_SERVER"]):
        assert time.monotonic() < deadline, "the peer server never listened"
        time.sleep(0.05)


def handed_off(proc: subprocess.Popen[bytes]) -> None:
    """Wait until the stand-in has given its streams away (its stdout is /dev/null: the peer has the pipe)."""
    deadline = time.monotonic() + 30
    while os.readlink(f"/proc/{proc.pid}/fd/1") != os.devnull:
        assert proc.poll() is None and time.monotonic() < deadline, "never handed off"
        time.sleep(0.02)


def test_the_peer_gets_the_streams_and_its_status_is_the_stand_ins() -> None:
    proc = start()
    handed_off(proc)
    out, err = proc.communicate(b"", timeout=30)  # EOF on stdin: the SDK agent says so and exits 0
    assert proc.returncode == 0 and b"stdin closed, exiting" in err, err


def test_an_exit_status_comes_through() -> None:
    listening()
    proc = subprocess.run(
        [sys.executable, str(PEERS / "sdk_client.py"), "--no-such-option"], capture_output=True, timeout=30
    )
    assert proc.returncode == 2 and b"unrecognized arguments" in proc.stderr  # argparse's usage error


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_to_the_stand_in_ends_the_peer_as_it_ends_the_agent_itself(sig: signal.Signals) -> None:
    """SIGTERM and SIGHUP kill the SDK agent; SIGINT it takes as the end of its input (exit 0). Its stdin
    stays open until it has ended: an EOF racing the forwarded signal would end it (0) by itself."""
    statuses = []
    for forked in (True, False):
        proc = start(forked=forked)
        if forked:
            handed_off(proc)
        initialized(proc)
        proc.send_signal(sig)
        statuses.append(proc.wait(30))
        proc.communicate(timeout=30)
    assert statuses[0] == statuses[1] == (0 if sig == signal.SIGINT else -sig)


def test_a_stand_in_killed_outright_takes_the_peer_with_it() -> None:
    proc = start()
    handed_off(proc)
    proc.kill()
    out, _ = proc.communicate(timeout=30)  # EOF on both pipes: the peer, their last writer, is gone too
    assert out == b"" and proc.returncode == -signal.SIGKILL
