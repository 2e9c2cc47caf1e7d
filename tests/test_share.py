"""`acp-relay export` and `import`: round trips for each format, other tools' files, bad files, duplicates."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from fixtures.recordings import V1
from helpers import rows
from peers.replay_client import RawClient
from share_files import conductor_trace, devtools_export, v1_bytes
from support.cli import run as cli_run

from acp_relay.protocol.captures import FormatError, detect, read_conductor_trace

S1 = "sess-v1-alpha"
S2 = "sess-v2-beta"


def run(*args: str) -> Result:
    return cli_run(*args)


def frames_of(db: Path, cid: int | None = None) -> list[tuple[Any, ...]]:
    """(direction, ts, raw) of a connection's frames, in order (the newest connection by default)."""
    cid = cid or rows(db, "SELECT max(id) FROM connections")[0][0]
    return rows(db, "SELECT direction, ts, raw FROM frames WHERE connection_id = ? ORDER BY seq", cid)


def export(db: Path, session: str, fmt: str, out: Path, *extra: str) -> Path:
    r = run("export", "--db", str(db), session, "--format", fmt, "-o", str(out), *extra)
    assert r.exit_code == 0, r.output
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    return out


def import_(db: Path, *files: Path, code: int = 0) -> Result:
    r = run("import", "--db", str(db), *map(str, files))
    assert r.exit_code == code, r.output
    return r


# -- round trips ------------------------------------------------------------------------------------------
def test_ndjson_export_import_export_is_the_identical_file(fixture_db: Path, tmp_path: Path) -> None:
    first = export(fixture_db, S1, "ndjson", tmp_path / "a.ndjson")
    lines = [json.loads(x) for x in first.read_bytes().splitlines()]
    assert [x["seq"] for x in lines] == list(range(1, len(lines) + 1))
    assert set(lines[0]) == {"seq", "ts", "direction", "raw"}
    assert any("raw_b64" not in x and x["raw"].endswith("\r") for x in lines)  # the CRLF frame, byte for byte
    db = tmp_path / "in.db"
    import_(db, first)
    second = export(db, S1, "ndjson", tmp_path / "b.ndjson")
    assert second.read_bytes() == first.read_bytes()


def test_ndjson_keeps_bytes_that_are_not_utf8(fixture_db: Path, tmp_path: Path) -> None:
    out = export(fixture_db, S2, "ndjson", tmp_path / "v2.ndjson")
    (bad,) = [json.loads(x) for x in out.read_bytes().splitlines() if b"raw_b64" in x]
    db = tmp_path / "in.db"
    import_(db, out)
    assert (bad["direction"], bad["ts"], b"\xff\xfe not utf-8") in frames_of(db)
    assert export(db, S2, "ndjson", tmp_path / "again.ndjson").read_bytes() == out.read_bytes()


def test_sqlite_export_is_a_standalone_database_that_every_command_reads(fixture_db: Path, tmp_path: Path) -> None:
    out = export(fixture_db, S1, "sqlite", tmp_path / "bug.db")
    assert not Path(str(out) + "-wal").exists()
    assert rows(out, "SELECT DISTINCT session_id FROM sessions") == [(S1,)]
    assert rows(out, "SELECT count(*) FROM frames WHERE session_id IS NOT NULL AND session_id != ?", S1) == [(0,)]
    assert rows(out, "SELECT count(*) FROM stderr") == [(2,)]
    original = rows(fixture_db, "SELECT direction, ts, raw FROM frames WHERE connection_id = 1 ORDER BY seq")
    assert frames_of(out) == original  # the whole connection: its only session and its session-less lines
    for args in (["show", "last"], ["show", "last", "--transcript"], ["stats", "last"], ["info", "last"]):
        r = run(args[0], "--db", str(out), *args[1:])
        assert r.exit_code == 0, r.output
        assert r.output
    # import it, export it again: the same frames (direction, time, bytes)
    db = tmp_path / "in.db"
    import_(db, out)
    assert frames_of(db) == original
    again = export(db, S1, "sqlite", tmp_path / "again.db")
    assert frames_of(again) == original
    assert rows(db, "SELECT status, label FROM connections") == [("imported", "bug.db")]


