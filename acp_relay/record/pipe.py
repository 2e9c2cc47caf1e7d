"""The recorder runs in its own process, fed the relay's chunks through a pipe.

Why a process: parsing and SQLite are Python work that holds the GIL; in the relay's process they delayed
the forwarding threads by milliseconds (round-trip p99 +2 ms). In a child on the other core the relay only
copies each chunk into a pipe. The pipe plus the recorder's bounded queue are the backpressure of last
resort. The child is in its own process group (the editor's Ctrl-C is for the agent) and finishes on the
pipe's EOF: a relay killed with SIGKILL still gets everything it had sent committed, marked interrupted.

Wire format, relay to recorder: a header (code, length, wall time, monotonic time) then `length` bytes.
"""

from __future__ import annotations

import fcntl
import json
import os
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ..protocol.jsonrpc import A2C, C2A, ERR, NET
from ..store.liveness import cpu_ticks

HEADER = struct.Struct("<BIdd")
STREAMS = (C2A, A2C, ERR, NET)  # NET: a remote transport's events, one JSON object each
EOF_BASE = 10  # EOF_BASE + stream index: that stream ended
SPAWNED = 20  # payload: JSON {"agent_pid": N}
CLOSE = 30  # payload: JSON of the connection's final fields
PIPE_SIZE = 1 << 20
STALL_AT_EXIT = 10.0  # seconds without recorder CPU progress before the relay stops waiting for it
WAIT_AT_EXIT = 120.0  # and the most it waits at all; then the recorder finishes alone


class RecorderClient:
    """The relay's end: same put/eof/close surface as Recorder, but each call is one pipe write.

    The child starts only when `launch()` is called (once the editor's first exchange has gone through) or
    when PRELAUNCH_BYTES are waiting: starting a second Python beside the agent would slow the agent's own
    start-up on a small machine. Until then records wait here, in order.
    """

    PRELAUNCH_BYTES = 4 << 20

    def __init__(
        self,
        db_path: Path,
        *,
        argv: list[str],
        cwd: str,
        label: str | None,
        policy: Any,
        warn: Any,
        transport: str = "stdio",
        endpoint: str | None = None,
    ) -> None:
        self.warn = warn
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._lost_frames = 0
        self.dead = False
        self.proc: subprocess.Popen[bytes] | None = None
        self.fd = -1
        self._early: list[list[Any]] | None = []  # records before launch
        self._early_bytes = 0
        self._config = {
            "db": str(db_path),
            "argv": argv,
            "cwd": cwd,
            "label": label,
            "relay_pid": os.getpid(),
            "transport": transport,
            "endpoint": endpoint,
            "policy": {"enabled": policy.enabled, "paths": policy.paths, "regexes": policy.regexes},
        }

    def launch(self) -> None:
        """Start the recorder process and hand it what has waited so far."""
        with self._lock:
            self._launch()

    def _launch(self) -> None:
        early, self._early = self._early, None
        if early is None:
            return
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "acp_relay.record.child", json.dumps(self._config)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                process_group=0,
            )
            assert self.proc.stdin is not None
            self.fd = self.proc.stdin.fileno()
            try:
                fcntl.fcntl(self.fd, 1031, PIPE_SIZE)  # F_SETPIPE_SZ: room for bursts without a context switch
            except OSError:
                pass
        except OSError as exc:
            self._gone(f"cannot start the recorder: {exc}")
        for record in early:
            self._write(record)

    def _gone(self, why: str) -> None:
        if not self.dead:
            self.dead = True
            self.warn(f"acp-relay: {why}; forwarding goes on without recording")

    def _send(self, code: int, payload: bytes, ts: float, mono: float) -> None:
        data = [HEADER.pack(code, len(payload), ts, mono), payload]
        with self._lock:
            if self._early is not None:
                self._early.append(data)
                self._early_bytes += len(payload)
                if self._early_bytes >= self.PRELAUNCH_BYTES:
                    self._launch()
                return
            self._write(data)

    def _write(self, data: list[Any]) -> None:
        """One record into the pipe (the caller holds the lock)."""
        if self.dead:
            if data[0][0] < EOF_BASE:  # the header's first byte is the record's code
                self._lost_frames += bytes(data[1]).count(b"\n")
            return
        try:
            while data:
                n = os.writev(self.fd, data)
                while data and n >= len(data[0]):
                    n -= len(data[0])
                    data.pop(0)
                if data and n:
                    data[0] = memoryview(data[0])[n:]
        except OSError as exc:
            self._gone(f"the recorder stopped ({exc.strerror})")

    def stamp(self) -> tuple[float, float]:
        """(wall, monotonic) now: pumps take it when a chunk is read, and record after forwarding it."""
        return time.time(), time.monotonic() - self.started

    def put(self, stream: str, chunk: bytes, ts: float | None = None, mono: float | None = None) -> None:
        if ts is None or mono is None:
            ts, mono = self.stamp()
        self._send(STREAMS.index(stream), chunk, ts, mono)

    def event(self, fields: dict[str, Any]) -> None:
        """A transport event (a remote connection's HTTP request, SSE stream, WebSocket close): a row of its
        own beside the frames, in read order with them."""
        self._send(STREAMS.index(NET), json.dumps(fields, separators=(",", ":")).encode(), *self.stamp())

    def eof(self, stream: str) -> None:
        self._send(EOF_BASE + STREAMS.index(stream), b"", time.time(), time.monotonic() - self.started)

    @staticmethod
    def _wait_while_working(proc: subprocess.Popen[bytes]) -> bool:
        """Wait for the recorder while it uses CPU (a backlog on a busy machine drains), but not while it
        only waits (another process's lock): the relay must exit soon after the agent has."""
        start = last_progress = time.monotonic()
        last_cpu = -1
        while time.monotonic() - start < WAIT_AT_EXIT:
            try:
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

    def record_spawn(self, agent_pid: int | None) -> None:
        self._send(SPAWNED, json.dumps({"agent_pid": agent_pid}).encode(), time.time(), 0.0)

    def close(self, **final: Any) -> None:
        """Send the final fields, close the pipe, and give the recorder a while to commit."""
        self._send(CLOSE, json.dumps(final).encode(), time.time(), 0.0)
        self.launch()
        if self.proc is None:
            return
        try:
            os.close(self.fd)
        except OSError:
            pass
        self.proc.stdin = None  # closed above
        if not self._wait_while_working(self.proc):
            self.warn("acp-relay: the recorder is still writing; it will finish in the background")
        if self._lost_frames:
            self.warn(f"acp-relay: {self._lost_frames} frames were not recorded")
