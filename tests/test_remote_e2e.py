"""`acp-relay run --connect URL`: the SDK's stdio client spawns the relay; the agent is the SDK's ASGI app
served by hypercorn over WebSocket and Streamable HTTP. Real processes, real sockets, real bytes.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import in_parallel, rows, stream_of
from peers.scenario import NOTES, PEERS, assert_scenario, run_client

ACP = [sys.executable, "-m", "acp_relay"]


class Server:
    """tests/peers/sdk_remote_agent.py as a process: its port, and a stop()."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(PEERS / "sdk_remote_agent.py"), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.strip().isdigit(), (
            f"the server did not start: {line!r} {self.proc.stderr.read() if self.proc.stderr else ''}"
        )
        self.port = int(line)

    def url(self, scheme: str) -> str:
        return f"{scheme}://127.0.0.1:{self.port}/acp"

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def server(sdk_remote_server: Server) -> Server:
    return sdk_remote_server  # conftest's, shared with test_remote_ts


def connect_cmd(db: Path, url: str, *extra: str) -> list[str]:
    return [*ACP, "run", "--db", str(db), "--connect", url, *extra]


def acp(db: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACP, *args, "--db", str(db)], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("scheme", ["ws", "http"])
def test_sdk_conversation_over_a_remote_transport(scheme: str, server: Server, db: Path, tmp_path: Path) -> None:
    """Permission, fs read, two turns, a cancel and a session/load, through `run --connect`: the client
    notices nothing, both directions are recorded, the recording is shown, checks clean and replays."""
    notes = tmp_path / "notes.txt"
    notes.write_text(NOTES)
    secret = "Bearer s3cr3t-token-value"
    cmd = connect_cmd(db, server.url(scheme), "--header", f"Authorization: {secret}", "--header", "X-Trace: t-1")
    result = run_client(cmd, notes, tmp_path)
    assert_scenario(result, NOTES)

    ((transport, endpoint, code, closed_by, argv),) = rows(
        db, "SELECT transport, endpoint, exit_code, closed_by, argv FROM connections"
    )
    assert (transport, endpoint, code, closed_by) == (scheme, server.url(scheme), 0, "editor_eof")
    assert json.loads(argv) == [server.url(scheme)]
    frames = rows(db, "SELECT direction, kind, method, parse, session_id FROM frames ORDER BY seq")
    assert all(f[3] == "ok" for f in frames)
    assert [f[2] for f in frames[:2]] == ["initialize", "initialize"]
    # In causal order: every answer after its request, so each is correlated (an HTTP POST's answer can
    # arrive before the POST returns; the request must still be numbered first).
    assert all(f[2] is not None for f in frames if f[1] in ("response", "error")), frames
    assert [f[2] for f in frames[:4]] == ["initialize", "initialize", "session/new", "session/new"]
    agent_requests = [f[2] for f in frames if f[0] == "a2c" and f[1] == "request"]
    assert agent_requests == ["session/request_permission", "fs/read_text_file"]
    assert {f[2] for f in frames if f[0] == "c2a" and f[1] == "notification"} == {"session/cancel"}
    # Every line the relay wrote to the client is a recorded a2c frame, and each c2a frame is what it sent.
    assert stream_of(db, "a2c").count(b"\n") == len([f for f in frames if f[0] == "a2c"])

    events = rows(db, "SELECT event, method, status, acp_connection_id, acp_session_id, details FROM transport_events")
    names = [e[0] for e in events]
    blob = json.dumps(events)
    assert "s3cr3t" not in blob and "s3cr3t" not in str(rows(db, "SELECT raw FROM frames"))
    assert '["X-Trace","[redacted]"]' in blob.replace('\\"', '"') and "t-1" not in blob  # --header values: never
    if scheme == "ws":
        assert names[:2] == ["config", "ws_open"] and names[-1] == "ws_close"
        assert events[1][2] == 101 and events[1][3] and events[-1][2] == 1000
    else:
        posts = [e for e in events if e[0] == "http" and e[1] == "POST"]
        assert posts[0][2] == 200 and posts[0][3]  # initialize: 200 and its Acp-Connection-Id
        assert all(p[2] == 202 for p in posts[1:]) and len(posts) == len([f for f in frames if f[0] == "c2a"])
        assert {p[4] for p in posts} == {None, "sess-1"}  # Acp-Session-Id on the session-scoped ones
        assert names.count("sse_open") == 2  # the connection's stream, and sess-1's (the SDKs' deviation)
        assert [e[2] for e in events if e[1] == "DELETE"] == [202]
        # the server's affinity cookie is recorded by name, never by value
        assert '["set-cookie","[redacted]"]' in blob.replace('\\"', '"') and "node-7" not in blob

    out = tmp_path / "export.db"
    shown, checked, again, exported = in_parallel(  # read-only, independent: at once
        lambda: acp(db, "show", "last"),
        lambda: acp(db, "check", "last"),
        lambda: run_client([*ACP, "replay", "--db", str(db), "last", "--speed", "fast"], notes, tmp_path),
        lambda: subprocess.run(
            [*ACP, "export", "last", "--db", str(db), "-o", str(out)], capture_output=True, text=True
        ),
    )
    assert shown.returncode == 0 and "session/request_permission" in shown.stdout, shown.stderr
    assert f"   transport: {scheme} {server.url(scheme)}" in shown.stdout  # show marks the transport's events
    marked = [line for line in shown.stdout.splitlines() if line.startswith("   ~ ")]
    assert len(marked) == len(events) and ("101" in marked[1] if scheme == "ws" else "POST 200" in marked[1])
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert again["stop_reasons"] == result["stop_reasons"] and again["agent_text"] == result["agent_text"]
    assert exported.returncode == 0, exported.stderr
    assert rows(out, "SELECT transport FROM connections") == [(scheme,)]
    assert rows(out, "SELECT count(*) FROM transport_events") == [(len(events),)]


