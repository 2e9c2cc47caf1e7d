"""`run --connect ws://`'s threaded path (transport/ws.py `threaded`): what its two blocking threads must do
that trio's tasks did, against a scripted server written with wsproto (a real WebSocket implementation,
not ours): pongs, the close handshake both ways, a protocol error, lines that cannot be text, a signal,
and an editor that stops reading (memory bounded by TCP back-pressure and the recorder queue).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import rows
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    CloseConnection,
    Event,
    Message,
    Ping,
    Pong,
    Request,
    TextMessage,
)

ACP = [sys.executable, "-m", "acp_relay"]
NOTE = '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{}}}'
REQ = b'{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}\n'


class Peer:
    """One accepted connection, seen through wsproto: events in, events out."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.ws, self.queue = sock, WSConnection(ConnectionType.SERVER), list[Event]()

    def next(self) -> Event | None:
        while not self.queue:
            data = self.sock.recv(1 << 16)
            if not data:
                return None
            self.ws.receive_data(data)
            self.queue += list(self.ws.events())
        return self.queue.pop(0)

    def until(self, kind: type) -> Any:
        while (event := self.next()) is not None:
            if isinstance(event, kind):
                return event
        raise AssertionError(f"the connection ended before a {kind.__name__}")

    def send(self, event: Event) -> None:
        self.sock.sendall(self.ws.send(event))


