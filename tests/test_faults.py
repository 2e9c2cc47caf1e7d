"""Faults on every side: each one an expected outcome. The relay never hangs, never loses, never leaks."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import py_agent, relay_cmd, rows, run_relay, stream_of, try_rows, wait_for

FRAME = (
    b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"pad":"' + b"x" * 900 + b'"}}}\n'
)


def rss_kb(pid: int) -> int:
    """Resident memory of a process now."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def relay_pid(proc: subprocess.Popen[bytes]) -> int:
    return proc.pid  # relay_cmd runs python -m acp_relay directly: the Popen is the relay


def test_agent_crashes_mid_frame(db: Path) -> None:
    agent = 'import os; os.write(1, b\'{"jsonrpc":"2.0","method":"a"}\\n{"jsonrpc":"2.0","me\'); os._exit(7)'
    out = run_relay(db, *py_agent(agent))
    assert out.returncode == 7
    assert out.stdout == b'{"jsonrpc":"2.0","method":"a"}\n{"jsonrpc":"2.0","me'
    assert rows(db, "SELECT raw, unterminated, parse FROM frames WHERE direction = 'a2c' ORDER BY seq") == [
        (b'{"jsonrpc":"2.0","method":"a"}', 0, "ok"),
        (b'{"jsonrpc":"2.0","me', 1, "invalid_json"),
    ]
    assert rows(db, "SELECT exit_code FROM connections") == [(7,)]


def test_agent_closes_stdout_but_keeps_running(db: Path) -> None:
    agent = "import os, time; os.write(1, b'{}\\n'); os.close(1); time.sleep(1.0); os._exit(4)"
    t0 = time.monotonic()
    out = run_relay(db, *py_agent(agent))
    assert out.returncode == 4 and out.stdout == b"{}\n"
    assert time.monotonic() - t0 >= 0.9  # it waited for the agent, not for stdout's EOF alone
    assert rows(db, "SELECT closed_by FROM connections")[0][0] in ("agent_exit", "editor_eof")


def test_agent_floods_stderr(db: Path) -> None:
    agent = (
        "import sys\nfor i in range(100000): sys.stderr.write('log line %06d ' % i + 'y' * 88 + '\\n')\nprint('{}')\n"
    )
    out = run_relay(db, *py_agent(agent), timeout=60)
    assert out.returncode == 0 and out.stdout == b"{}\n"
    assert len(out.stderr) == 100000 * 105
    assert rows(db, "SELECT count(*), sum(length(raw)) FROM stderr") == [(100000, 100000 * 104)]


