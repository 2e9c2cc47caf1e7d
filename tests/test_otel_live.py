"""`acp-relay run --otlp URL`: each turn reaches a loopback collector as it ends, from a process of its own;
a collector that is down, refusing or hanging never holds the wire up, and `otel export --pending` sends
later exactly what was not sent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, rows, try_rows, wait_for
from test_otel_export import Receiver, relay

AGENT = [sys.executable, str(ROOT / "tests" / "peers" / "scripted_agent.py"), "jetbrains"]
SID = "jb-session-1"


def line(**msg: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **msg}, separators=(",", ":")).encode() + b"\n"


class Editor:
    """The editor's side of `acp-relay run --otlp URL -- scripted agent`."""

    def __init__(self, db: Path, url: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env["OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"] = "1"
        cmd = [sys.executable, "-m", "acp_relay", "run", "--db", str(db), "--otlp", url, "--", *AGENT]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )

    def ask(self, rid: int, method: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Send a request; the messages up to its answer."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line(id=rid, method=method, params=params))
        self.proc.stdin.flush()
        got = []
        while True:
            msg = json.loads(self.proc.stdout.readline())
            got.append(msg)
            if msg.get("id") == rid and "method" not in msg:
                return got

    def session(self) -> None:
        self.ask(0, "initialize", {"protocolVersion": 1, "clientInfo": {"name": "test-editor", "version": "3"}})
        assert self.ask(1, "session/new", {"cwd": "/work/jb", "mcpServers": []})[-1]["result"]["sessionId"] == SID

    def prompt(self, rid: int, text: str) -> list[dict[str, Any]]:
        return self.ask(rid, "session/prompt", {"sessionId": SID, "prompt": [{"type": "text", "text": text}]})

    def close(self) -> tuple[int, bytes]:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        status = self.proc.wait(timeout=60)
        return status, self.proc.stderr.read()


def names(receiver: Receiver) -> list[str]:
    return [s.name for _, _, s in receiver.spans()]


def test_each_turn_is_sent_as_it_ends_and_equals_the_export(tmp_path: Path) -> None:
    receiver = Receiver()
    db = tmp_path / "live.db"
    try:
        editor = Editor(db, receiver.url)
        editor.session()
        assert editor.prompt(2, "one")[-1]["result"] == {"stopReason": "end_turn"}
        wait_for(lambda: "invoke_agent scripted-agent" in names(receiver), "the first turn at the collector")
        assert f"session {SID}" not in names(receiver)  # the session is still going: its root comes at the end
        editor.prompt(3, "two")
        status, _ = editor.close()
        assert status == 0
        wait_for(lambda: f"session {SID}" in names(receiver), "the session's root span")
        live = sorted(s.span_id.hex() for _, _, s in receiver.spans())
        assert names(receiver).count("invoke_agent scripted-agent") == 2 and len(live) == len(set(live)) == 3
        out = tmp_path / "t.jsonl"
        assert relay("otel", "export", "--db", str(db), SID, "--file", str(out)).returncode == 0
        exported = json.loads(out.read_text())["resourceSpans"][0]["scopeSpans"][0]["spans"]
        assert sorted(s["spanId"] for s in exported) == live  # an export later sends the same spans
        resource = receiver.spans()[0][0]
        assert resource["service.name"] == "scripted-agent" and resource["acp.client.name"] == "test-editor"
        assert try_rows(db, "SELECT count(*) FROM otel_pending") in ([(0,)], [])
    finally:
        receiver.close()


@pytest.mark.parametrize("collector", ["down", "503"])
def test_an_unreachable_collector_leaves_spans_pending_for_otel_export_pending(tmp_path: Path, collector: str) -> None:
    receiver = Receiver()
    url = receiver.url
    if collector == "down":
        receiver.close()
    else:
        receiver.status = 503
    db = tmp_path / "pending.db"
    editor = Editor(db, url)
    editor.session()
    said = editor.prompt(2, "one")
    assert said[0]["params"]["update"]["content"]["text"] == "Hi one"  # the wire as ever
    status, stderr = editor.close()
    assert status == 0 and b"Traceback" not in stderr
    pending = wait_for(lambda: try_rows(db, "SELECT count(*) FROM otel_pending")[0][0] == 2 and 2, "2 pending spans")
    assert pending == 2  # the turn and the session
    want = sorted(r[0] for r in rows(db, "SELECT span_id FROM otel_pending"))
    if collector == "down":
        receiver = Receiver()
    receiver.status = 200
    try:
        r = relay("otel", "export", "--db", str(db), "--pending", "--endpoint", receiver.url)
        assert r.returncode == 0 and r.stdout.startswith("exported 1 session (2 spans)"), (r.stdout, r.stderr)
        ids = [s.span_id.hex() for _, _, s in receiver.spans()]
        assert sorted(ids) == want  # exactly the spans noted pending, each once
        assert rows(db, "SELECT count(*) FROM otel_pending") == [(0,)]
        again = relay("otel", "export", "--db", str(db), "--pending", "--endpoint", receiver.url)
        assert again.returncode == 0 and again.stdout.startswith("exported 0 sessions")
        assert len(receiver.spans()) == 2  # nothing sent twice
    finally:
        receiver.close()


def test_a_hanging_collector_never_holds_up_the_wire(tmp_path: Path) -> None:
    """The collector takes the first request and never answers it: the whole session still goes through
    the relay and the relay exits while that request is still hanging."""
    receiver = Receiver()
    release = threading.Event()
    entered = threading.Event()
    handler = receiver.server.RequestHandlerClass
    original = handler.do_POST  # type: ignore[attr-defined]

    def hang(self: Any) -> None:
        entered.set()
        release.wait(60)
        original(self)

    handler.do_POST = hang  # type: ignore[attr-defined]
    try:
        db = tmp_path / "hang.db"
        editor = Editor(db, receiver.url)
        editor.session()
        editor.prompt(2, "one")
        wait_for(entered.is_set, "the follower's first request")
        for n in range(3, 8):
            assert editor.prompt(n, f"turn {n}")[-1]["result"] == {"stopReason": "end_turn"}
        status, _ = editor.close()
        assert status == 0 and not release.is_set()  # done while the collector still holds the first request
        # counted by their bytes: under load the recorder may store an answer before its request (the pumps
        # queue after forwarding), and the index then leaves its method empty
        answers = "SELECT count(*) FROM frames WHERE kind = 'response' AND CAST(raw AS TEXT) LIKE '%stopReason%'"
        wait_for(lambda: try_rows(db, answers) == [(6,)], "the recorder's last commit")  # it may end after the relay
    finally:
        release.set()
        receiver.close()
