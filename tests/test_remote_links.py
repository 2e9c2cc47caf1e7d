"""`run --connect`'s links against scripted servers, for what the SDK scenario does not reach.

Over ws:// the open connection is carried by two blocking threads (transport/ws.py `threaded`): what they
must do that trio's tasks did, against a server written with wsproto (a real WebSocket implementation, not
ours): pongs, the close handshake both ways, a protocol error, lines that cannot be text, a signal. Then,
on every transport, an editor that stops reading: the remote is held back, memory is not spent.
"""

from __future__ import annotations

import signal
import socket
import ssl
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


def serve(
    script: Callable[[Peer, dict[str, Any]], None], tls: ssl.SSLContext | None = None
) -> tuple[int, dict[str, Any], threading.Thread]:
    """A one-connection server running `script` after the handshake; what it saw lands in the dict."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen: dict[str, Any] = {}

    def run() -> None:
        conn, _ = listener.accept()
        listener.close()
        conn.settimeout(20)
        if tls is not None:
            conn = tls.wrap_socket(conn, server_side=True)
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


def relay(db: Path, port: int, scheme: str = "ws") -> subprocess.Popen[bytes]:
    P = subprocess.PIPE
    cmd = [*ACP, "run", "--db", str(db), "--connect", f"{scheme}://127.0.0.1:{port}/acp"]
    return subprocess.Popen([*cmd, "--insecure"] if scheme == "wss" else cmd, stdin=P, stdout=P, stderr=P)


def read_flood(proc: subprocess.Popen[bytes], count: int) -> tuple[int, int]:
    """Read the flood's messages (each checked in order) to the end; (how many, the relay's VmHWM in kB
    halfway through, while it still relays)."""
    assert proc.stdout is not None
    got = peak_kb = 0
    while line := proc.stdout.readline():
        assert line.startswith(b'{"jsonrpc":"2.0","method":"session/update","params":{"x":"%06d' % got)
        got += 1
        if got == count // 2:
            with open(f"/proc/{proc.pid}/status") as f:
                peak_kb = int(next(x for x in f if x.startswith("VmHWM:")).split()[1])
    return got, peak_kb


def self_signed(tmp_path: Path) -> ssl.SSLContext:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    made = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"]
        + ["-keyout", str(key), "-out", str(cert)],
        capture_output=True,
    )
    if made.returncode != 0:
        pytest.skip(f"openssl cannot make a certificate: {made.stderr[:200]!r}")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


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
    def script(peer: Peer, seen: dict[str, Any]) -> None:
        mask = b"mask"
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(b"{}"))
        peer.sock.sendall(b"\x81\x82" + mask + masked)  # a server must never mask its frames
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


@pytest.mark.parametrize("scheme", ["ws", "wss"])
def test_an_editor_that_stops_reading_holds_the_remote_back_not_memory(tmp_path: Path, scheme: str) -> None:
    """ws:// (threads): the writer thread blocks on a full stdout, and it is the socket's reader too.
    wss:// (trio): the queue to the editor's writer is bounded in bytes. Either way the socket is not read
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
    port, seen, server = serve(script, self_signed(tmp_path) if scheme == "wss" else None)
    proc = relay(db, port, scheme)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"go"}\n')
    proc.stdin.flush()
    server.join(2)  # the editor reads nothing for a while: the server must be held back
    assert server.is_alive(), "the relay took the whole flood while the editor read nothing"
    got, peak_kb = read_flood(proc, count)
    proc.wait(timeout=60)
    server.join(10)
    assert got == count and seen.get("close") == 1000, (got, seen)
    assert peak_kb < 80 << 10, f"the relay peaked at {peak_kb} kB while the editor lagged"
    assert rows(db, "SELECT count(*) FROM frames WHERE direction = 'a2c'") == [(count,)]


def _http_flood_server(message: Callable[[int], bytes], count: int) -> tuple[int, dict[str, Any]]:
    """The RFD's endpoint by hand: initialize answered 200 with Acp-Connection-Id, other POSTs 202, and
    the connection's GET stream sends `count` events as fast as TCP lets it, then closes."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen: dict[str, Any] = {}

    def handle(conn: socket.socket) -> None:
        conn.settimeout(20)
        reader = conn.makefile("rb")
        try:
            while line := reader.readline():
                method = line.split(b" ", 1)[0]
                headers = {}
                while (h := reader.readline()) not in (b"\r\n", b""):
                    name, _, value = h.partition(b":")
                    headers[name.strip().lower()] = value.strip()
                body = reader.read(int(headers.get(b"content-length", b"0")))
                if method == b"GET":
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
                    for i in range(count):
                        conn.sendall(b"data: " + message(i) + b"\n\n")
                    seen["sent"] = True
                    return
                if method == b"POST" and b'"initialize"' in body:
                    answer = b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}'
                    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nAcp-Connection-Id: c1\r\n"
                    conn.sendall(head + b"Content-Length: %d\r\n\r\n" % len(answer) + answer)
                else:
                    conn.sendall(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
        except OSError as exc:
            seen["error"] = repr(exc)
        finally:
            conn.close()

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    seen["listener"] = listener
    return listener.getsockname()[1], seen


def test_an_editor_that_stops_reading_holds_an_http_event_stream_back_not_memory(tmp_path: Path) -> None:
    """Streamable HTTP (trio): the link's inbox and the queue to the editor are bounded in bytes, so the
    event stream is not read while the editor lags. 96 MiB of events pass; peak memory stays far below."""
    size, count = 64 << 10, 1536
    pad = b"y" * size

    def message(i: int) -> bytes:
        return b'{"jsonrpc":"2.0","method":"session/update","params":{"x":"%06d%s"}}' % (i, pad)

    port, seen = _http_flood_server(message, count)
    db = tmp_path / "r.db"
    proc = relay(db, port, "http")
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n')
    proc.stdin.flush()
    assert b'"id":0' in proc.stdout.readline()
    try:
        proc.wait(timeout=2)  # the editor reads nothing for a while: the stream must be held back
    except subprocess.TimeoutExpired:
        pass
    assert "sent" not in seen, "the relay took the whole stream while the editor read nothing"
    got, peak_kb = read_flood(proc, count)
    proc.wait(timeout=60)
    seen["listener"].close()
    assert got == count and "error" not in seen, (got, seen)
    assert peak_kb < 80 << 10, f"the relay peaked at {peak_kb} kB while the editor lagged"
    assert rows(db, "SELECT count(*) FROM frames WHERE direction = 'a2c'") == [(count + 1,)]
