"""End to end: record real traffic through `acp-relay run`, then read it back with `acp-relay show`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import py_agent, run_relay
from peers.scenario import NOTES, SDK_AGENT, run_client


def show(db: Path, *args: str) -> bytes:
    proc = subprocess.run(
        [sys.executable, "-m", "acp_relay", "show", "--db", str(db), *args], capture_output=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout


def test_sdk_conversation_through_the_relay(tmp_path: Path) -> None:
    db = tmp_path / "relay.db"
    notes = tmp_path / "notes.txt"
    notes.write_text(NOTES, encoding="utf-8")
    sent, received = tmp_path / "c2a.bin", tmp_path / "a2c.bin"
    # tee on both sides of the agent: what it read and what it wrote, byte for byte, independent of the relay
    agent = ["sh", "-c", 'tee "$3" | "$0" "$1" | tee "$2"', sys.executable, str(SDK_AGENT), str(received), str(sent)]
    result = run_client([sys.executable, "-m", "acp_relay", "run", "--db", str(db), "--", *agent], notes, tmp_path)
    assert result["agent_text"] == "Hello from the SDK agent. File read complete."

    listing = show(db).decode()
    assert "sess-1" in listing and "sdk-test-agent" in listing and "sdk-test-client" in listing

    transcript = show(db, "last", "--transcript").decode()
    assert "Hello from the SDK agent." in transcript and "File read complete." in transcript
    tool_line = next(line for line in transcript.splitlines() if line.startswith("Tool call call-1"))
    assert "completed" in tool_line  # the tool call's final status, after its update

    assert show(db, "last", "--raw", "--direction", "a2c") == received.read_bytes()
    assert show(db, "--connection", "last", "--raw", "--direction", "a2c") == received.read_bytes()
    assert show(db, "--connection", "last", "--raw", "--direction", "c2a") == sent.read_bytes()

    lines = show(db, "last", "--method", "session/prompt").decode().splitlines()
    assert [line.split()[3] for line in lines] == ["request", "response", "request", "response"]
    assert "stopReason=end_turn" in lines[1] and "stopReason=cancelled" in lines[3]


AGENT_BYTES = (
    b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}\n'
    b"not json at all\n"
    b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":'
    b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"caf\xc3\xa9"}}}}\r\n'
    b"\n\xff\xfe\n"
    b'{"jsonrpc":"2.0","id":9,"error":{"code":-32603,"message":"boom"}}\n'
    b"tail without newline"
)
EDITOR_BYTES = (
    b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n'
    b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}'
)


def test_raw_reproduces_a_scripted_agents_bytes(tmp_path: Path) -> None:
    db = tmp_path / "relay.db"
    code = f"import sys; sys.stdin.buffer.read(); sys.stdout.buffer.write({AGENT_BYTES!r}); sys.stdout.buffer.flush()"
    proc = run_relay(db, *py_agent(code), data=EDITOR_BYTES)
    assert proc.stdout == AGENT_BYTES
    assert show(db, "-c", "last", "--raw", "-d", "a2c") == AGENT_BYTES
    assert show(db, "-c", "last", "--raw", "-d", "c2a") == EDITOR_BYTES
    text = show(db, "-c", "last").decode()
    assert "[unterminated]" in text and "(invalid_utf8)" in text and "[cr]" in text
    assert "-32603 boom" in text
    errors = show(db, "-c", "last", "--errors").decode().splitlines()
    assert len(errors) == 7  # invalid line, CRLF line, blank, bad UTF-8, error, both unterminated lines


def test_follow_a_live_relay_until_it_ends(tmp_path: Path) -> None:
    """`show -f` from another process prints frames as the relay records them and exits when it ends."""
    import sqlite3
    import time

    db = tmp_path / "relay.db"
    code = (
        "import sys, time\n"
        "for i in range(4):\n"
        '    sys.stdout.write(\'{"jsonrpc":"2.0","method":"tick","params":{"n":%d}}\\n\' % i)\n'
        "    sys.stdout.flush(); time.sleep(0.3)\n"
    )
    relay = subprocess.Popen(
        [sys.executable, "-m", "acp_relay", "run", "--db", str(db), "--", *py_agent(code)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:  # wait for the relay's connection row
            try:
                if sqlite3.connect(f"file:{db}?mode=ro", uri=True).execute("SELECT 1 FROM connections").fetchone():
                    break
            except sqlite3.Error:
                pass
            assert time.monotonic() < deadline, "the relay never recorded its connection"
            time.sleep(0.05)
        follower = subprocess.run(
            [sys.executable, "-m", "acp_relay", "show", "--db", str(db), "-f", "-c", "last"],
            capture_output=True,
            timeout=30,
        )
    finally:
        relay.wait(timeout=30)
    assert follower.returncode == 0, follower.stderr.decode()
    lines = follower.stdout.decode().splitlines()
    assert [line.split()[4] for line in lines] == ["tick"] * 4


TICKS = (
    "import sys, time\n"
    "for i in range(3):\n"
    '    sys.stdout.write(\'{"jsonrpc":"2.0","method":"tick","params":{"n":%d}}\\n\' % i)\n'
    "    sys.stdout.flush(); time.sleep(0.2)\n"
)


@pytest.mark.parametrize("before", ["no database yet", "an ended connection"])
def test_follow_alone_waits_for_the_next_relay(tmp_path: Path, before: str) -> None:
    """`show -f` with no session follows the connection a relay is recording; with none running it waits for
    the next one (it printed an old session and exited), and before the database exists it waits for that."""
    db = tmp_path / "relay.db"
    if before == "an ended connection":
        run_relay(db, *py_agent('print(\'{"jsonrpc":"2.0","method":"old"}\')'))
    follower = subprocess.Popen(
        [sys.executable, "-m", "acp_relay", "show", "--db", str(db), "-f"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert follower.stderr is not None
        waiting = follower.stderr.readline().decode()  # it says it waits before anything is recorded
        assert "waiting for" in waiting, waiting
        relay = run_relay(db, *py_agent(TICKS))
        assert relay.returncode == 0
        out, err = follower.communicate(timeout=30)
    finally:
        follower.kill()
    assert follower.returncode == 0, err
    text = out.decode()
    assert text.count("tick") == 3 and "old" not in text, text
    assert b"following connection" in err
