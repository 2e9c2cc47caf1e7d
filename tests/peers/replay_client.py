"""Test peers for `acp-relay replay`: a raw JSON-RPC client, and a scripted agent that records fixtures.

A fixture (tests/fixtures/replay_*.acp) is a conversation, one frame per line: `c2a ` or `a2c ` and then the
frame's exact bytes. `record_script` plays it through the real `acp-relay run`: the client side writes the
`c2a` lines, and ``python replay_client.py agent FIXTURE`` (the agent side) answers each with the `a2c` lines
that follow it. Each side waits for the other's lines, so the database holds exactly the fixture, in order.
Lines starting with `#` and blank lines are comments.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
TIMEOUT = 20.0  # per expected line; reached only when something is broken


def read_fixture(path: Path) -> list[tuple[str, bytes]]:
    out = []
    for line in path.read_bytes().split(b"\n"):
        if not line.strip() or line.startswith(b"#"):
            continue
        direction, _, raw = line.partition(b" ")
        assert direction in (b"c2a", b"a2c"), line
        out.append((direction.decode(), raw))
    return out


def script_agent(fixture: Path) -> int:
    """The agent side of a fixture: wait for each c2a line, then write the a2c lines after it."""
    frames = read_fixture(fixture)
    stdin = sys.stdin.buffer
    for direction, raw in frames:
        if direction == "c2a":
            got = stdin.readline()
            if got.rstrip(b"\n") != raw:
                print(f"script agent: expected {raw[:80]!r}, got {got[:80]!r}", file=sys.stderr)
                return 1
        else:
            sys.stdout.buffer.write(raw + b"\n")
            sys.stdout.buffer.flush()
    stdin.read()  # until the editor closes us
    return 0


class RawClient:
    """Drive an agent command line by line: exact bytes out, exact lines back, with timeouts."""

    def __init__(self, cmd: list[str], **kw: Any) -> None:
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.stderr: list[bytes] = []
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines.put), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr.append), daemon=True).start()

    @staticmethod
    def _pump(stream: Any, sink: Callable[[Any], None]) -> None:
        for line in iter(stream.readline, b""):
            sink(line)
        sink(None)

    def send(self, frame: bytes | dict) -> None:
        raw = frame if isinstance(frame, bytes) else json.dumps(frame).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw + b"\n")
        self.proc.stdin.flush()

    def recv(self, timeout: float = TIMEOUT) -> bytes:
        """The next line from the agent, without its newline (fails the test on EOF or timeout)."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line within {timeout}s; stderr: {self.log()}") from None
        if line is None:
            self.lines.put(None)
            raise AssertionError(f"the agent closed stdout; stderr: {self.log()}")
        assert line.endswith(b"\n"), line
        return line[:-1]

    def request(
        self, method: str, params: Any, rid: Any, *, on_request: Callable[[dict], Any] | None = None
    ) -> tuple[dict, list[bytes]]:
        """Send a request; return (its response, the raw frames that came before it).

        Agent requests met on the way are answered with on_request(message) (a result), by default {}.
        """
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return self.until_response(rid, on_request=on_request)

    def until_response(self, rid: Any, *, on_request: Callable[[dict], Any] | None = None) -> tuple[dict, list[bytes]]:
        def is_it(msg: Any) -> bool:
            return (
                isinstance(msg, dict)
                and "method" not in msg
                and "id" in msg
                and type(msg["id"]) is type(rid)
                and msg["id"] == rid
            )

        frames = self.collect(is_it, on_request=on_request)
        return json.loads(frames[-1]), frames[:-1]

    def collect(self, stop: Callable[[Any], bool], *, on_request: Callable[[dict], Any] | None = None) -> list[bytes]:
        """Frames up to and including the first for which stop(message) is true.

        Agent requests on the way are answered with on_request(message) (a result; default {}).
        """
        frames: list[bytes] = []
        while True:
            raw = self.recv()
            msg = json.loads(raw)  # stdout carries JSON-RPC frames only
            frames.append(raw)
            if stop(msg):
                return frames
            if isinstance(msg, dict) and "method" in msg and "id" in msg:
                result = on_request(msg) if on_request else {}
                self.send({"jsonrpc": "2.0", "id": msg["id"], "result": result})

    def log(self) -> str:
        return b"".join(line for line in self.stderr if line).decode("utf-8", "replace")

    def close(self, timeout: float = TIMEOUT) -> int:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"the agent did not exit on stdin EOF; stderr: {self.log()}") from None


def record_script(db: Path, fixture: Path, label: str = "fixture") -> None:
    """Record a fixture into `db` through `acp-relay run` (see the module docstring)."""
    cmd = [
        sys.executable,
        "-m",
        "acp_relay",
        "run",
        "--db",
        str(db),
        "--label",
        label,
        "--no-redact",
        "--",
        sys.executable,
        str(HERE),
        "agent",
        str(fixture),
    ]
    client = RawClient(cmd, env={**os.environ, "PYTHONPATH": str(HERE.parent.parent.parent)})
    for direction, raw in read_fixture(fixture):
        if direction == "c2a":
            client.send(raw)
        else:
            got = client.recv()
            assert got == raw, (got, raw)
    assert client.close() == 0, client.log()


if __name__ == "__main__":
    if sys.argv[1:2] == ["agent"]:
        sys.exit(script_agent(Path(sys.argv[2])))
    print("usage: replay_client.py agent FIXTURE", file=sys.stderr)
    sys.exit(2)
