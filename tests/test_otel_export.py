"""`acp-relay otel export` end to end: the real OTLP/HTTP exporter of a real `acp-relay` process sending to a
receiver on loopback that decodes the protobuf payloads with opentelemetry-proto; --file's OTLP JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fixtures.recordings import S1, S2, build
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

RELAY = [sys.executable, "-m", "acp_relay"]


class Receiver:
    """An OTLP/HTTP trace receiver: keeps each decoded request, or answers `status` (503) to all."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.headers: list[dict[str, str]] = []
        self.status = 200
        self.script: list[int] = []  # the statuses of the next requests, in order, before `status` again
        self.refused = 0  # requests answered `status`
        self.stall = 0.0  # seconds a refused request after the first waits before its answer
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status = receiver.script.pop(0) if receiver.script else receiver.status
                if status != 200 or self.path != "/v1/traces":
                    receiver.refused += 1
                    if receiver.stall and receiver.refused > 1:
                        time.sleep(receiver.stall)
                    self.send_response(status if self.path == "/v1/traces" else 404)
                    self.send_header("Retry-After", "0")  # the exporter's next try at once: no backoff to wait
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.requests.append(request)
                receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def spans(self) -> list[tuple[dict[str, Any], dict[str, Any], Any]]:
        """(resource attributes, scope info, span) of every span received."""
        out = []
        for request in self.requests:
            for rs in request.resource_spans:
                resource = {a.key: _value(a.value) for a in rs.resource.attributes}
                for ss in rs.scope_spans:
                    scope = {"name": ss.scope.name, "schema_url": ss.schema_url}
                    out += [(resource, scope, span) for span in ss.spans]
        return out

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


@pytest.fixture(scope="module")
def fixture_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("otel-e2e") / "fixtures.db")


