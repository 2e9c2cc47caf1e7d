"""Turn boundaries and views from the Prompt Lifecycle page (issue 10), over scripted databases."""

from __future__ import annotations

import json
from pathlib import Path

from scripted_db import build_db, overlapping_prompts
from support.cli import run as cli_run


def run(*args: str) -> str:
    result = cli_run(*args)
    assert result.exit_code == 0, result.output
    return result.output


def test_prompt_sent_while_running_ends_at_its_own_idle_in_transcript_and_stats(tmp_path: Path) -> None:
    db = str(build_db(tmp_path / "r.db", overlapping_prompts()))
    transcript = run("show", "s2", "--transcript", "--db", db)
    heads = [line for line in transcript.splitlines() if line.startswith("=== Turn")]
    assert heads == ["=== Turn 1 · 0.80s · end_turn ===", "=== Turn 2 · 2.00s · end_turn ==="]
    assert "first agent message after 0.30s" in transcript  # turn 1's "working"
    assert "first agent message after 1.50s" in transcript  # turn 2's "second", not turn 1's " done"
    assert "Agent: working done" in transcript and "Agent: second" in transcript
    turns = json.loads(run("stats", "s2", "--json", "--db", db))["turns"]
    assert [(t["duration_ms"], t["first_chunk_ms"], t["stop_reason"]) for t in turns] == [
        (800.0, 300.0, "end_turn"),
        (2000.0, 1500.0, "end_turn"),
    ]


def test_a_fork_is_not_replayed_as_part_of_its_source(tmp_path: Path) -> None:
    """Item 3: sF forked from sA shares parent_session_id with a subagent child, but only a subagent's
    frames belong to the parent's turns."""
    from scripted_db import req, res, text, upd

    from acp_relay.replay import ReplayCore, load_recording

    script = [
        (0.0, "c2a", req(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})),
        (0.1, "a2c", res(0, {"protocolVersion": 1, "agentCapabilities": {}})),
        (0.2, "c2a", req(1, "session/new", {"cwd": "/w", "mcpServers": []})),
        (0.3, "a2c", res(1, {"sessionId": "sA"})),
        (1.0, "c2a", req(2, "session/prompt", {"sessionId": "sA", "prompt": [text("a")]})),
        (1.1, "a2c", upd("sA", sessionUpdate="subagent_update", sessionId="sSub", title="helper")),
        (1.2, "a2c", upd("sSub", sessionUpdate="agent_message_chunk", content=text("sub works"))),
        (1.3, "a2c", upd("sA", sessionUpdate="agent_message_chunk", content=text("from A"))),
        (1.4, "a2c", res(2, {"stopReason": "end_turn"})),
        (2.0, "c2a", req(3, "session/fork", {"sessionId": "sA", "cwd": "/w", "mcpServers": []})),
        (2.1, "a2c", res(3, {"sessionId": "sF"})),
        (2.2, "c2a", req(4, "session/prompt", {"sessionId": "sF", "prompt": [text("f")]})),
        (2.3, "a2c", upd("sF", sessionUpdate="agent_message_chunk", content=text("from the fork"))),
        (2.4, "a2c", res(4, {"stopReason": "end_turn"})),
    ]
    db = build_db(tmp_path / "r.db", script)
    rec = load_recording(db, "sA")
    core = ReplayCore(rec)
    core.receive(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}', 0.0)
    core.receive(b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}', 0.0)
    out = core.receive(
        b'{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"sA","prompt":[{"type":"text","text":"a"}]}}',
        0.0,
    )
    sent = b"\n".join(out)
    assert b"from A" in sent and b"sub works" in sent  # the subagent's frames are part of the turn
    assert b"from the fork" not in sent and b"sF" not in sent


def test_stats_finds_a_v2_idle_inside_a_batch(tmp_path: Path) -> None:
    """Item 8: a v2 agent may batch its notifications; the idle in the array ends the turn."""
    from scripted_db import line, req, res, text, upd, v2_head

    batch = b"[" + line(upd("sb", sessionUpdate="agent_message_chunk", messageId="a1", content=text("hi"))) + b","
    batch += line(upd("sb", sessionUpdate="state_update", state="idle", stopReason="max_tokens")) + b"]"
    script = v2_head("sb") + [
        (1.0, "c2a", req(2, "session/prompt", {"sessionId": "sb", "prompt": [text("go")]})),
        (1.1, "a2c", res(2, {"messageId": "u1"})),
        (1.2, "a2c", upd("sb", sessionUpdate="state_update", state="running")),
        (1.5, "a2c", batch),
    ]
    db = str(build_db(tmp_path / "r.db", script))
    turns = json.loads(run("stats", "sb", "--json", "--db", db))["turns"]
    assert [(t["duration_ms"], t["first_chunk_ms"], t["stop_reason"]) for t in turns] == [(500.0, 500.0, "max_tokens")]
    assert "=== Turn 1 · 0.50s · max_tokens ===" in run("show", "sb", "--transcript", "--db", db)


