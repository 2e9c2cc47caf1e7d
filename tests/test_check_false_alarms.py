"""Traffic real editors and agents send that `check` once reported: each a keeping test (issue 20), with the
nearby broken shape still reported so the fix cannot be "report nothing"."""

from __future__ import annotations

import uuid
from pathlib import Path

import orjson
import pytest
from check_helpers import TEXT, Script, record
from test_check_cli import acp

from acp_relay.protocol.check.lifecycle import CROSSING_WINDOW
from acp_relay.protocol.jsonrpc import A2C, C2A


def early_updates(version: int, answer_names_it: bool) -> Script:
    """WebStorm with goose: two session/update for a fresh random session id, then the session/new answer."""
    s = Script(version)
    sid = str(uuid.uuid4())
    params: dict[str, object] = {"cwd": "/home/dev/project"}
    if version == 1:
        params["mcpServers"] = []
    rid = s.request(C2A, "session/new", params)
    command = {"name": "plan", "description": "x"} | ({"type": "command"} if version == 2 else {})  # v2: tagged
    s.update(sid, sessionUpdate="available_commands_update", availableCommands=[])
    s.update(sid, sessionUpdate="available_commands_update", availableCommands=[command])
    s.respond(A2C, rid, {"sessionId": sid if answer_names_it else str(uuid.uuid4())})
    return s


@pytest.mark.parametrize("version", [1, 2])
def test_updates_before_the_session_new_answer_are_fine(version: int) -> None:
    s = early_updates(version, answer_names_it=True)
    assert s.check() == []


@pytest.mark.parametrize("version", [1, 2])
def test_updates_for_a_session_the_answer_never_names_are_still_reported(version: int) -> None:
    found = early_updates(version, answer_names_it=False).check()
    assert [(f.rule, f.frame) for f in found] == [("protocol.unknown-session", 4)]  # the first update's frame


def test_early_updates_with_no_answer_yet_are_judged_when_the_recording_ends() -> None:
    s = Script(1)
    s.request(C2A, "session/new", {"cwd": "/tmp", "mcpServers": []})
    s.update("sess-x", sessionUpdate="available_commands_update", availableCommands=[])
    assert s.rules(ended=False) == set()  # live: the answer may still name it
    assert "protocol.unknown-session" in s.rules(ended=True)


def crossing(version: int, gap_ms: float, reason: str = "end_turn") -> Script:
    s = Script(version)
    sid = s.new_session()
    if version == 1:
        rid = s.prompt_request(sid)
        s.update(sid, sessionUpdate="agent_message_chunk", content={"type": "text", "text": "done"})
        s.notify(C2A, "session/cancel", {"sessionId": sid})
        s.after(gap_ms).respond(A2C, rid, {"stopReason": reason})
        return s
    s.open_turn(sid)
    s.update(sid, sessionUpdate="agent_message_chunk", messageId="a1", content={"type": "text", "text": "done"})
    s.notify(C2A, "session/cancel", {"sessionId": sid})
    s.after(gap_ms).state(sid, "idle", stopReason=reason)
    return s


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("gap_ms", [0.0, 1.5, 5.0, CROSSING_WINDOW * 1000])
def test_a_turn_ending_as_the_cancel_is_sent_is_a_crossing(version: int, gap_ms: float) -> None:
    found = crossing(version, gap_ms).check()
    assert [(f.rule, f.severity) for f in found] == [("lifecycle.cancel-crossed", "warning")]
    assert f"{gap_ms:.1f} ms after session/cancel" in found[0].message


@pytest.mark.parametrize("version", [1, 2])
def test_a_turn_ending_long_after_the_cancel_is_still_an_error(version: int) -> None:
    rule = "lifecycle.cancel-response" if version == 1 else "lifecycle.cancel-idle"
    found = crossing(version, CROSSING_WINDOW * 1000 + 50).check()
    assert [(f.rule, f.severity) for f in found] == [(rule, "error")]


