"""The recorder child process's lifetime, as the relay sees it: started, watched, waited for at exit.

The child (record/child.py) is in its own process group (the editor's Ctrl-C is for the agent) and
finishes on its pipe's EOF. The relay notices at once when it dies (the connection row says so) and, at
exit, waits for it only while it works (uses CPU): never while it merely waits for another writer's lock.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..store.liveness import cpu_ticks

log = logging.getLogger(__name__)

PIPE_SIZE = 1 << 20
STALL_AT_EXIT = 10.0  # seconds without recorder CPU progress before the relay stops waiting for it
WAIT_AT_EXIT = 120.0  # and the most it waits at all; then the recorder finishes alone


def start(config: dict[str, Any], on_exit: Callable[[subprocess.Popen[bytes]], None]) -> subprocess.Popen[bytes]:
    """Start `python -m acp_relay.record.child CONFIG` with non-blocking pipes (its stdin for records, its
    stdout for acknowledgements), and a thread that calls `on_exit(proc)` when it ends. OSError when it
    cannot start."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "acp_relay.record.child", json.dumps(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        process_group=0,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        fcntl.fcntl(proc.stdin.fileno(), 1031, PIPE_SIZE)  # F_SETPIPE_SZ: room for bursts without a switch
    except OSError:
        pass
    os.set_blocking(proc.stdin.fileno(), False)  # our own pipe: the feeder never blocks on it
    os.set_blocking(proc.stdout.fileno(), False)
    threading.Thread(target=_watch, args=(proc, on_exit), name="acp-relay-watch", daemon=True).start()
    return proc


def _watch(proc: subprocess.Popen[bytes], on_exit: Callable[[subprocess.Popen[bytes]], None]) -> None:
    proc.wait()
    on_exit(proc)


def how_it_died(proc: subprocess.Popen[bytes]) -> str:
    try:
        code = proc.wait(1.0)  # a broken pipe is seen a moment before the exit status is there
    except subprocess.TimeoutExpired:
        return f"the recorder (pid {proc.pid}) stopped reading"
    if code < 0:
        how = f"killed by {signal.Signals(-code).name}" if -code in signal.valid_signals() else f"signal {-code}"
    else:
        how = f"exit status {code}"
    return f"the recorder (pid {proc.pid}) died ({how})"


def mark_died(db_path: Path, recorder_pid: int, why: str | None) -> None:
    """The connection row says so at once (status recorder_died); its exit status comes at close."""
    try:
        from ..store import db
        from ..store.liveness import mark_recorder_died

        conn = db.connect(db_path, create=False)
        try:
            mark_recorder_died(conn, os.getpid(), recorder_pid, why)
        finally:
            conn.close()
    except Exception as exc:  # the database is what failed, perhaps: the close says it again
        log.warning(f"cannot mark the connection: {exc}")


def wait_while_working(proc: subprocess.Popen[bytes], feeder: threading.Thread | None) -> bool:
    """Wait for the feeder and the recorder while the recorder uses CPU (a backlog on a busy machine
    drains), but not while it only waits (another process's lock): the relay must exit soon after the
    agent has."""
    start = last_progress = time.monotonic()
    last_cpu = -1
    while time.monotonic() - start < WAIT_AT_EXIT:
        try:
            if feeder is not None and feeder.is_alive():
                feeder.join(0.25)
                raise subprocess.TimeoutExpired(proc.args, 0.25)
            proc.wait(0.25)
            return True
        except subprocess.TimeoutExpired:
            pass
        cpu = cpu_ticks(proc.pid)
        now = time.monotonic()
        if cpu > last_cpu:
            last_cpu, last_progress = cpu, now
        elif now - last_progress > STALL_AT_EXIT:
            return False
    return False