def test_acp_devtools_round_trip_keeps_frames(fixture_db: Path, tmp_path: Path) -> None:
    out = export(fixture_db, S1, "acp-devtools", tmp_path / "s.json")
    doc = json.loads(out.read_bytes())
    assert doc["version"] == 1 and doc["tool"]["name"] == "acp-relay" and isinstance(doc["exportedAt"], int)
    assert set(doc["session"]) == {"id", "name", "agentCommand", "clientName", "startedAt", "endedAt"}
    assert doc["session"]["clientName"] == "Zed" and doc["session"]["agentCommand"] == "fixture-agent --acp"
    m = doc["messages"]
    assert [x["seq"] for x in m] == list(range(1, len(m) + 1))
    assert {x["direction"] for x in m} == {"editor-to-agent", "agent-to-editor"}
    first = m[0]
    assert (first["kind"], first["method"], first["rpcId"]) == ("request", "initialize", 0)
    assert first["payload"]["method"] == "initialize" and first["timestamp"] == 1767225600001
    answer = next(x for x in m if x["kind"] == "error")
    assert "method" not in answer and answer["rpcId"] == 3
    junk = next(x for x in m if x["kind"] == "unknown")
    assert junk["payload"] is None and junk["parseError"]
    db = tmp_path / "in.db"
    import_(db, out)
    again = json.loads(export(db, S1, "acp-devtools", tmp_path / "again.json").read_bytes())
    strip = [{k: v for k, v in x.items() if k != "seq"} for x in m]
    assert [{k: v for k, v in x.items() if k != "seq"} for x in again["messages"]] == strip
    ours = frames_of(fixture_db, 1)
    assert [(d, round(ts * 1000), raw) for d, ts, raw in frames_of(db)] == [
        (d, round(ts * 1000), r) for d, ts, r in ours
    ]