def test_cookies_are_kept_for_the_connection(server: Server, db: Path, tmp_path: Path) -> None:
    """The server refuses (409) every request after initialize that lacks its affinity cookie: the whole
    conversation going through is the proof that the jar kept and returned it."""
    notes = tmp_path / "notes.txt"
    notes.write_text(NOTES)
    assert_scenario(run_client(connect_cmd(db, server.url("http")), notes, tmp_path), NOTES)
    statuses = {r[0] for r in rows(db, "SELECT status FROM transport_events WHERE event = 'http'")}
    assert 409 not in statuses


def _relay(db: Path, url: str, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        connect_cmd(db, url, *extra), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


INIT = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}\n'


@pytest.mark.parametrize("scheme", ["ws", "http"])
def test_refused_connections_end_with_a_message(scheme: str, db: Path) -> None:
    """Nothing listens: the relay exits 4 (the peer is gone) with one line, and the attempt is recorded."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = _relay(db, f"{scheme}://127.0.0.1:{port}/acp")
    _, err = proc.communicate(INIT, timeout=30)
    assert proc.returncode == 4, err
    assert err.decode().startswith("acp-relay: run: ") and "Traceback" not in err.decode()
    assert rows(db, "SELECT transport, exit_code, closed_by FROM connections") == [(scheme, 4, "agent_error")]


def _silent_server(behaviour: str) -> tuple[socket.socket, threading.Thread]:
    """A TCP server that accepts and then never answers ("silent") or answers garbage ("garbage")."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            held.append(c)
            if behaviour == "garbage":
                try:
                    c.recv(65536)
                    c.sendall(b"\x00\xffnot http at all\r\n\r\n")
                    c.close()
                except OSError:
                    pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return srv, t


@pytest.mark.parametrize("scheme", ["ws", "http"])
def test_a_remote_that_never_answers_times_out(scheme: str, db: Path) -> None:
    srv, _ = _silent_server("silent")
    try:
        started = time.monotonic()
        proc = _relay(db, f"{scheme}://127.0.0.1:{srv.getsockname()[1]}/acp", "--timeout", "1")
        _, err = proc.communicate(INIT, timeout=30)
    finally:
        srv.close()
    assert proc.returncode == 3, err
    assert time.monotonic() - started < 20
    assert "within 1 s" in err.decode() and err.count(b"\n") == 1
    assert rows(db, "SELECT exit_code FROM connections") == [(3,)]