def test_agent_that_never_reads_stdin_pushes_back_on_the_editor(db: Path) -> None:
    proc = subprocess.Popen(
        relay_cmd(db, *py_agent("import time; time.sleep(60)")),
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    written = 0
    stop = threading.Event()

    def editor() -> None:
        nonlocal written
        try:
            while not stop.is_set():
                proc.stdin.write(FRAME * 64)  # type: ignore[union-attr]
                written += len(FRAME) * 64
        except (BrokenPipeError, ValueError, OSError):
            pass

    t = threading.Thread(target=editor, daemon=True)
    t.start()
    time.sleep(3)
    stalled_at = written
    time.sleep(1)
    assert written == stalled_at, "the editor's writes should block: the agent reads nothing"
    assert written < 64 << 20  # pipes and the bounded queue, not an unbounded buffer
    assert rss_kb(proc.pid) < 120_000
    stop.set()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 128 + signal.SIGTERM


def test_editor_that_stops_reading_stdout_loses_nothing(db: Path) -> None:
    n = 30000
    agent = f"import sys\nline = {FRAME!r}\nfor i in range({n}): sys.stdout.buffer.write(line)\n"
    proc = subprocess.Popen(relay_cmd(db, *py_agent(agent)), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    time.sleep(2)  # the editor reads nothing for a while: the agent must block, the relay must not buffer it all
    peak = rss_kb(proc.pid)
    data = proc.stdout.read()  # type: ignore[union-attr]
    proc.stdin.close()  # type: ignore[union-attr]
    assert proc.wait(timeout=60) == 0
    assert data == FRAME * n
    assert peak < 120_000
    assert rows(db, "SELECT count(*) FROM frames WHERE direction = 'a2c'") == [(n,)]


def test_write_lock_held_through_the_session_loses_nothing(db: Path) -> None:
    """Another writer holds the lock until the editor has every byte back (the wire does not wait for the
    recorder); once it lets go, the recorder stores it all. Before: a 10 s timer released the lock, a
    clock racing the relay's own waits under load, and ten seconds spent on every run."""
    run_relay(db, "cat", data=b"")  # create the database
    blocker = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")
    blocker.execute("INSERT INTO stderr (connection_id, ts, mono, raw) VALUES (1, 0, 0, x'00')")
    proc = subprocess.Popen(relay_cmd(db, "cat"), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    data = FRAME * 5000
    out = bytearray()
    fd = proc.stdout.fileno()

    def read() -> None:
        while chunk := os.read(fd, 1 << 16):
            out.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        proc.stdin.write(data)
        proc.stdin.flush()
        wait_for(lambda: len(out) == len(data) or proc.poll() is not None, "every byte back at the editor")
    finally:
        blocker.execute("ROLLBACK")
    proc.stdin.close()
    assert proc.wait(timeout=120) == 0
    reader.join(30)
    err = proc.stderr.read()
    assert out == data
    wait_for(lambda: try_rows(db, "SELECT 1 FROM connections WHERE id = 2 AND status != 'running'"), "the row finished")
    blocker.close()
    ((cid, frames, unrecorded),) = rows(db, "SELECT id, frames, frames_unrecorded FROM connections WHERE id = 2")
    assert (frames, unrecorded) == (10000, 0), err
    assert stream_of(db, "a2c", cid) == data
    assert set(err.decode().splitlines()) <= {  # what it says while it waits, nothing else
        "acp-relay: run: the database is busy (database is locked); queuing frames until it frees up",
        "acp-relay: run: the recorder is still writing; it will finish in the background",
    }


def test_read_only_directory(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    data = FRAME * 10
    cmd = relay_cmd(ro / "relay.db", "cat")
    if os.geteuid() == 0:  # root ignores permission bits: a read-only bind mount, in a private mount namespace
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", READ_ONLY_MOUNT, "sh", str(ro), *cmd]
        if subprocess.run([*cmd[:9], "true"], capture_output=True).returncode != 0:  # the mount, then `true`
            pytest.skip("cannot make a read-only directory as root here (no private mount namespace)")
    else:
        os.chmod(ro, 0o555)
    try:
        out = subprocess.run(cmd, input=data, capture_output=True, timeout=30)
        assert out.returncode == 0 and out.stdout == data
        warning, count = out.stderr.splitlines()
        assert b"forwarding goes on" in warning and count == b"acp-relay: run: 20 frames were not recorded"
    finally:
        os.chmod(ro, 0o755)


# `sh -c` script: make $1 read-only (only inside this process's own mount namespace), then run the rest.
READ_ONLY_MOUNT = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'

# Imported at start-up by every Python process whose PYTHONPATH holds it (the relay and its recorder child):
# the recorder's database gets a page limit, as if the disk were full.
DISK_FULL_HOOK = """
import os
from acp_relay.store import db

_connect = db.connect


def connect(*args, **kwargs):
    conn = _connect(*args, **kwargs)
    if not kwargs.get("readonly"):
        conn.execute("PRAGMA max_page_count = %d" % int(os.environ["DISK_FULL_PAGES"]))
    return conn


db.connect = connect
"""


def test_disk_full(db: Path) -> None:
    run_relay(db, "cat", data=b"")
    hook = db.parent / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(DISK_FULL_HOOK)
    pythonpath = os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": pythonpath, "DISK_FULL_PAGES": str(rows(db, "PRAGMA page_count")[0][0] + 40)}
    data = FRAME * 3000
    out = subprocess.run(relay_cmd(db, "cat"), input=data, capture_output=True, timeout=60, env=env)
    assert out.returncode == 0 and out.stdout == data
    warning, count = out.stderr.splitlines()
    assert b"full" in warning
    ((frames, unrecorded),) = rows(db, "SELECT frames, frames_unrecorded FROM connections WHERE id = 2")
    assert unrecorded > 0 and frames + unrecorded == 6000
    assert count == f"acp-relay: run: {unrecorded} frames were not recorded (connection 2)".encode()  # the row's


@pytest.mark.parametrize("hostile", ["plain", "evil\x1b[2J\x1b]0;title\x07", "bidi\u202eexe.txt", "ctl\x01\x7f\x9b"])
def test_every_line_run_prints_on_a_fault_is_in_the_one_form(tmp_path: Path, hostile: str) -> None:
    """Issue 21: the relay, the recorder child and the journal printed `acp-relay: message`, without the
    command, and put the database path on stderr as it was. The database's directory here is a file (no
    database can be made there, as root too) and its name carries terminal controls and bidi overrides."""
    parent = tmp_path / hostile
    parent.write_bytes(b"not a directory")
    data = FRAME * 5
    cmd = [sys.executable, "-m", "acp_relay", "run", "--no-redact", "--db", str(parent / "relay.db"), "--", "cat"]
    out = subprocess.run(cmd, input=data, capture_output=True, timeout=60)
    assert out.returncode == 0 and out.stdout == data
    lines = out.stderr.decode().splitlines()
    assert len(lines) == 3, lines  # --no-redact's warning, the open failure, the count
    assert all(line.startswith("acp-relay: run: ") for line in lines), lines
    assert lines[-1] == "acp-relay: run: 10 frames were not recorded", lines
    assert "cannot open the database" in lines[1], lines
    for line in lines:
        assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or c == "\u202e" for c in line), repr(line)
        assert "\\\\" not in line, repr(line)  # escaped once, not twice