def test_export_redacts_again_unless_no_redact(tmp_path: Path) -> None:
    """A recording made with --no-redact keeps its secrets; export must not hand them out."""
    from acp_relay.store import db as dbmod
    from acp_relay.store.scripted import ConnectionWriter

    path = tmp_path / "secret.db"
    conn = dbmod.connect(path)
    w = ConnectionWriter(conn, started_at=1_767_225_600.0, argv=["agent"])
    new = {
        "cwd": "/w",
        "mcpServers": [{"name": "gh", "command": "x", "args": [], "env": [{"name": "T", "value": "sk-LEAK"}]}],
    }
    w.feed("c2a", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": new}).encode() + b"\n", 0.1)
    w.feed("a2c", b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s-secret"}}\n', 0.2)
    hello = {"sessionId": "s-secret", "prompt": [{"type": "text", "text": "my code word is swordfish"}]}
    w.feed(
        "c2a",
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": hello}).encode() + b"\n",
        0.3,
    )
    w.close(ended_mono=1.0)
    conn.close()
    for fmt in ("sqlite", "ndjson", "acp-devtools"):
        data = export(path, "s-secret", fmt, tmp_path / f"r.{fmt}", "--redact", "re:swordfish").read_bytes()
        assert b"sk-LEAK" not in data and b"swordfish" not in data, fmt
        assert b"[redacted]" in data
        raw = export(path, "s-secret", fmt, tmp_path / f"raw.{fmt}", "--no-redact").read_bytes()
        assert b"sk-LEAK" in raw
    assert rows(tmp_path / "r.sqlite", "SELECT count(*) FROM frames WHERE redacted = 1") == [(2,)]


def test_export_never_overwrites_and_needs_a_session(fixture_db: Path, tmp_path: Path) -> None:
    (tmp_path / "x.db").write_bytes(b"keep")
    r = run("export", "--db", str(fixture_db), S1, "-o", str(tmp_path / "x.db"))
    assert r.exit_code == 2 and "already exists" in r.output
    assert (tmp_path / "x.db").read_bytes() == b"keep"
    r = run("export", "--db", str(fixture_db), "nope", "--format", "ndjson")
    assert r.exit_code == 2 and "no session matches" in r.output


# -- other tools' files ------------------------------------------------------------------------------------
def test_acp_devtools_file_imports_and_show_stats_replay_work(tmp_path: Path) -> None:
    f = tmp_path / "devtools.json"
    f.write_text(json.dumps(devtools_export(), indent=4))
    db = tmp_path / "in.db"
    r = import_(db, f)
    assert "(acp-devtools)" in r.output and S1 in r.output
    # the editor's bytes as acp-devtools kept them: CR trimmed from the one CRLF line, blank lines dropped
    c2a = b"".join(raw + b"\n" for d, _, raw in frames_of(db) if d == "c2a")
    assert c2a == v1_bytes("c2a")
    assert rows(db, "SELECT protocol_version, json_extract(agent_info, '$.name') FROM connections") == [
        (1, "fixture-agent")
    ]
    show = run("show", "--db", str(db), S1)
    assert show.exit_code == 0 and "session/prompt" in show.output and "result of session/prompt" in show.output
    stats = run("stats", "--db", str(db), S1, "--json")
    assert stats.exit_code == 0 and json.loads(stats.output)
    _replay_answers_a_turn(db, S1, "Fix the failing test in parser.py")


def test_conductor_trace_imports_the_agent_hop(tmp_path: Path) -> None:
    f = tmp_path / "trace.jsons"
    f.write_bytes(conductor_trace())
    db = tmp_path / "in.db"
    r = import_(db, f)
    assert "(conductor-trace)" in r.output and "trace-sess" in r.output
    assert "MCP-over-ACP" in r.stderr and "other hops" in r.stderr
    got = rows(db, "SELECT direction, kind, method, json_extract(details, '$.rebuilt') FROM frames ORDER BY seq")
    assert got[0] == ("c2a", "request", "initialize", 1)
    assert ("a2c", "notification", "session/update", 1) in got
    assert ("a2c", "error", "session/set_mode", 1) in got
    assert not any(m == "tools/list" for _, _, m, _ in got)
    assert rows(db, "SELECT format, frames, rebuilt FROM imports") == [("conductor-trace", len(got), len(got))]
    # ts is seconds since the trace began: kept as the frames' monotonic time, latencies follow
    assert rows(db, "SELECT latency_ms FROM frames WHERE kind = 'response' AND method = 'session/prompt'") == [(30.0,)]
    assert run("show", "--db", str(db), "last").exit_code == 0
    assert run("stats", "--db", str(db), "last").exit_code == 0
    _replay_answers_a_turn(db, "trace-sess", "Greet the conductor")


def test_conductor_trace_without_proxies_keeps_every_acp_event() -> None:
    lines = [
        {"type": "request", "ts": 0.1, "protocol": "acp", "from": "Client", "to": "Agent", "id": 0, "method": "initialize", "params": {}},
        {"type": "response", "ts": 0.2, "from": "Agent", "to": "Client", "id": 0, "is_error": False, "payload": {"protocolVersion": 1}},
        {"type": "notification", "ts": 0.3, "protocol": "acp", "from": "Client", "to": "Agent", "method": "session/cancel", "params": None},
    ]  # fmt: skip
    data = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
    assert detect(data) == "conductor-trace"
    cap = read_conductor_trace(data, 1000.0)
    assert [(c.direction, c.ts, c.raw) for c in cap.frames] == [
        ("c2a", 1000.1, b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}'),
        ("a2c", 1000.2, b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}'),
        ("c2a", 1000.3, b'{"jsonrpc":"2.0","method":"session/cancel"}'),
    ]
    assert not cap.notes


def _replay_answers_a_turn(db: Path, session: str, prompt: str) -> None:
    """`acp-relay replay` serves the imported session: initialize, a new session, the recorded first turn."""
    c = RawClient([sys.executable, "-m", "acp_relay", "replay", "--db", str(db), session, "--speed", "fast"])
    r, _ = c.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}}, 0)
    assert r["result"]["protocolVersion"] == 1
    r, _ = c.request("session/new", {"cwd": "/tmp", "mcpServers": []}, 1)
    sid = r["result"]["sessionId"]
    r, frames = c.request(
        "session/prompt",
        {"sessionId": sid, "prompt": [{"type": "text", "text": prompt}]},
        2,
        on_request=lambda m: (
            {"outcome": {"outcome": "selected", "optionId": "allow-once"}}
            if m["method"] == "session/request_permission"
            else {"content": "x"}
        ),
    )
    assert "stopReason" in r["result"], r
    assert frames  # the recorded updates came back
    assert c.close() == 0