def relay(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    environ["OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"] = "1"  # a refusing collector is given up on quickly
    return subprocess.run([*RELAY, *args], capture_output=True, text=True, env={**environ, **(env or {})}, timeout=120)


def test_a_session_arrives_as_one_trace_tree(fixture_db: Path, receiver: Receiver) -> None:
    r = relay("otel", "export", "--db", str(fixture_db), S1, "--endpoint", receiver.url)
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"exported 1 session (9 spans) to {receiver.url}\n" and r.stderr == ""
    got = receiver.spans()
    spans = {s.span_id: s for _, _, s in got}
    assert len(spans) == 9 and len({s.trace_id for s in spans.values()}) == 1
    roots = [s for s in spans.values() if not s.parent_span_id]
    assert [s.name for s in roots] == [f"session {S1}"]

    def children(span: Any) -> list[str]:
        return sorted(s.name for s in spans.values() if s.parent_span_id == span.span_id)

    turns = sorted(
        (s for s in spans.values() if s.name.startswith("invoke_agent")), key=lambda s: s.start_time_unix_nano
    )
    assert children(roots[0]) == ["invoke_agent fixture-agent", "invoke_agent fixture-agent", "session/set_mode"]
    assert children(turns[0]) == ["execute_tool read"]
    tool = next(s for s in spans.values() if s.name == "execute_tool read")
    assert children(tool) == ["fs/read_text_file", "session/request_permission"]
    assert children(turns[1]) == ["session/request_permission", "terminal/create"]
    attrs = {a.key: _value(a.value) for a in turns[0].attributes}
    assert attrs["gen_ai.operation.name"] == "invoke_agent" and attrs["gen_ai.conversation.id"] == S1
    assert attrs["gen_ai.response.finish_reasons"] == ["end_turn"]
    assert turns[0].kind == 3 and tool.kind == 1  # CLIENT, INTERNAL
    assert turns[0].start_time_unix_nano == 1_767_225_601_000_000_000  # the prompt frame's time
    resource, scope, _ = got[0]
    assert resource["service.name"] == "fixture-agent" and resource["acp.client.name"] == "zed"
    assert scope == {"name": "acp-relay", "schema_url": "https://opentelemetry.io/schemas/1.41.0"}
    assert receiver.headers[0]["content-type"] == "application/x-protobuf"


def test_exporting_again_sends_the_same_ids_and_the_variables_work(fixture_db: Path, receiver: Receiver) -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_EXPORTER_OTLP_HEADERS": "x-team=blue"}
    assert relay("otel", "export", "--db", str(fixture_db), S2, env=env).returncode == 0
    first = sorted(s.span_id for _, _, s in receiver.spans())
    r = relay("otel", "export", "--db", str(fixture_db), S2, "--header", "x-extra=1", env=env)
    assert r.returncode == 0, r.stderr
    ids = [s.span_id for _, _, s in receiver.spans()]
    assert sorted(ids[len(first) :]) == first  # the same spans: a backend keeps them once
    assert receiver.headers[0]["x-team"] == "blue" and receiver.headers[-1]["x-extra"] == "1"
    env["OTEL_SERVICE_NAME"] = "ci-agents"
    assert relay("otel", "export", "--db", str(fixture_db), S2, env=env).returncode == 0
    assert receiver.spans()[-1][0]["service.name"] == "ci-agents"


def test_a_refusing_or_absent_collector_is_a_reported_failure_and_a_retry_duplicates_nothing(
    fixture_db: Path, receiver: Receiver
) -> None:
    receiver.status = 503
    r = relay("otel", "export", "--db", str(fixture_db), "--all", "--endpoint", receiver.url)
    assert r.returncode == 1
    assert r.stderr == (
        f"acp-relay: otel export: session {S1} not sent: the collector answered HTTP 503 Service Unavailable\n"
    )
    assert r.stdout.endswith("; 1 failed, 2 not tried after that\n") and receiver.requests == []
    receiver.status = 200
    r = relay("otel", "export", "--db", str(fixture_db), "--all", "--endpoint", receiver.url)
    assert r.returncode == 0 and r.stdout.startswith("exported 3 sessions"), r.stderr
    ids = [s.span_id for _, _, s in receiver.spans()]
    assert len(ids) == len(set(ids)) == int(r.stdout.split("(")[1].split()[0])
    receiver.close()
    r = relay("otel", "export", "--db", str(fixture_db), S1, "--endpoint", receiver.url)
    assert r.returncode == 1 and "not sent: Connection refused" in r.stderr


def test_the_first_failure_is_the_one_reported(fixture_db: Path, receiver: Receiver) -> None:
    """A collector that refuses, then does not answer the exporter's retry before the deadline: the refusal
    is what the user is told (the retry's timeout, a consequence, replaced it on a loaded machine)."""
    receiver.status, receiver.stall = 503, 1.5
    r = relay("otel", "export", "--db", str(fixture_db), S1, "--endpoint", receiver.url)
    assert receiver.refused >= 2  # the retry came, and was kept waiting past the 1 s deadline
    assert r.returncode == 1
    assert r.stderr == (
        f"acp-relay: otel export: session {S1} not sent: the collector answered HTTP 503 Service Unavailable\n"
    )


def test_each_session_is_told_its_own_failure(fixture_db: Path, receiver: Receiver) -> None:
    """The first session is refused once and taken on the retry; the second is refused for good, with
    another status: that status is the one reported, not the first session's passing refusal."""
    receiver.script, receiver.status = [503, 200], 500
    r = relay("otel", "export", "--db", str(fixture_db), "--all", "--endpoint", receiver.url)
    assert r.returncode == 1 and receiver.refused == 2 and len(receiver.requests) == 1
    assert r.stderr == (
        f"acp-relay: otel export: session {S2} not sent: the collector answered HTTP 500 Internal Server Error\n"
    )


def test_file_writes_otlp_json_lines_with_the_same_spans(fixture_db: Path, receiver: Receiver, tmp_path: Path) -> None:
    out = tmp_path / "traces.jsonl"
    r = relay("otel", "export", "--db", str(fixture_db), "--all", "--file", str(out))
    assert r.returncode == 0 and r.stdout == f"exported 3 sessions (13 spans) to {out}\n", r.stderr
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 2  # one TracesData per session (the third, a subagent child, has no frames)
    spans = [s for line in lines for rs in line["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    assert all(len(s["traceId"]) == 32 and len(s["spanId"]) == 16 for s in spans)
    assert {s["kind"] for s in spans} <= {1, 2, 3} and all(s["startTimeUnixNano"].isdigit() for s in spans)
    relay("otel", "export", "--db", str(fixture_db), "--all", "--endpoint", receiver.url)
    sent = {s.span_id.hex() for _, _, s in receiver.spans()}
    assert {s["spanId"] for s in spans} == sent


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "no session matches 'nope'"),
        (["--since", "soon"], "--since takes an age"),
        ([S1, "--all"], "not both"),
        (["-c", "99"], "no connection 99"),
        ([S1, "--file", "x.json", "--endpoint", "http://127.0.0.1:1"], "no --endpoint or --protocol"),
        ([S1, "--header", "novalue"], "--header takes KEY=VALUE"),
    ],
)
def test_usage_errors_exit_2_with_one_line(fixture_db: Path, args: list[str], message: str) -> None:
    r = relay("otel", "export", "--db", str(fixture_db), *args)
    assert r.returncode == 2 and r.stderr.startswith("acp-relay: ") and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_missing_and_corrupt_databases(tmp_path: Path) -> None:
    r = relay("otel", "export", "--db", str(tmp_path / "none.db"), "--file", str(tmp_path / "x"))
    assert r.returncode == 2 and "no database at" in r.stderr
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    r = relay("otel", "export", "--db", str(bad), "--all", "--file", str(tmp_path / "x"))
    assert r.returncode in (2, 5) and r.stderr.startswith("acp-relay: ") and "Traceback" not in r.stderr