def test_the_crossing_window_comes_from_the_recording(tmp_path: Path) -> None:
    """Through the store: the recorder's clock reaches the engine (check and show --frame agree)."""
    db = str(record(crossing(2, 1.5), tmp_path / "r.db"))
    out = acp("check", "--db", db, "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    (finding,) = [orjson.loads(line) for line in out.stdout.splitlines()]
    assert finding["rule"] == "lifecycle.cancel-crossed" and "1.5 ms" in finding["message"]
    shown = acp("show", "--db", db, "--frame", str(finding["frame"]))
    assert "lifecycle.cancel-crossed" in shown.stdout and "lifecycle.cancel-idle" not in shown.stdout


@pytest.mark.parametrize("method", ["$/progress", "$/vendor.dev/heartbeat", "$/cancel_request"])
def test_protocol_level_notifications_may_be_ignored(method: str) -> None:
    s = Script(2)
    s.new_session()
    s.notify(A2C, method, {"requestId": 1})
    s.notify(C2A, method, {"requestId": 1})
    assert s.check() == []


def test_an_unknown_dollar_request_still_needs_an_answer_and_is_reported() -> None:
    s = Script(2)
    s.new_session()
    s.request(C2A, "$/inspect", {})
    assert s.rules() == {"schema.unknown-method", "protocol.unanswered"}


def test_every_frame_before_initialize_completes_is_reported() -> None:
    """The prompt after a reported session/new is reported too (the summary groups them by rule)."""
    s = Script(1, init=False)
    init = s.request(C2A, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    new = s.send(C2A, {"jsonrpc": "2.0", "id": 90, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}})
    prompt = s.send(
        C2A, {"jsonrpc": "2.0", "id": 91, "method": "session/prompt", "params": {"sessionId": "s", "prompt": [TEXT]}}
    )
    s.respond(A2C, init, {"protocolVersion": 1, "agentCapabilities": {}, "agentInfo": {"name": "a", "version": "1"}})
    s.respond(A2C, 90, {"sessionId": "s"})
    s.respond(A2C, 91, {"stopReason": "end_turn"})
    frames = [f.frame for f in s.check() if f.rule == "protocol.initialize-first"]
    assert frames == [new, prompt]


@pytest.mark.parametrize("hint", [1, 2, None])
def test_every_frame_before_initialize_is_reported_with_the_stored_version_too(hint: int | None) -> None:
    """With the version the recorder stored (checked as that version once a frame came before initialize), the
    prompt after a reported session/new is named as well, and so is each frame of either side after it, until
    the exchange completes; a `$/cancel_request` alone is not an error (issue 30 item 17)."""
    s = Script(hint or 2, init=False)
    new = s.send(C2A, {"jsonrpc": "2.0", "id": 90, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}})
    s.respond(A2C, 90, {"sessionId": "s"})
    prompt = s.send(
        C2A, {"jsonrpc": "2.0", "id": 91, "method": "session/prompt", "params": {"sessionId": "s", "prompt": [TEXT]}}
    )
    s.notify(C2A, "$/cancel_request", {"requestId": 91})
    cancel = s.notify(C2A, "session/cancel", {"sessionId": "s"})
    update = s.notify(A2C, "session/update", {"sessionId": "s", "update": {"sessionUpdate": "plan", "entries": []}})
    s.respond(A2C, 91, {"stopReason": "cancelled"})
    init = s.request(C2A, "initialize", {"protocolVersion": hint or 2, "clientCapabilities": {}})
    s.respond(
        A2C, init, {"protocolVersion": hint or 2, "agentCapabilities": {}, "agentInfo": {"name": "a", "version": "1"}}
    )
    after = s.send(
        C2A, {"jsonrpc": "2.0", "id": 92, "method": "session/prompt", "params": {"sessionId": "s", "prompt": [TEXT]}}
    )
    s.respond(A2C, 92, {"stopReason": "end_turn"})
    frames = [f.frame for f in s.check(version_hint=hint) if f.rule == "protocol.initialize-first"]
    assert frames == [new, prompt, cancel, update] and after not in frames


def test_a_request_in_flight_in_a_live_recording_is_not_unanswered(tmp_path: Path) -> None:
    s = Script(2)
    sid = s.new_session()
    s.request(C2A, "session/list", {})
    s.open_turn(sid)
    assert "protocol.unanswered" not in s.rules(ended=False)
    assert "protocol.unanswered" in s.rules(ended=True)
    live = acp("check", "--db", str(record(s, tmp_path / "live.db", status="running")))
    assert live.returncode == 0 and "protocol.unanswered" not in live.stdout, live.stdout
    ended = acp("check", "--db", str(record(s, tmp_path / "ended.db")))
    assert "protocol.unanswered" in ended.stdout


def stored_out_of_order() -> Script:
    """The relay stamps a chunk when it reads it and stores it after forwarding it: the editor's session/new
    (read after the initialize answer it waited for) can be stored first. Frames 2 and 3 swapped, each with
    the time it was read."""
    s = Script(1)
    s.new_session()
    s.prompt(s.new_session())
    s.frames[1], s.frames[2] = s.frames[2], s.frames[1]
    s.times[1], s.times[2] = s.times[2], s.times[1]
    assert orjson.loads(s.frames[1][1])["method"] == "session/new" and s.times[1] > s.times[2]
    return s


def test_frames_stored_out_of_order_are_checked_in_wire_order(tmp_path: Path) -> None:
    from acp_relay.protocol.check.engine import check_frames

    s = stored_out_of_order()
    rows = [(n, d, raw, False, None, s.times[n - 1]) for n, (d, raw) in enumerate(s.frames, 1)]
    assert check_frames(rows)[0] == []
    assert "protocol.initialize-first" in {f.rule for f in check_frames([r[:5] for r in rows])[0]}  # no stamps
    out = acp("check", "--db", str(record(s, tmp_path / "r.db")), "--connection", "last")
    assert out.returncode == 0 and out.stdout.startswith("0 errors, 0 warnings"), out.stdout


def test_the_wire_order_never_holds_a_one_sided_stream_whole() -> None:
    from acp_relay.protocol.check.order import causal_order

    rows = [(n, A2C, b"", False, None, float(n)) for n in range(1, 50)]
    released = causal_order(iter(rows), hold=10)
    first = next(released)  # the 11th row in made the first come out
    assert first[0] == 1
    assert [r[0] for r in released] == list(range(2, 50))


def dropped_methods(version: int, nes_from: str) -> Script:
    """An editor and agent built against the schemas before @agentclientprotocol/sdk 2.4.0, which dropped the
    nes/* and document/* proposals: their calls are not unknown methods, only still judged by side."""
    s = Script(version)
    sid = s.new_session()
    rid = s.request(nes_from, "nes/start", {"sessionId": sid})
    s.respond(C2A if nes_from == A2C else A2C, rid, {"sessionId": "nes-1"})
    s.notify(C2A, "document/didOpen", {"sessionId": sid, "uri": "file:///a.py", "text": "x"})
    return s


@pytest.mark.parametrize("version", [1, 2])
def test_methods_the_newest_schemas_dropped_are_no_alarm(version: int) -> None:
    assert dropped_methods(version, C2A).check() == []


@pytest.mark.parametrize("version", [1, 2])
def test_methods_the_newest_schemas_dropped_still_have_a_side(version: int) -> None:
    found = dropped_methods(version, A2C).check()
    assert [(f.rule, f.frame) for f in found] == [("protocol.wrong-side", 5)], found