# -- bad files ---------------------------------------------------------------------------------------------
def _assert_nothing_imported(db: Path) -> None:
    if db.exists():
        assert rows(db, "SELECT count(*) FROM connections") == [(0,)]
        assert rows(db, "SELECT count(*) FROM frames") == [(0,)]


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("unknown.txt", b"hello world\n", "unknown format"),
        ("empty.json", b"", "empty"),
        ("list.json", b"[1, 2, 3]\n", "unknown format"),
        ("bad.ndjson", b'{"seq":1,"ts":1.0,"direction":"c2a","raw":"{}"}\n{"seq":2,"ts":oops}\n', "line 2"),
        ("cut.ndjson", b'{"seq":1,"ts":1.0,"direction":"c2a","raw":"{}"}\n{"seq":2,"ts":1.5,"direc', "line 2: the file is truncated"),
        ("dir.ndjson", b'{"seq":1,"ts":1.0,"direction":"up","raw":"{}"}\n', "line 1: direction"),
        ("seq.ndjson", b'{"seq":2,"ts":1.0,"direction":"c2a","raw":"{}"}\n{"seq":1,"ts":1.0,"direction":"c2a","raw":"{}"}\n', "line 2: seq"),
        ("bad.jsons", b'{"type":"request","ts":0.1,"protocol":"acp","from":"Client","to":"Agent","id":0,"method":"x","params":{}}\n{"type":"response","ts":0.2,"from":"Agent","to":"Client","id":0}\n', "line 2: a response needs a payload"),
        ("cut.jsons", b'{"type":"request","ts":0.1,"protocol":"acp","from":"Client","to":"Agent","id":0,"method":"x","params":{}}\n{"type":"resp', "line 2: the file is truncated"),
        ("odd.jsons", b'{"type":"request","ts":0.1,"protocol":"acp","from":"Client","to":"Agent","id":0,"method":"x","params":{}}\n{"type":"trace","ts":0.2,"from":"a","to":"b"}\n', "line 2: type"),
    ],
)  # fmt: skip
def test_bad_files_name_the_file_and_line_and_import_nothing(
    tmp_path: Path, name: str, data: bytes, message: str
) -> None:
    f = tmp_path / name
    f.write_bytes(data)
    db = tmp_path / "in.db"
    r = import_(db, f, code=1)
    assert f"{f}: " in r.stderr and message in r.stderr, r.stderr
    _assert_nothing_imported(db)