def test_connection_and_since_select_sessions(fixture_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "c.jsonl"
    r = relay("otel", "export", "--db", str(fixture_db), "-c", "2", "--file", str(out))
    assert r.returncode == 0 and r.stdout.startswith("exported 2 sessions"), r.stderr  # the v2 session and its child
    r = relay("otel", "export", "--db", str(fixture_db), "--since", "1d", "--file", str(out))
    assert r.returncode == 0 and "exported 0 sessions" in r.stdout  # the fixtures are from 2026-01-01
    assert r.stderr == "acp-relay: otel export: no sessions to export\n"


def test_the_readme_excerpt_is_what_otel_export_writes(fixture_db: Path, tmp_path: Path) -> None:
    """The OTLP JSON excerpt of docs/otel.md is a span `otel export sess-v1-alpha --file` writes, exactly; the
    trace tree it describes is the one exported."""
    from helpers import doc_page

    readme = doc_page("otel.md")
    block = readme.split("<!-- otel-excerpt -->\n```json\n", 1)[1].split("\n```", 1)[0]
    excerpt = json.loads(block)
    out = tmp_path / "trace.jsonl"
    r = relay("otel", "export", "--db", str(fixture_db), S1, "--file", str(out))
    assert (
        r.stdout == f"exported 1 session (9 spans) to {out}\n"
        and "exported 1 session (9 spans) to trace.jsonl" in readme
    )
    spans = json.loads(out.read_text())["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert excerpt in spans
    named = {s["name"] for s in spans}
    for name in ("session sess-v1-alpha", "invoke_agent fixture-agent", "session/set_mode", "execute_tool read"):
        assert f"`{name}`" in readme and name in named
    assert "semconv v1.41.0" in readme


def test_grpc_export_to_a_loopback_grpc_collector(fixture_db: Path) -> None:
    """--protocol grpc with the optional gRPC exporter (the `grpc` extra; the test extra installs it)."""
    grpc = pytest.importorskip("grpc")
    pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc.trace_exporter")
    from concurrent import futures

    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    got: list[ExportTraceServiceRequest] = []

    class Service(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: ExportTraceServiceRequest, context: Any) -> ExportTraceServiceResponse:
            got.append(request)
            return ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        url = f"http://127.0.0.1:{port}"
        r = relay("otel", "export", "--db", str(fixture_db), S1, "--protocol", "grpc", "--endpoint", url)
        assert r.returncode == 0 and r.stdout == f"exported 1 session (9 spans) to {url}\n", r.stderr
        spans = [s for req in got for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]
        assert len(spans) == 9 and sum(1 for s in spans if not s.parent_span_id) == 1
    finally:
        server.stop(None)
    r = relay("otel", "export", "--db", str(fixture_db), S1, "--protocol", "grpc", "--endpoint", url)
    assert r.returncode == 1 and r.stderr.startswith(
        f"acp-relay: otel export: session {S1} not sent: StatusCode.UNAVAILABLE"
    )
    assert len(r.stderr.splitlines()) == 1


def test_progress_shows_on_a_terminal_only() -> None:
    import io

    from acp_relay.otel.command import Progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty, pipe = Tty(), io.StringIO()
    for stream in (tty, pipe):
        p = Progress(3, stream)
        p.step(1, 10)
        p.step(2, 25)
        p.end()
    assert "session 2/3, 25 spans" in tty.getvalue() and tty.getvalue().endswith("\r\x1b[K")
    assert pipe.getvalue() == ""
    single = Tty()
    Progress(1, single).step(1, 5)
    assert single.getvalue() == ""  # one session: nothing to follow


def test_a_recording_with_its_secrets_exports_none_of_them(tmp_path: Path) -> None:
    """A database that holds secrets as they were sent (recorded with --no-redact, or imported): the OTLP
    file has none of them, --content or not; --no-redact on the export is the one way to get them."""
    from acp_relay.store import db as dbmod
    from acp_relay.store.scripted import ConnectionWriter

    secrets = ["sk-LEAK-env", "LEAK-meta-token", "LEAK-header", "swordfish"]
    path = tmp_path / "secret.db"
    conn = dbmod.connect(path)
    w = ConnectionWriter(conn, started_at=1_767_225_600.0, argv=["agent"])
    meta = {"_meta": {"gateway": {"api_key": secrets[1]}, "headers": {"X-Key": secrets[2]}}}
    servers = [{"name": "gh", "command": "x", "args": [], "env": [{"name": "T", "value": secrets[0]}]}]
    script: list[tuple[str, dict[str, Any]]] = [
        ("c2a", {"id": 0, "method": "initialize", "params": {"protocolVersion": 1, **meta}}),
        ("a2c", {"id": 0, "result": {"protocolVersion": 1, "agentInfo": {"name": "ag"}}}),
        ("c2a", {"id": 1, "method": "session/new", "params": {"cwd": "/w", "mcpServers": servers}}),
        ("a2c", {"id": 1, "result": {"sessionId": "s-secret"}}),
        (
            "c2a",
            {
                "id": 2,
                "method": "session/prompt",
                "params": {
                    "sessionId": "s-secret",
                    "prompt": [{"type": "text", "text": f"the code word is {secrets[3]}"}],
                    **meta,
                },
            },
        ),
        (
            "a2c",
            {
                "method": "session/update",
                "params": {
                    "sessionId": "s-secret",
                    "update": {"sessionUpdate": "tool_call", "toolCallId": "t", "title": "curl", "rawInput": meta},
                },
            },
        ),
        ("a2c", {"id": 2, "result": {"stopReason": "end_turn"}}),
    ]
    for i, (direction, msg) in enumerate(script):
        w.feed(direction, json.dumps({"jsonrpc": "2.0", **msg}).encode() + b"\n", 0.1 * (i + 1))
    w.close(ended_mono=1.0)
    conn.close()
    for extra in ([], ["--content"]):
        out = tmp_path / f"t{len(extra)}.jsonl"
        r = relay(
            "otel", "export", "--db", str(path), "s-secret", "--file", str(out), "--redact", "re:swordfish", *extra
        )
        assert r.returncode == 0, r.stderr
        data = out.read_text()
        assert [s for s in secrets if s in data] == [], extra
    assert "[redacted]" in data  # the prompt's text is there (--content), its secret replaced
    raw = tmp_path / "raw.jsonl"
    assert (
        relay(
            "otel", "export", "--db", str(path), "s-secret", "--file", str(raw), "--content", "--no-redact"
        ).returncode
        == 0
    )
    assert secrets[1] in raw.read_text() and secrets[3] in raw.read_text()


def test_pending_rows_of_a_session_that_is_gone_are_dropped(
    fixture_db: Path, tmp_path: Path, receiver: Receiver
) -> None:
    import shutil
    import sqlite3

    from acp_relay.store import db as dbmod
    from acp_relay.store.otel import mark_pending

    db = tmp_path / "copy.db"
    shutil.copy(fixture_db, db)
    conn = dbmod.connect(db)
    mark_pending(conn, 1, "no-such-session", [("00000000000000aa", "x")], "test", 1.0)
    conn.close()
    r = relay("otel", "export", "--db", str(db), "--pending", "--endpoint", receiver.url)
    assert r.returncode == 0 and r.stdout.startswith("exported 0 sessions") and receiver.requests == []
    check = sqlite3.connect(db)
    assert check.execute("SELECT count(*) FROM otel_pending").fetchone() == (0,)
    check.close()
    r = relay("otel", "export", "--db", str(db), "--pending", S1, "--endpoint", receiver.url)
    assert r.returncode == 2 and "--pending sends what" in r.stderr


def test_each_batch_is_told_its_own_failure() -> None:
    """A session's spans go in batches: the second batch's failure is reported as its own, not as the
    refusal the first batch's retry got past."""
    from opentelemetry.sdk.trace.export import SpanExportResult

    from acp_relay.otel import sdk

    why = sdk.Why()

    class Exporter:
        """The first batch is refused once, then taken; the second is refused with another status."""

        def __init__(self) -> None:
            self.batches: list[int] = []

        def export(self, batch: list[Any]) -> SpanExportResult:
            self.batches.append(len(batch))
            first = len(self.batches) == 1
            if why.message is None:  # what the watched session does: the first failure is kept
                why.message = "HTTP 503" if first else "HTTP 500"
            return SpanExportResult.SUCCESS if first else SpanExportResult.FAILURE

    exporter = Exporter()
    spans: list[Any] = [object()] * (sdk.BATCH + 1)
    assert sdk.send(exporter, spans, why) is False  # type: ignore[arg-type]
    assert exporter.batches == [sdk.BATCH, 1] and why.message == "HTTP 500"


@pytest.mark.parametrize("sessions", [[S1], ["--all"]])
def test_a_refused_connection_is_reported_at_once(
    fixture_db: Path, monkeypatch: pytest.MonkeyPatch, sessions: list[str]
) -> None:
    """A port bound then closed refuses: the first refusal is the answer (it took 8 s of retries, each refused
    again, to say so); only a collector that does not answer uses the timeout. Attempts counted, not timed."""
    import socket

    import urllib3.util.connection
    from support.cli import run as run_cli

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    attempts: list[object] = []
    real = urllib3.util.connection.create_connection

    def counted(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(urllib3.util.connection, "create_connection", counted)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "30")
    r = run_cli("otel", "export", "--db", str(fixture_db), *sessions, "--endpoint", f"http://127.0.0.1:{port}")
    assert r.exit_code == 1 and r.stderr.endswith("not sent: Connection refused\n"), r.stderr
    assert len(attempts) == 1, attempts
