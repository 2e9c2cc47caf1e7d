"""`acp-relay serve --listen HOST:PORT -- AGENT`: the SDK's own WebSocket and Streamable HTTP clients drive
the SDK's stdio agent through it; then the refusals (token, Host, Origin, size, count, idle)."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets.sync.client as wsc
from helpers import rows, try_rows
from peers.scenario import NOTES, PEERS, SDK_AGENT, assert_scenario
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.typing import Origin

ACP = [sys.executable, "-m", "acp_relay"]
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}


class Serve:
    def __init__(self, db: Path, *args: str, agent: list[str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [
                *ACP,
                "serve",
                "--db",
                str(db),
                "--listen",
                "127.0.0.1:0",
                *args,
                "--",
                *(agent or [sys.executable, str(SDK_AGENT)]),
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        assert "listening on http://127.0.0.1:" in line, line + self.proc.stderr.read()
        self.port = int(line.split("127.0.0.1:")[1].split("/")[0])

    def url(self, scheme: str) -> str:
        return f"{scheme}://127.0.0.1:{self.port}/acp"

    def stop(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, err


@pytest.fixture
def served(db: Path) -> Iterator[Serve]:
    s = Serve(db)
    yield s
    if s.proc.poll() is None:
        s.stop()


def sdk_client(url: str, notes: Path, cwd: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(PEERS / "sdk_client.py"), "--file", str(notes), "--connect", url],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_sdk_clients_drive_a_served_agent(served: Serve, db: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text(NOTES)
    for scheme in ("ws", "http"):
        assert_scenario(sdk_client(served.url(scheme), notes, tmp_path), NOTES)
    code, err = served.stop()
    assert code == 128 + signal.SIGTERM and "Traceback" not in err
    conns = rows(db, "SELECT transport, endpoint, frames, exit_code, status FROM connections ORDER BY id")
    assert [(c[0], c[3], c[4]) for c in conns] == [("ws", 0, "ended"), ("http", 0, "ended")]
    assert conns[0][1] == served.url("http") and conns[0][2] == conns[1][2] > 20  # one agent each, the same frames
    for cid in (1, 2):
        methods = [
            r[0]
            for r in rows(
                db, "SELECT method FROM frames WHERE connection_id = ? AND direction = 'a2c' AND kind = 'request'", cid
            )
        ]
        assert methods == ["session/request_permission", "fs/read_text_file"]
    events = rows(db, "SELECT connection_id, event, method, status FROM transport_events")
    assert (1, "ws_open", "GET", 101) in events
    posts = [e for e in events if e[0] == 2 and e[1] == "http" and e[2] == "POST"]
    assert posts[0][3] == 200 and {p[3] for p in posts[1:]} == {202}
    assert (2, "http", "DELETE", 202) in events
    # check judges the HTTP connection's transport too: no error, and the SDK client's deviations from the
    # RFD named as warnings (answers without Acp-Session-Id, a session-scoped stream, HTTP/1.1).
    checked = subprocess.run([*ACP, "check", "last", "--db", str(db)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0 and "\n0 errors" in "\n" + checked.stdout, checked.stdout
    warned = {line.split()[2] for line in checked.stdout.splitlines() if " warning " in line}
    assert warned == {"transport.answer-session-header", "transport.session-stream", "transport.http2"}, warned


def test_a_non_loopback_listener_needs_a_token(db: Path) -> None:
    done = subprocess.run(
        [*ACP, "serve", "--db", str(db), "--listen", "0.0.0.0:0", "--", "cat"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2 and "give --token" in done.stderr and done.stderr.count("\n") == 1


def test_refusals(db: Path) -> None:
    s = Serve(db, "--token", "right-token", "--max-message", "1000", "--max-connections", "2")
    ok = {"Authorization": "Bearer right-token"}
    stack = contextlib.ExitStack()  # the WebSocket clients opened below, closed at the end whatever happens
    try:
        post = {"Content-Type": "application/json", **ok}
        with httpx.Client() as c:
            body = json.dumps(INIT)
            assert c.post(s.url("http"), content=body, headers={"Content-Type": "application/json"}).status_code == 401
            wrong = {"Content-Type": "application/json", "Authorization": "Bearer wrong-token"}
            assert c.post(s.url("http"), content=body, headers=wrong).status_code == 401
            foreign = {**post, "Origin": "http://evil.example"}
            assert c.post(s.url("http"), content=body, headers=foreign).status_code == 403
            other_port = {**post, "Origin": f"http://localhost:{s.port + 1}"}
            assert c.post(s.url("http"), content=body, headers=other_port).status_code == 403
            rebinding = {**post, "Host": f"evil.example:{s.port}"}
            assert c.post(s.url("http"), content=body, headers=rebinding).status_code == 421
            assert c.post(s.url("http"), content=body, headers=ok).status_code == 415  # no Content-Type
            big = json.dumps({**INIT, "params": {"pad": "x" * 2000}})
            assert c.post(s.url("http"), content=big, headers=post).status_code == 413
            assert c.post(s.url("http"), content="[]", headers=post).status_code == 501
            assert c.post(s.url("http"), content="{", headers=post).status_code == 400
            unknown = {**post, "Acp-Connection-Id": "nope"}
            assert (
                c.post(
                    s.url("http"), content=json.dumps({"jsonrpc": "2.0", "method": "x"}), headers=unknown
                ).status_code
                == 404
            )
            assert (
                c.get(
                    s.url("http"), headers={**ok, "Accept": "text/event-stream", "Acp-Connection-Id": "nope"}
                ).status_code
                == 404
            )
            assert c.get(s.url("http"), headers={**ok, "Accept": "application/json"}).status_code == 406
            assert c.delete(s.url("http"), headers=ok).status_code == 400
        with pytest.raises(InvalidStatus) as refused:
            wsc.connect(s.url("ws"), additional_headers={"Authorization": "Bearer wrong"}, open_timeout=10)
        assert refused.value.response.status_code == 401
        with pytest.raises(InvalidStatus) as refused:
            wsc.connect(s.url("ws"), additional_headers=ok, origin=Origin("http://evil.example"), open_timeout=10)
        assert refused.value.response.status_code == 403
        # A flood: the first two connections are served, the third refused with 503 while they last.
        first = stack.enter_context(wsc.connect(s.url("ws"), additional_headers=ok, open_timeout=10))
        second = stack.enter_context(wsc.connect(s.url("ws"), additional_headers=ok, open_timeout=10))
        with pytest.raises(InvalidStatus) as refused:
            wsc.connect(s.url("ws"), additional_headers=ok, open_timeout=10)
        assert refused.value.response.status_code == 503
        # An oversized message closes its connection with 1009 (message too big).
        first.send(json.dumps({**INIT, "params": {"pad": "x" * 2000}}))
        with pytest.raises(ConnectionClosed) as closed:
            first.recv(timeout=10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
        second.send(json.dumps(INIT))
        assert json.loads(second.recv(timeout=20))["id"] == 0  # the other connection is unaffected
        second.close()
        deadline = time.monotonic() + 20
        # (the recorders start after the first exchange: on a busy machine the database may not be there yet)
        query = "SELECT count(*), count(*) FILTER (WHERE status = 'running') FROM connections"
        while not ((got := try_rows(db, query)) and got[0][0] >= 2 and got[0][1] == 0):  # both rows, both ended
            assert time.monotonic() < deadline, try_rows(db, "SELECT id, status FROM connections")
            time.sleep(0.1)
        while True:  # room again, once serve has let the ended connections' slots go (just after their rows)
            try:
                with wsc.connect(s.url("ws"), additional_headers=ok, open_timeout=10):
                    break
            except InvalidStatus as exc:
                assert exc.response.status_code == 503 and time.monotonic() < deadline, exc
                time.sleep(0.1)
    finally:
        stack.close()
        code, err = s.stop()
    assert code == 128 + signal.SIGTERM
    assert "refused" in err and "Traceback" not in err
    closes = rows(db, "SELECT status, details FROM transport_events WHERE event = 'ws_close' ORDER BY id")
    assert [c[0] for c in closes if json.loads(c[1])["by"] == "limit"] == [1009]
    assert "right-token" not in json.dumps(rows(db, "SELECT details FROM transport_events"))


def test_an_idle_connection_is_closed(db: Path) -> None:
    s = Serve(db, "--idle-timeout", "1")
    try:
        with wsc.connect(s.url("ws"), open_timeout=10) as ws, pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=20)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
    finally:
        s.stop()
    assert rows(db, "SELECT closed_by FROM connections") == [("idle",)]


def test_an_agent_that_cannot_start(db: Path) -> None:
    s = Serve(db, agent=["/nonexistent/agent"])
    try:
        with pytest.raises(InvalidStatus) as refused:
            wsc.connect(s.url("ws"), open_timeout=10)
        assert refused.value.response.status_code == 502
    finally:
        code, err = s.stop()
    assert "command not found" in err and "Traceback" not in err
    assert rows(db, "SELECT status, exit_code FROM connections") == [("spawn_failed", 127)]


@contextlib.contextmanager
def proxying(db: Path, upstream: str) -> Iterator[int]:
    """`acp-relay proxy` to UPSTREAM on a free loopback port (yielded); SIGTERM at the end, which must
    exit 128+15 with no traceback."""
    proxy = subprocess.Popen(
        [*ACP, "proxy", "--db", str(db), "--listen", "127.0.0.1:0", "--upstream", upstream],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proxy.stderr is not None
        line = proxy.stderr.readline()
        assert "proxy: listening on http://127.0.0.1:" in line, line
        yield int(line.split("127.0.0.1:")[1].split("/")[0])
    finally:
        proxy.send_signal(signal.SIGTERM)
        _, err = proxy.communicate(timeout=30)
    assert proxy.returncode == 128 + signal.SIGTERM and "Traceback" not in err, err


@pytest.mark.parametrize(("client", "upstream"), [("ws", "http"), ("http", "ws")])
def test_proxy_between_an_sdk_client_and_an_sdk_server(client: str, upstream: str, db: Path, tmp_path: Path) -> None:
    """The SDK's client -> proxy -> the SDK's ASGI agent app, each side on the other transport: the scenario
    passes, and the one recording holds the client's messages, the server's, and both sides' HTTP."""
    from test_remote_e2e import Server

    notes = tmp_path / "notes.txt"
    notes.write_text(NOTES)
    server = Server()
    try:
        with proxying(db, server.url(upstream)) as port:
            assert_scenario(sdk_client(f"{client}://127.0.0.1:{port}/acp", notes, tmp_path), NOTES)
    finally:
        server.stop()
    ((transport, endpoint, code),) = rows(db, "SELECT transport, endpoint, exit_code FROM connections")
    assert (transport, endpoint, code) == (client, server.url(upstream), 0)
    sides = {(r[0], r[1]) for r in rows(db, "SELECT side, event FROM transport_events")}
    assert ("agent", "ws_open" if upstream == "ws" else "sse_open") in sides
    assert ("client", "ws_open" if client == "ws" else "sse_open") in sides
    frames = rows(db, "SELECT direction, method FROM frames WHERE kind = 'request' ORDER BY seq")
    assert [m for d, m in frames if d == "a2c"] == ["session/request_permission", "fs/read_text_file"]
    checked = subprocess.run([*ACP, "check", "last", "--db", str(db)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0 and "\n0 errors" in "\n" + checked.stdout, checked.stdout


def test_the_readme_remote_example_runs_as_shown(tmp_path: Path) -> None:
    """The serve + run --connect example of docs/remote.md, its commands as written (the port and database moved
    to this test's own), and its output as shown."""
    from helpers import doc_page

    section = doc_page("remote.md")
    block = section.split("```console\n", 1)[1].split("```", 1)[0]
    steps = [s for s in block.split("$ ") if s]
    serve_cmd = steps[0].strip().removesuffix("&").strip()
    client_cmd, expected = steps[1].split("\n", 2)[0:2], steps[1].split("\n", 2)[2]
    db = tmp_path / "remote.db"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def ours(cmd: str) -> str:
        cmd = cmd.replace("/tmp/remote.db", str(db)).replace(":8765", f":{port}")
        return cmd.replace("acp-relay ", f"{sys.executable} -m acp_relay ")

    server = subprocess.Popen(["sh", "-c", "exec " + ours(serve_cmd)], stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None and "listening on" in server.stderr.readline()
        done = subprocess.run(["sh", "-c", ours("\n".join(client_cmd))], capture_output=True, text=True, timeout=60)
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected
    assert [r[0] for r in rows(db, "SELECT transport FROM connections ORDER BY id")] == ["ws", "ws"]  # both ends


@pytest.mark.parametrize("scheme", ["ws", "http"])
def test_replay_listen_serves_a_recording_to_a_remote_client(scheme: str, db: Path, tmp_path: Path) -> None:
    """A stdio session recorded through `run`, then served by `replay --listen` to the SDK's own remote
    client: the same turns come back (permission asked, file read, the cancel honoured)."""
    from helpers import relay_cmd
    from peers.scenario import run_client

    notes = tmp_path / "notes.txt"
    notes.write_text(NOTES)
    first = run_client(relay_cmd(db, sys.executable, str(SDK_AGENT)), notes, tmp_path)
    before = rows(db, "SELECT count(*) FROM frames")
    proc = subprocess.Popen(
        [*ACP, "replay", "last", "--db", str(db), "--speed", "fast", "--listen", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "replay: listening on http://127.0.0.1:" in line, line
        port = int(line.split("127.0.0.1:")[1].split("/")[0])
        again = sdk_client(f"{scheme}://127.0.0.1:{port}/acp", notes, tmp_path)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert again["stop_reasons"] == first["stop_reasons"] and again["agent_text"] == first["agent_text"]
    assert again["permission_requests"] == 1 and again["file_reads"] == 1
    assert proc.returncode == 128 + signal.SIGTERM and "Traceback" not in err
    assert rows(db, "SELECT count(*) FROM frames") == before  # replay records nothing


def test_replay_listen_refuses_a_missing_session_before_listening(db: Path) -> None:
    """Before: `replay nosuch --listen` listened anyway and each client's connection failed later."""
    from helpers import relay_cmd

    assert subprocess.run(relay_cmd(db, "cat"), input=b"", capture_output=True, timeout=60).returncode == 0
    for address in (["nosuch"], ["-c", "9"]):
        out = subprocess.run(
            [*ACP, "replay", *address, "--db", str(db), "--listen", "127.0.0.1:0"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert out.returncode == 2 and "listening" not in out.stderr, out.stderr
        assert out.stderr.startswith("acp-relay: replay: ") and out.stderr.count("replay:") == 1, out.stderr