@pytest.mark.parametrize("scheme", ["ws", "http"])
def test_a_remote_that_sends_garbage_fails_cleanly(scheme: str, db: Path) -> None:
    srv, _ = _silent_server("garbage")
    try:
        proc = _relay(db, f"{scheme}://127.0.0.1:{srv.getsockname()[1]}/acp", "--timeout", "5")
        _, err = proc.communicate(INIT, timeout=30)
    finally:
        srv.close()
    assert proc.returncode == 4, err
    assert err.decode().startswith("acp-relay: run: ") and "Traceback" not in err.decode()


@pytest.mark.parametrize("scheme", ["ws", "http"])
def test_a_remote_that_drops_mid_turn(scheme: str, db: Path, tmp_path: Path) -> None:
    """The server dies while a prompt is being answered: exit 4 within bounded time, the message says a
    request was left unanswered, and every frame up to the drop is kept."""
    s = Server()
    try:
        proc = _relay(db, s.url(scheme))
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(INIT)
        proc.stdin.flush()
        assert b'"id":0' in proc.stdout.readline().replace(b" ", b"")
        proc.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}\n')
        proc.stdin.flush()
        assert b"sess-1" in proc.stdout.readline()
        prompt = {"sessionId": "sess-1", "prompt": [{"type": "text", "text": "slow"}]}
        proc.stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": prompt}).encode() + b"\n"
        )
        proc.stdin.flush()
        assert b"Working slowly" in proc.stdout.readline()
    finally:
        s.stop()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 4, err
    assert b"1 request unanswered" in err, err
    kept = rows(db, "SELECT method FROM frames WHERE direction = 'c2a' ORDER BY seq")
    assert kept == [("initialize",), ("session/new",), ("session/prompt",)]


def test_usage_errors(db: Path) -> None:
    for args, says in [
        (["--connect", "ftp://x/acp"], "ws://, wss://, http:// or https://"),
        (["--connect", "ws://h/acp", "--header", "no colon"], "expected 'Name: value'"),
        (["--connect", "ws://h/acp", "--", "agent"], "not both"),
        (["--header", "A: b", "--", "agent"], "go with --connect"),
        ([], "--connect URL"),
    ]:
        done = subprocess.run([*ACP, "run", "--db", str(db), *args], capture_output=True, text=True, timeout=30)
        assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The SDK agent app over TLS with a self-signed certificate (no CA the relay trusts)."""
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    made = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        capture_output=True,
    )  # fmt: skip
    if made.returncode != 0:
        pytest.skip(f"openssl cannot make a certificate: {made.stderr[:200]!r}")
    s = Server("--certfile", str(cert), "--keyfile", str(key))
    yield s
    s.stop()


@pytest.mark.parametrize("scheme", ["wss", "https"])
def test_tls_is_verified_unless_insecure_which_is_said(
    scheme: str, tls_server: Server, db: Path, tmp_path: Path
) -> None:
    proc = _relay(db, tls_server.url(scheme), "--timeout", "10")
    _, err = proc.communicate(INIT, timeout=30)
    assert proc.returncode == 4 and b"CERTIFICATE_VERIFY_FAILED" in err, err
    notes = tmp_path / "notes.txt"
    notes.write_text(NOTES)
    done = subprocess.run(
        [
            sys.executable,
            str(PEERS / "sdk_client.py"),
            "--file",
            str(notes),
            "--",
            *connect_cmd(db, tls_server.url(scheme), "--insecure"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "--insecure: the certificate of" in done.stderr and "NOT verified" in done.stderr
    assert rows(db, "SELECT transport, exit_code FROM connections ORDER BY id") == [
        (scheme[:-1] if scheme == "wss" else "http", 4),
        ("ws" if scheme == "wss" else "http", 0),
    ]