UNSAFE = ["\u009b", "\u0085", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069"]


def test_c1_and_bidi_controls_are_escaped_in_every_text_view(tmp_path: Path) -> None:
    """Item 9: U+009B (the 8-bit CSI) and the bidi embedding/override/isolate controls never reach the
    terminal raw from the transcript, --frame or the frame list."""
    from scripted_db import req, res, text, upd

    evil = "ok \u009b31mred\u009b0m \u202eevil\u202c \u2066iso\u2069 \u0085nel"
    script = [
        (0.0, "c2a", req(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})),
        (0.1, "a2c", res(0, {"protocolVersion": 1, "agentCapabilities": {}})),
        (0.2, "c2a", req(1, "session/new", {"cwd": "/w", "mcpServers": []})),
        (0.3, "a2c", res(1, {"sessionId": "s\u202eid"})),
        (1.0, "c2a", req(2, "session/prompt", {"sessionId": "s\u202eid", "prompt": [text(evil)]})),
        (1.1, "a2c", upd("s\u202eid", sessionUpdate="agent_message_chunk", content=text(evil))),
        (1.2, "a2c", upd("s\u202eid", sessionUpdate="tool_call", toolCallId="t\u202e1", title=evil)),
        (1.3, "a2c", res(2, {"stopReason": "end_\u202eturn"})),
    ]
    db = str(build_db(tmp_path / "r.db", script))
    views = {
        "transcript": run("show", "s", "--transcript", "--db", db),
        "frame list": run("show", "s", "--db", db),
        "--frame": run("show", "--frame", "6", "--db", db),
        "sessions": run("show", "--db", db),
        "stats": run("stats", "s", "--db", db),
    }
    for name, out in views.items():
        bad = sorted({f"U+{ord(ch):04X}" for ch in out if ch in UNSAFE})
        assert not bad, f"{name} writes {bad} raw"
    assert "Agent: ok \\x9b31mred\\x9b0m \\u202eevil\\u202c \\u2066iso\\u2069 \\x85nel" in views["transcript"]
    assert "\\u009b31mred" in views["--frame"] and "\\u202eevil" in views["--frame"]
    assert "\\x9b31mred" in views["frame list"] and "\\u202eevil" in views["frame list"]


def test_integers_beyond_64_bits_are_stored_and_shown_exactly(tmp_path: Path) -> None:
    """Item 10: ids and numbers keep their exact JSON text; 2**64 and 2**64+1 are different requests; an id
    `true` is not the number 1; the string id "18446744073709551616" stays a string."""
    from helpers import rows
    from scripted_db import line, req, res, upd

    big = 12345678901234567890123
    script = [
        (0.0, "c2a", req(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})),
        (0.1, "a2c", res(0, {"protocolVersion": 1, "agentCapabilities": {}})),
        (0.2, "c2a", req(1, "session/new", {"cwd": "/w", "mcpServers": []})),
        (0.3, "a2c", res(1, {"sessionId": "sbig"})),
        (1.0, "c2a", req(2**64 + 1, "x/b", {"sessionId": "sbig"})),
        (1.1, "c2a", req(2**64, "x/a", {"sessionId": "sbig", "n": big})),
        (1.2, "a2c", res(2**64 + 1, {"n": big})),
        (1.3, "c2a", req(True, "x/c", {"sessionId": "sbig"})),
        (1.4, "c2a", req("18446744073709551616", "x/d", {"sessionId": "sbig"})),
        (1.5, "a2c", res("18446744073709551616", {})),
        (1.6, "a2c", upd("sbig", sessionUpdate="_vendor", n=big, f=1.5)),
    ]
    assert b"18446744073709551617" in line(script[4][2])
    db_path = build_db(tmp_path / "r.db", script)
    db = str(db_path)
    ids = rows(
        db_path, "SELECT method, kind, typeof(rpc_id), request_seq FROM frames WHERE method LIKE 'x/%' ORDER BY seq"
    )
    assert ("x/a", "request", "text", None) in ids and ("x/c", "request", "text", None) in ids
    assert ("x/b", "response", "text", 5) in ids  # answers 2**64+1 (seq 5), not 2**64 (seq 6)
    assert ("x/d", "response", "text", 9) in ids
    assert not [r for r in ids if r[2] in ("real", "integer")]

    records = [json.loads(x) for x in run("show", "sbig", "--json", "--db", db).splitlines()]
    by_method = {(r["method"], r["kind"]): r for r in records}
    assert by_method[("x/a", "request")]["id"] == 2**64
    assert by_method[("x/a", "request")]["message"]["params"]["n"] == big
    assert (
        by_method[("x/b", "response")]["id"] == 2**64 + 1
        and by_method[("x/b", "response")]["message"]["result"]["n"] == big
    )
    assert by_method[("x/c", "request")]["id"] is True
    assert by_method[("x/d", "request")]["id"] == "18446744073709551616"
    raw_json = run("show", "sbig", "--json", "--db", db)
    assert "12345678901234567890123" in raw_json and "e+22" not in raw_json and "e+19" not in raw_json

    listing = run("show", "sbig", "--db", db)
    assert "x/a #18446744073709551616 " in listing and "result of x/b #18446744073709551617" in listing
    assert "x/c #true" in listing and 'x/d #"18446744073709551616"' in listing
    assert "e+19" not in listing and "e+22" not in listing
    transcript = run("show", "sbig", "--transcript", "--db", db)
    assert '"n":12345678901234567890123' in transcript and "e+22" not in transcript
    frame = run("show", "--frame", "6", "--db", db)
    assert "#18446744073709551616" in frame and "12345678901234567890123" in frame and "e+" not in frame