def serve(script: Callable[[Peer, dict[str, Any]], None]) -> tuple[int, dict[str, Any], threading.Thread]:
    """A one-connection server running `script` after the handshake; what it saw lands in the dict."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen: dict[str, Any] = {}

    def run() -> None:
        conn, _ = listener.accept()
        listener.close()
        conn.settimeout(20)
        peer = Peer(conn)
        try:
            peer.until(Request)
            peer.send(AcceptConnection())
            script(peer, seen)
        except Exception as exc:  # reported by the test, which reads `seen`
            seen["error"] = repr(exc)
        finally:
            conn.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return listener.getsockname()[1], seen, t


def relay(db: Path, port: int) -> subprocess.Popen[bytes]:
    P = subprocess.PIPE
    cmd = [*ACP, "run", "--db", str(db), "--connect", f"ws://127.0.0.1:{port}/acp"]
    return subprocess.Popen(cmd, stdin=P, stdout=P, stderr=P)


def test_pings_answered_lines_that_cannot_be_text_dropped_and_the_servers_close_answered(tmp_path: Path) -> None:
    def script(peer: Peer, seen: dict[str, Any]) -> None:
        peer.send(Ping(payload=b"are you there"))
        seen["pong"] = peer.until(Pong).payload
        peer.send(TextMessage(data=NOTE))
        seen["message"] = peer.until(Message).data  # the editor's first line was not UTF-8: not sent
        peer.send(TextMessage(data='{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}}'))
        peer.send(CloseConnection(code=1000, reason="done"))
        seen["close"] = peer.until(CloseConnection).code

    db = tmp_path / "r.db"
    port, seen, server = serve(script)
    proc = relay(db, port)
    assert proc.stdin is not None and proc.stdout is not None
    first = proc.stdout.readline()
    assert first == NOTE.encode() + b"\n", (proc.communicate(timeout=30), seen)  # the ping answered on the way
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"\xff\xfe"}\n' + REQ)  # two lines in one write
    proc.stdin.flush()
    assert b'"id":7' in proc.stdout.readline()
    proc.wait(timeout=30)  # stdin still open: the server's close ends the connection
    assert proc.stderr is not None
    err = proc.stderr.read()
    server.join(10)
    assert "error" not in seen, seen
    assert seen["pong"] == b"are you there" and seen["message"] == REQ[:-1].decode()
    assert seen["close"] == 1000  # the relay answered the server's close with its code
    assert proc.returncode == 0, err
    assert rows(db, "SELECT exit_code, closed_by FROM connections") == [(0, "agent_exit")]
    dropped = rows(db, "SELECT details FROM transport_events WHERE event = 'dropped'")
    assert len(dropped) == 1 and "invalid UTF-8" in dropped[0][0]
    frames = rows(db, "SELECT direction, raw FROM frames ORDER BY seq")  # every line recorded, in wire order
    assert frames == [
        ("a2c", NOTE.encode()),
        ("c2a", b'{"jsonrpc":"2.0","method":"\xff\xfe"}'),
        ("c2a", REQ[:-1]),
        ("a2c", b'{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}}'),
    ]


def test_a_frame_that_breaks_the_protocol_closes_with_1002(tmp_path: Path) -> None:
    from acp_relay.protocol.wsframes import TEXT, encode

    def script(peer: Peer, seen: dict[str, Any]) -> None:
        peer.sock.sendall(encode(TEXT, b"{}", b"mask"))  # a server must never mask its frames
        seen["close"] = peer.until(CloseConnection).code

    db = tmp_path / "r.db"
    port, seen, server = serve(script)
    proc = relay(db, port)
    proc.wait(timeout=30)  # stdin left open: only the server's frame can end this
    assert proc.stderr is not None
    err = proc.stderr.read()
    server.join(10)
    assert seen.get("close") == 1002, seen
    assert proc.returncode == 4, err
    assert err.decode().startswith("acp-relay: run: ") and "WebSocket protocol" in err.decode()
    assert "Traceback" not in err.decode()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_closes_the_connection_and_exits_128_plus_n(tmp_path: Path, signum: int) -> None:
    answered = threading.Event()

    def script(peer: Peer, seen: dict[str, Any]) -> None:
        seen["message"] = peer.until(Message).data
        peer.send(TextMessage(data='{"jsonrpc":"2.0","id":7,"result":{}}'))
        answered.set()
        seen["close"] = peer.until(CloseConnection).code
        peer.send(CloseConnection(code=1000))

    db = tmp_path / "r.db"
    port, seen, server = serve(script)
    proc = relay(db, port)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(REQ)
    proc.stdin.flush()
    assert b'"id":7' in proc.stdout.readline()
    assert answered.wait(10)
    proc.send_signal(signum)  # both threads are blocked in reads: stdin's and the socket's
    _, err = proc.communicate(timeout=30)
    server.join(10)
    assert proc.returncode == 128 + signum, err
    assert seen.get("close") == 1000, seen
    name = signal.Signals(signum).name
    assert rows(db, "SELECT exit_code, closed_by FROM connections") == [(128 + signum, f"signal:{name}")]


def test_an_editor_that_stops_reading_holds_the_remote_back_not_memory(tmp_path: Path) -> None:
    """The writer thread blocks on a full stdout; the reader is that thread, so the socket is not read
    and TCP holds the server back. 96 MiB of messages pass while the editor sleeps; the relay's peak
    memory stays far below that, and every message arrives and is recorded."""
    size, count = 64 << 10, 1536
    body = '{"jsonrpc":"2.0","method":"session/update","params":{"x":"%s"}}'

    def script(peer: Peer, seen: dict[str, Any]) -> None:
        peer.until(Message)  # the editor's go
        for i in range(count):
            peer.send(TextMessage(data=body % (f"{i:06d}" + "y" * size)))
        peer.send(CloseConnection(code=1000))
        seen["close"] = peer.until(CloseConnection).code

    db = tmp_path / "r.db"
    port, seen, server = serve(script)
    proc = relay(db, port)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"go"}\n')
    proc.stdin.flush()
    server.join(2)  # the editor reads nothing for a while: the server must be held back
    assert server.is_alive(), "the relay took the whole flood while the editor read nothing"
    got = 0
    while line := proc.stdout.readline():
        assert line.startswith(b'{"jsonrpc":"2.0","method":"session/update","params":{"x":"%06d' % got)
        got += 1
        if got == count // 2:
            with open(f"/proc/{proc.pid}/status") as f:
                peak_kb = int(next(x for x in f if x.startswith("VmHWM:")).split()[1])
    proc.wait(timeout=60)
    server.join(10)
    assert got == count and seen.get("close") == 1000, (got, seen)
    assert peak_kb < 80 << 10, f"the relay peaked at {peak_kb} kB while the editor lagged"
    assert rows(db, "SELECT count(*) FROM frames WHERE direction = 'a2c'") == [(count,)]