def test_bad_acp_devtools_files(tmp_path: Path) -> None:
    good = json.dumps(devtools_export(), indent=4)
    cases = {
        "cut.json": (good[: len(good) // 2], "truncated"),
        "version.json": (good.replace('"version": 1', '"version": 9', 1), "unsupported SessionExport version 9"),
        "direction.json": (good.replace('"agent-to-editor"', '"sideways"', 1), "messages[1].direction"),
        "stamp.json": (good.replace('"timestamp": 1767225600001', '"timestamp": "soon"', 1), ".timestamp"),
    }
    db = tmp_path / "in.db"
    for name, (text, message) in cases.items():
        f = tmp_path / name
        f.write_text(text)
        r = import_(db, f, code=1)
        assert f"{f}: " in r.stderr and message in r.stderr, (name, r.stderr)
    _assert_nothing_imported(db)
    cut = (tmp_path / "cut.json").read_text()
    with pytest.raises(FormatError) as info:
        from acp_relay.protocol.captures import read_devtools

        read_devtools(cut.encode())
    assert info.value.line is not None and info.value.line > 1


def test_truncated_and_damaged_sqlite_files(fixture_db: Path, tmp_path: Path) -> None:
    out = export(fixture_db, S1, "sqlite", tmp_path / "whole.db")
    data = out.read_bytes()
    cut = tmp_path / "cut.db"
    cut.write_bytes(data[: len(data) // 3])
    not_ours = tmp_path / "other.db"
    sqlite3.connect(not_ours).execute("CREATE TABLE t (x)").connection.commit()
    db = tmp_path / "in.db"
    for f in (cut, not_ours):
        r = import_(db, f, code=1)
        assert f"{f}: " in r.stderr, r.stderr
    _assert_nothing_imported(db)


def test_importing_the_same_file_twice_says_so(fixture_db: Path, tmp_path: Path) -> None:
    out = export(fixture_db, S1, "ndjson", tmp_path / "s.ndjson")
    db = tmp_path / "in.db"
    import_(db, out)
    copy = tmp_path / "copy.ndjson"
    copy.write_bytes(out.read_bytes())
    r = import_(db, copy, code=1)
    assert "already imported (connection 1" in r.stderr
    assert rows(db, "SELECT count(*) FROM connections") == [(1,)]
    # several files: the good ones go in, the exit status says one did not
    other = export(fixture_db, S2, "ndjson", tmp_path / "t.ndjson")
    r = import_(db, out, other, code=1)
    assert rows(db, "SELECT count(*) FROM connections") == [(2,)]


def test_import_is_one_transaction_per_file(fixture_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure while writing (after some frames went in) leaves nothing of that file."""
    from acp_relay.store import db as dbm
    from acp_relay.store import imports

    out = export(fixture_db, S1, "ndjson", tmp_path / "s.ndjson")
    db = tmp_path / "in.db"
    dbm.connect(db).close()  # there before: a failed import removes only a database it created itself
    calls = {"n": 0}
    real = imports._flush

    def failing(*args: Any) -> None:
        calls["n"] += 1
        real(*args)
        raise sqlite3.OperationalError("disk I/O error (injected)")

    monkeypatch.setattr(imports, "_flush", failing)
    r = cli_run("import", "--db", str(db), str(out), crash_ok=True)  # exit 5 for it is issue 18's handler
    assert r.exit_code != 0 and calls["n"] == 1
    _assert_nothing_imported(db)
    assert rows(db, "SELECT count(*) FROM imports") == [(0,)]


def test_label_option_and_file_name_label(fixture_db: Path, tmp_path: Path) -> None:
    out = export(fixture_db, S1, "ndjson", tmp_path / "s.ndjson")
    db = tmp_path / "in.db"
    assert run("import", "--db", str(db), str(out), "--label", "from bug #12").exit_code == 0
    assert rows(db, "SELECT label, status FROM connections") == [("from bug #12", "imported")]
    listing = run("show", "--db", str(db))
    assert "[from bug #12]" in listing.output and "imported" in listing.output
    assert V1  # the fixture script the files were made from


def test_a_session_in_two_connections(tmp_path: Path) -> None:
    """Loaded again in a second connection: the bare id is ambiguous (an error naming both), ID@N exports that
    connection's, and -c N a whole connection; the two exports import as two connections."""
    from acp_relay.store import db as dbmod
    from acp_relay.store.scripted import ConnectionWriter

    path = tmp_path / "two.db"
    conn = dbmod.connect(path)
    for n, method in enumerate(("session/new", "session/load")):
        w = ConnectionWriter(conn, started_at=1_767_225_600.0 + 100 * n, argv=["agent"])
        params: dict[str, Any] = {"cwd": "/w", "mcpServers": []}
        if method == "session/load":
            params["sessionId"] = "twice"
        w.feed("c2a", json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode() + b"\n", 0.1)
        result = {"sessionId": "twice"} if method == "session/new" else {}
        w.feed("a2c", json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}).encode() + b"\n", 0.2)
        w.feed("c2a", b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"twice"}}\n', 0.3 + n)
        w.close(ended_mono=2.0)
    conn.close()
    r = run("export", "--db", str(path), "twice", "-o", str(tmp_path / "both.db"))
    assert r.exit_code == 2 and "twice is in connections 1, 2: say twice@N" in r.stderr
    assert not (tmp_path / "both.db").exists()
    first = export(path, "twice@1", "sqlite", tmp_path / "first.db")
    assert rows(first, "SELECT connection_id, count(*) FROM frames GROUP BY connection_id") == [(1, 3)]
    second = tmp_path / "second.db"
    assert run("export", "--db", str(path), "-c", "2", "-o", str(second)).exit_code == 0
    assert rows(second, "SELECT connection_id, count(*) FROM frames GROUP BY connection_id") == [(2, 3)]
    r = run("export", "--db", str(path), "twice@2", "--format", "ndjson")
    assert r.exit_code == 0
    assert [json.loads(x)["ts"] for x in r.stdout.splitlines()] == [1767225700.1, 1767225700.2, 1767225701.3]
    db = tmp_path / "in.db"
    r = import_(db, first, second)
    assert r.output.count("imported ") == 2 and rows(db, "SELECT count(*) FROM imports") == [(2,)]
