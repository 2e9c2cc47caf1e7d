"""The peer server (tests/peers/peer_server.py, started by conftest.py): a peer it runs behaves, seen from
whoever started it, as the process it stands in for: its streams, its exit status, the signals sent to it
(and those it was started ignoring), its death; and a peer a fork would not run the same runs on its own."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from helpers import wait_for

PEERS = Path(__file__).resolve().parent


def listening() -> None:
    if os.environ.get("ACP_PEER_SERVER", "off") == "off":
        pytest.skip("no peer server (ACP_PEER_SERVER=off)")
    wait_for(lambda: os.path.exists(os.environ["ACP_PEER_SERVER"]), "the peer server to listen")


def start(*, forked: bool = True, env: dict[str, str] | None = None, ignore: int = 0) -> subprocess.Popen[bytes]:
    """The SDK agent, through the server (forked) or as a process of its own; `ignore`: a signal it starts
    with ignored, as a parent's SIG_IGN is inherited."""
    listening()
    environ = {**os.environ, **(env or {})} if forked else {**os.environ, "ACP_PEER_SERVER": "off"}
    return subprocess.Popen(
        [sys.executable, str(PEERS / "sdk_agent.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environ,
        preexec_fn=(lambda: signal.signal(ignore, signal.SIG_IGN)) if ignore else None,
    )


def is_handed_off(proc: subprocess.Popen[bytes]) -> bool:
    """The stand-in has given its streams away: its stdout is /dev/null, the peer has the pipe."""
    return os.readlink(f"/proc/{proc.pid}/fd/1") == os.devnull


def handed_off(proc: subprocess.Popen[bytes]) -> None:
    wait_for(lambda: proc.poll() is not None or is_handed_off(proc), "the hand-off", every=0.02)
    assert proc.poll() is None, "the stand-in ended before handing off"


def ask(proc: subprocess.Popen[bytes], id_: int, method: str, params: dict[str, object]) -> dict[str, object]:
    """One request, its answer (the agent answers in order here: nothing else is in flight)."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(orjson.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}) + b"\n")
    proc.stdin.flush()
    answer: dict[str, object] = orjson.loads(proc.stdout.readline())
    assert answer.get("id") == id_, answer
    return answer


def initialized(proc: subprocess.Popen[bytes]) -> None:
    """One initialize round trip: the agent is past its start-up, in its event loop."""
    ask(proc, 0, "initialize", {"protocolVersion": 1})


def read_to_eof(proc: subprocess.Popen[bytes], timeout: float = 30) -> tuple[bytes, bytes]:
    """Both pipes read to EOF, stdin left open: EOF means every writer of them is gone."""
    assert proc.stdout is not None and proc.stderr is not None
    fds = [proc.stdout.fileno(), proc.stderr.fileno()]
    got = dict.fromkeys(fds, b"")
    still_open = set(fds)
    deadline = time.monotonic() + timeout
    while still_open and (left := deadline - time.monotonic()) > 0:
        for fd in select.select(list(still_open), [], [], left)[0]:
            data = os.read(fd, 65536)
            got[fd] += data
            if not data:
                still_open.discard(fd)
    assert not still_open, "a pipe still open after the timeout"
    return got[fds[0]], got[fds[1]]


def test_the_peer_gets_the_streams_and_its_status_is_the_stand_ins() -> None:
    proc = start()
    handed_off(proc)
    out, err = proc.communicate(b"", timeout=30)  # EOF on stdin: the SDK agent says so and exits 0
    assert proc.returncode == 0 and b"stdin closed, exiting" in err, err


def test_an_exit_status_comes_through() -> None:
    proc = start(env={"SDK_AGENT_DIE_AT_TURN": "1"})  # the agent exits 3 at its first prompt
    handed_off(proc)
    initialized(proc)
    new = ask(proc, 1, "session/new", {"cwd": str(PEERS), "mcpServers": []})
    session = new["result"]["sessionId"]  # type: ignore[index]
    assert proc.stdin is not None
    prompt = {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}
    proc.stdin.write(orjson.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": prompt}) + b"\n")
    proc.stdin.flush()
    assert proc.wait(30) == 3
    proc.communicate(timeout=30)


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


def test_a_signal_the_agent_was_started_ignoring_stays_ignored() -> None:
    for forked in (True, False):
        proc = start(forked=forked, ignore=signal.SIGHUP)
        if forked:
            handed_off(proc)
        initialized(proc)
        proc.send_signal(signal.SIGHUP)
        ask(proc, 1, "initialize", {"protocolVersion": 1})  # still there
        _, err = proc.communicate(b"", timeout=30)
        assert proc.returncode == 0 and b"stdin closed, exiting" in err, (forked, err)


def test_a_stand_in_killed_outright_takes_the_peer_with_it() -> None:
    proc = start()
    handed_off(proc)
    initialized(proc)
    proc.kill()
    out, err = read_to_eof(proc)  # with stdin open: only the peer's death closes its pipes
    assert proc.wait(30) == -signal.SIGKILL
    assert out == b"" and b"stdin closed" not in err, err
    assert proc.stdin is not None
    proc.stdin.close()


def test_a_peer_a_fork_would_not_run_the_same_runs_on_its_own() -> None:
    """Another interpreter flag (-X dev, from PYTHONDEVMODE) than the server's: the server declines, and
    the peer runs in the process that was started, streams and all."""
    proc = start(env={"PYTHONDEVMODE": "1"})
    initialized(proc)
    assert not is_handed_off(proc)
    _, err = proc.communicate(b"", timeout=30)
    assert proc.returncode == 0 and b"stdin closed, exiting" in err, err