def test_smaller_view_fixes(tmp_path: Path) -> None:
    """Item 11: session_message_chunk has a preview; a message update without content does not preview as
    `""`; the v2 permission preview names its toolCallId; the transcript tells a reported `unknown` state
    from none seen, and shows updates after the final idle outside the last turn."""
    from scripted_db import req, res, text, upd, v2_head

    perm = {
        "sessionId": "s11",
        "title": "Run the tests",
        "subject": {"type": "tool_call", "toolCall": {"toolCallId": "call_9", "title": "pytest"}},
        "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}],
    }
    script = v2_head("s11") + [
        (1.0, "c2a", req(2, "session/prompt", {"sessionId": "s11", "prompt": [text("go")]})),
        (1.1, "a2c", res(2, {"messageId": "u1"})),
        (1.2, "a2c", upd("s11", sessionUpdate="state_update", state="running")),
        (1.3, "a2c", upd("s11", sessionUpdate="session_message_chunk", messageId="sm1", content=text("to the child"))),
        (1.4, "a2c", upd("s11", sessionUpdate="agent_message", messageId="a1", _meta={"k": 1})),
        (1.5, "a2c", req(0, "session/request_permission", perm)),
        (1.6, "c2a", res(0, {"outcome": {"outcome": "selected", "optionId": "ok"}})),
        (1.7, "a2c", upd("s11", sessionUpdate="state_update", state="idle", stopReason="end_turn")),
        (2.0, "a2c", upd("s11", sessionUpdate="agent_message_chunk", messageId="bg", content=text("background note"))),
    ]
    db = str(build_db(tmp_path / "r.db", script))
    listing = run("show", "s11", "--db", db).splitlines()

    def line_of(what: str) -> str:
        return next(x for x in listing if what in x)

    assert line_of("session_message_chunk sm1").endswith('"to the child"')
    assert not line_of("agent_message a1").endswith('""')
    assert "call_9" in line_of("session/request_permission") and '"Run the tests"' in line_of("request_permission")
    transcript = run("show", "s11", "--transcript", "--db", db).splitlines()
    i_turn, i_bg = transcript.index("=== Turn 1 · 0.70s · end_turn ==="), transcript.index("Agent: background note")
    assert "--- after the last turn ended ---" in transcript[i_turn:i_bg]
    assert "State: idle (end_turn)" in transcript

    none_seen = v2_head("s12") + [
        (1.0, "a2c", upd("s12", sessionUpdate="agent_message_chunk", messageId="x", content=text("hi")))
    ]
    unknown = v2_head("s13") + [(1.0, "a2c", upd("s13", sessionUpdate="state_update", state="unknown"))]
    db2 = str(build_db(tmp_path / "r2.db", none_seen, unknown))
    assert "State: not reported" in run("show", "s12", "--transcript", "--db", db2).splitlines()
    assert "State: unknown" in run("show", "s13", "--transcript", "--db", db2).splitlines()
