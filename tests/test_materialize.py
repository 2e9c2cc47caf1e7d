"""One small test per materialization rule (seed-prompt-lifecycle.md, DIGEST sections 3, 4, 9)."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_relay.protocol.materialize import Entry, Event, Materializer, SessionState, materialize, replay_updates


def entry_of(state: SessionState, kind: str, ident: str) -> Entry:
    """The entity, which the test expects to exist."""
    found = state.entry(kind, ident)
    assert found is not None, f"no {kind} {ident!r}"
    return found


class Log:
    """Builds a recording: auto seq, ts one second apart, responses correlated to their request."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, direction: str, message: dict, request: dict | None = None, raw: bytes | None = None) -> Event:
        n = len(self.events)
        event = Event(seq=n, ts=1000.0 + n, direction=direction, message=message, request=request, raw=raw)
        self.events.append(event)
        return event

    def u(self, variant: str, raw: bytes | None = None, **fields: Any) -> dict:
        """An agent session/update; returns the update object."""
        update = {"sessionUpdate": variant, **fields}
        self.add(
            "a2c",
            {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": update}},
            raw=raw,
        )
        return update

    def prompt(self, rid: Any = 1, text: str = "hi") -> dict:
        msg = {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "session/prompt",
            "params": {"sessionId": "s1", "prompt": [{"type": "text", "text": text}]},
        }
        self.add("c2a", msg)
        return msg

    def request(self, rid: Any, method: str, params: dict, direction: str = "a2c") -> dict:
        msg = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        self.add(direction, msg)
        return msg

    def respond(self, request: dict, result: Any = None, error: Any = None, correlate: bool = True) -> None:
        direction = "a2c" if self.events_dir(request) == "c2a" else "c2a"
        body = {"error": error} if error is not None else {"result": result}
        self.add(direction, {"jsonrpc": "2.0", "id": request["id"], **body}, request if correlate else None)

    def events_dir(self, message: dict) -> str:
        return next(e.direction for e in self.events if e.message is message)

    def state(self, v: int = 1) -> SessionState:
        return materialize(self.events, v)


def text(t: str) -> dict:
    return {"type": "text", "text": t}


def tc_text(t: str) -> dict:
    return {"type": "content", "content": text(t)}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kinds(state: SessionState) -> list[tuple[str, str]]:
    return [(e.kind, e.id) for e in state.entries]


# ---- messages ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["user_message", "agent_message", "agent_thought", "session_message"])
@pytest.mark.parametrize("v", [1, 2])
def test_chunks_append(variant: str, v: int) -> None:
    log = Log()
    log.u(f"{variant}_chunk", messageId="m1", content=text("Hel"))
    log.u(f"{variant}_chunk", messageId="m1", content=text("lo"))
    state = log.state(v)
    assert kinds(state) == [(variant, "m1")]
    assert entry_of(state, variant, "m1").content == [text("Hel"), text("lo")]


@pytest.mark.parametrize(
    "patch, expected",
    [
        ({}, [text("A")]),  # omitted: unchanged
        ({"content": None}, []),  # null: cleared
        ({"content": []}, []),  # []: cleared
        ({"content": [text("B")]}, [text("B")]),  # value: replaced
    ],
)
@pytest.mark.parametrize("variant", ["user_message", "agent_message", "agent_thought", "session_message"])
def test_message_upsert_content(variant: str, patch: dict, expected: list) -> None:
    log = Log()
    log.u(variant, messageId="m1", content=[text("A")])
    log.u(variant, messageId="m1", **patch)
    assert entry_of(log.state(2), variant, "m1").content == expected


def test_message_meta_patch_and_chunk_meta_is_chunk_scoped() -> None:
    log = Log()
    log.u("agent_message", messageId="m1", content=[], _meta={"a": 1})
    log.u("agent_message_chunk", messageId="m1", content=text("x"), _meta={"chunk": True})
    assert entry_of(log.state(2), "agent_message", "m1").fields["_meta"] == {"a": 1}
    log.u("agent_message", messageId="m1")
    assert entry_of(log.state(2), "agent_message", "m1").fields["_meta"] == {"a": 1}
    log.u("agent_message", messageId="m1", _meta=None)
    assert "_meta" not in entry_of(log.state(2), "agent_message", "m1").fields


def test_full_update_replaces_chunks_and_later_chunks_append() -> None:
    """The seed's example: [A] + chunk B = [A, B]; update [C] = [C]; chunk D = [C, D]."""
    log = Log()
    log.u("agent_message", messageId="m", content=[text("A")])
    log.u("agent_message_chunk", messageId="m", content=text("B"))
    assert entry_of(log.state(2), "agent_message", "m").content == [text("A"), text("B")]
    log.u("agent_message", messageId="m", content=[text("C")])
    assert entry_of(log.state(2), "agent_message", "m").content == [text("C")]
    log.u("agent_message_chunk", messageId="m", content=text("D"))
    assert entry_of(log.state(2), "agent_message", "m").content == [text("C"), text("D")]


def test_recorded_payload_is_not_mutated_by_later_chunks() -> None:
    log = Log()
    first = log.u("agent_message", messageId="m", content=[text("A")])
    log.u("agent_message_chunk", messageId="m", content=text("B"))
    log.state(2)
    assert first["content"] == [text("A")]


# ---- v1 grouping of chunks without messageId ----------------------------------------------------------


def test_v1_chunks_without_id_group_by_consecutive_variant() -> None:
    log = Log()
    log.u("agent_message_chunk", content=text("a"))
    log.u("agent_message_chunk", content=text("b"))
    log.u("agent_thought_chunk", content=text("t"))
    log.u("agent_message_chunk", content=text("c"))
    state = log.state(1)
    assert kinds(state) == [("agent_message", "msg-1"), ("agent_thought", "msg-2"), ("agent_message", "msg-3")]
    assert state.entries[0].content == [text("a"), text("b")]
    assert all(e.synthetic_id for e in state.entries)


def test_v1_other_entity_between_chunks_starts_new_message() -> None:
    log = Log()
    log.u("agent_message_chunk", content=text("a"))
    log.u("tool_call", toolCallId="t1", title="Read")
    log.u("agent_message_chunk", content=text("b"))
    assert [k for k, _ in kinds(log.state(1))] == ["agent_message", "tool_call", "agent_message"]


def test_v1_session_level_update_does_not_split_message() -> None:
    log = Log()
    log.u("agent_message_chunk", content=text("a"))
    log.u("usage_update", used=1, size=10)
    log.u("agent_message_chunk", content=text("b"))
    assert log.state(1).entries[0].content == [text("a"), text("b")]


def test_v1_new_turn_starts_new_message() -> None:
    log = Log()
    first = log.prompt(1)
    log.u("agent_message_chunk", content=text("a"))
    log.respond(first, {"stopReason": "end_turn"})
    log.prompt(2)
    log.u("agent_message_chunk", content=text("b"))
    assert len(log.state(1).entries) == 2


def test_v1_chunk_with_messageid_is_keyed() -> None:
    log = Log()
    log.u("agent_message_chunk", messageId="x", content=text("a"))
    log.u("agent_thought_chunk", content=text("t"))
    log.u("agent_message_chunk", messageId="x", content=text("b"))
    state = log.state(1)
    assert entry_of(state, "agent_message", "x").content == [text("a"), text("b")]


# ---- tool calls ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "patch, field, expected",
    [
        ({}, "title", "Read"),
        ({"title": None}, "title", None),
        ({"title": "Write"}, "title", "Write"),
        ({"locations": []}, "locations", []),
        ({"locations": None}, "locations", []),
        ({"content": []}, "content", []),
        ({"rawOutput": None}, "rawOutput", None),
        ({"name": None}, "name", None),
    ],
)
def test_v2_tool_call_update_three_state(patch: dict, field: str, expected: Any) -> None:
    log = Log()
    log.u(
        "tool_call_update",
        toolCallId="t",
        title="Read",
        name="read",
        rawOutput={"ok": 1},
        locations=[{"path": "/a"}],
        content=[tc_text("x")],
    )
    log.u("tool_call_update", toolCallId="t", **patch)
    assert entry_of(log.state(2), "tool_call", "t").fields.get(field) == expected


@pytest.mark.parametrize("field", ["title", "status", "content", "locations", "rawInput", "rawOutput", "name"])
def test_v1_tool_call_update_null_is_omitted(field: str) -> None:
    log = Log()
    log.u(
        "tool_call",
        toolCallId="t",
        title="Read",
        status="pending",
        content=[tc_text("x")],
        locations=[{"path": "/a"}],
        rawInput={"i": 1},
        rawOutput={"o": 1},
        name="read",
    )
    before = dict(entry_of(log.state(1), "tool_call", "t").fields)
    log.u("tool_call_update", toolCallId="t", **{field: None})
    assert entry_of(log.state(1), "tool_call", "t").fields == before


def test_v1_tool_call_update_value_replaces() -> None:
    log = Log()
    log.u("tool_call", toolCallId="t", title="Read", locations=[{"path": "/a"}])
    log.u("tool_call_update", toolCallId="t", status="completed", locations=[{"path": "/b"}])
    fields = entry_of(log.state(1), "tool_call", "t").fields
    assert fields["status"] == "completed" and fields["locations"] == [{"path": "/b"}]


def test_v1_tool_call_creates_with_defaults_and_repeat_replaces_whole() -> None:
    log = Log()
    log.u("tool_call", toolCallId="t", title="Read", rawInput={"p": 1})
    assert entry_of(log.state(1), "tool_call", "t").fields == {
        "kind": "other",
        "status": "pending",
        "title": "Read",
        "rawInput": {"p": 1},
    }
    log.u("tool_call", toolCallId="t", title="Write", status="in_progress")
    assert entry_of(log.state(1), "tool_call", "t").fields == {
        "kind": "other",
        "status": "in_progress",
        "title": "Write",
    }


def test_tool_call_content_chunk_append_then_replace_then_append() -> None:
    log = Log()
    log.u("tool_call_update", toolCallId="t", title="Run")
    log.u("tool_call_content_chunk", toolCallId="t", content=tc_text("a"))
    log.u("tool_call_content_chunk", toolCallId="t", content=tc_text("b"))
    assert entry_of(log.state(2), "tool_call", "t").content == [tc_text("a"), tc_text("b")]
    log.u("tool_call_update", toolCallId="t", content=[tc_text("c")])
    log.u("tool_call_content_chunk", toolCallId="t", content=tc_text("d"))
    assert entry_of(log.state(2), "tool_call", "t").content == [tc_text("c"), tc_text("d")]


def test_v1_only_variants_are_unknown_in_v2() -> None:
    log = Log()
    update = log.u("tool_call", toolCallId="t", title="Read")
    state = log.state(2)
    assert kinds(state) == [("unknown", "#1")] and state.entries[0].raw_update is update


# ---- terminals ------------------------------------------------------------------------------------------


def test_terminal_chunks_decoded_each_on_its_own() -> None:
    """'é' split across two chunks: only decoding each chunk and appending bytes gets it right."""
    log = Log()
    first, second = b64("é".encode()[:1]), b64("é".encode()[1:])
    assert base64.b64decode(first + second) != "é".encode()  # concatenating base64 text is wrong
    log.u("terminal_output_chunk", terminalId="term", data=first)
    log.u("terminal_output_chunk", terminalId="term", data=second)
    assert bytes(entry_of(log.state(2), "terminal", "term").output or b"").decode() == "é"


def test_terminal_snapshot_replaces_all_bytes_then_chunks_append() -> None:
    log = Log()
    log.u("terminal_output_chunk", terminalId="term", data=b64(b"old"))
    log.u("terminal_update", terminalId="term", output={"data": b64(b"new")})
    assert entry_of(log.state(2), "terminal", "term").output == b"new"
    log.u("terminal_output_chunk", terminalId="term", data=b64(b"+more"))
    assert entry_of(log.state(2), "terminal", "term").output == b"new+more"
    log.u("terminal_update", terminalId="term", output=None)
    assert entry_of(log.state(2), "terminal", "term").output is None


@pytest.mark.parametrize(
    "patch, command, exited",
    [
        ({}, "make", False),
        ({"command": None}, None, False),
        ({"command": "make test"}, "make test", False),
        ({"exitStatus": {}}, "make", True),  # a concrete object marks exited
        ({"exitStatus": {"exitCode": 2}}, "make", True),
    ],
)
def test_terminal_update_patches(patch: dict, command: str | None, exited: bool) -> None:
    log = Log()
    log.u("terminal_update", terminalId="term", command="make", cwd="/w")
    log.u("terminal_update", terminalId="term", **patch)
    entry = entry_of(log.state(2), "terminal", "term")
    assert entry.fields.get("command") == command and entry.exited is exited and entry.fields["cwd"] == "/w"


def test_terminal_exit_status_null_clears_exit() -> None:
    log = Log()
    log.u("terminal_update", terminalId="term", exitStatus={"exitCode": 0})
    log.u("terminal_update", terminalId="term", exitStatus=None)
    assert not entry_of(log.state(2), "terminal", "term").exited


def test_invalid_base64_chunk_is_kept_as_invalid() -> None:
    log = Log()
    log.u("terminal_output_chunk", terminalId="term", data=b64(b"ok"))
    log.u("terminal_output_chunk", terminalId="term", data="!!not base64!!")
    state = log.state(2)
    assert entry_of(state, "terminal", "term").output == b"ok"
    assert state.entries[1].kind == "invalid" and state.entries[1].problems


# ---- plans ------------------------------------------------------------------------------------------------


def test_v1_plan_replaced_whole_as_main() -> None:
    log = Log()
    log.u("plan", entries=[{"content": "a", "priority": "high", "status": "pending"}])
    log.u("plan", entries=[{"content": "b", "priority": "low", "status": "completed"}])
    state = log.state(1)
    assert kinds(state) == [("plan", "main")]
    assert state.plans["main"]["entries"] == [{"content": "b", "priority": "low", "status": "completed"}]


def test_plan_update_per_plan_id_and_plan_removed() -> None:
    log = Log()
    log.u("plan_update", plan={"type": "items", "planId": "p1", "entries": [{"content": "a"}]})
    log.u("plan_update", plan={"type": "markdown", "planId": "p2", "content": "# x"})
    log.u("plan_update", plan={"type": "items", "planId": "p1", "entries": []})
    log.u("plan_removed", planId="p2")
    state = log.state(2)
    assert state.plans == {"p1": {"type": "items", "planId": "p1", "entries": []}}
    assert kinds(state) == [("plan", "p1"), ("plan", "p2")] and state.entries[1].removed
    log.u("plan_update", plan={"type": "file", "planId": "p2", "uri": "file:///plan.md"})
    state = log.state(2)
    assert kinds(state) == [("plan", "p1"), ("plan", "p2")] and not state.entries[1].removed
    assert state.plans["p2"]["uri"] == "file:///plan.md"


# ---- compaction ---------------------------------------------------------------------------------------------


def test_compaction_chunks_kept_when_completed_omits_summary() -> None:
    log = Log()
    log.u("compaction_update", compactionId="c", status="in_progress")
    log.u("compaction_summary_chunk", compactionId="c", content=text("## kept"))
    log.u("compaction_summary_chunk", compactionId="c", content=text(" more"))
    log.u("compaction_update", compactionId="c", status="completed")
    fields = entry_of(log.state(2), "compaction", "c").fields
    assert fields == {"status": "completed", "summary": [text("## kept"), text(" more")]}


@pytest.mark.parametrize(
    "patch, summary",
    [
        ({"summary": [text("final")]}, [text("final")]),
        ({"summary": None}, []),
        ({"summary": []}, []),
    ],
)
def test_compaction_summary_patch(patch: dict, summary: list) -> None:
    log = Log()
    log.u("compaction_update", compactionId="c", status="in_progress")
    log.u("compaction_summary_chunk", compactionId="c", content=text("partial"))
    log.u("compaction_update", compactionId="c", status="completed", **patch)
    assert entry_of(log.state(2), "compaction", "c").fields["summary"] == summary


def test_compaction_error_patch_and_fixed_position() -> None:
    log = Log()
    log.u("compaction_update", compactionId="c", status="in_progress")
    log.u("agent_message", messageId="m", content=[text("x")])
    log.u("compaction_update", compactionId="c", status="failed", error="out of tokens")
    state = log.state(2)
    assert kinds(state) == [("compaction", "c"), ("agent_message", "m")]
    assert entry_of(state, "compaction", "c").fields["error"] == "out of tokens"
    log.u("compaction_update", compactionId="c", status="failed", error=None)
    assert "error" not in entry_of(log.state(2), "compaction", "c").fields


# ---- timeline, notices, unknown ------------------------------------------------------------------------------


def test_first_seen_order_is_kept_by_later_patches() -> None:
    log = Log()
    log.u("tool_call_update", toolCallId="a", title="A")
    log.u("agent_message_chunk", messageId="b", content=text("B"))
    log.u("tool_call_update", toolCallId="a", status="completed")
    state = log.state(2)
    assert kinds(state) == [("tool_call", "a"), ("agent_message", "b")]
    assert state.entries[0].first_seq == 0 and state.entries[0].last_seq == 2


def test_notice_is_live_only_in_timeline() -> None:
    log = Log()
    log.u("notice", severity="warning", title="MCP down", description=None)
    (entry,) = log.state(2).entries
    assert entry.kind == "notice" and entry.live_only and entry.fields["title"] == "MCP down"


@pytest.mark.parametrize("variant", ["_vendor/progress", "future_thing"])
def test_unknown_variant_kept_with_raw_payload(variant: str) -> None:
    log = Log()
    update = log.u(variant, raw=b'{"raw":1}\n', anything={"x": [1]})
    (entry,) = log.state(2).entries
    assert entry.kind == "unknown" and entry.variant == variant
    assert entry.raw_update is update and entry.raw == b'{"raw":1}\n'


@pytest.mark.parametrize(
    "update",
    [
        {"sessionUpdate": "agent_message_chunk", "messageId": "m"},  # no content
        {"sessionUpdate": "tool_call_update", "toolCallId": 7},  # id not a string
        {"sessionUpdate": "plan_update", "plan": "nope"},
        {"sessionUpdate": 3},
        "not an object",
    ],
)
def test_malformed_known_variant_kept_as_invalid(update: Any) -> None:
    log = Log()
    log.add("a2c", {"jsonrpc": "2.0", "method": "session/update", "params": {"update": update}})
    state = log.state(2)
    (entry,) = state.entries
    assert entry.kind == "invalid" and entry.raw_update is update and entry.problems
    assert replay_updates(state, 2) == []


# ---- session-level state ----------------------------------------------------------------------------------------


def test_session_level_state() -> None:
    log = Log()
    log.u("available_commands_update", availableCommands=[{"name": "web", "description": "search"}])
    log.u("current_mode_update", currentModeId="code")
    log.u("config_option_update", configOptions=[{"id": "model", "currentValue": "fast"}])
    log.u("usage_update", used=10, size=100, cost={"amount": 0.1, "currency": "USD"})
    log.u("usage_update", used=20, size=100)  # snapshot: cost gone
    state = log.state(1)
    assert state.commands == [{"name": "web", "description": "search"}]
    assert state.mode == "code" and state.config_options == [{"id": "model", "currentValue": "fast"}]
    assert state.usage == {"used": 20, "size": 100}
    assert state.entries == []


def test_current_mode_update_tolerates_mode_id() -> None:
    log = Log()
    log.u("current_mode_update", modeId="architect")
    assert log.state(1).mode == "architect"


def test_session_info_patch() -> None:
    log = Log()
    log.u("session_info_update", title="T", updatedAt="2026-01-01T00:00:00Z")
    log.u("session_info_update", title=None)
    assert log.state(2).info == {"updatedAt": "2026-01-01T00:00:00Z"}
    log.u("session_info_update", title="U")
    assert log.state(2).info == {"updatedAt": "2026-01-01T00:00:00Z", "title": "U"}


@pytest.mark.parametrize("state_value", ["running", "requires_action", "unknown", "_custom"])
def test_state_update_sets_run_state(state_value: str) -> None:
    log = Log()
    log.u("state_update", state=state_value)
    assert log.state(2).run_state == state_value


def test_session_results_set_modes_and_config() -> None:
    log = Log()
    new = log.request(1, "session/new", {"cwd": "/w", "mcpServers": []}, direction="c2a")
    log.respond(
        new,
        {
            "sessionId": "s1",
            "modes": {"currentModeId": "ask", "availableModes": [{"id": "ask"}]},
            "configOptions": [{"id": "m"}],
        },
    )
    set_mode = log.request(2, "session/set_mode", {"sessionId": "s1", "modeId": "code"}, direction="c2a")
    log.respond(set_mode, {})
    state = log.state(1)
    assert state.mode == "code" and state.available_modes == [{"id": "ask"}] and state.config_options == [{"id": "m"}]


# ---- subagents and session messages --------------------------------------------------------------------------------


def test_subagent_update_keyed_by_child_session_id() -> None:
    log = Log()
    log.u("subagent_update", sessionId="child", title="Research", state={"state": "running"})
    log.u("subagent_update", sessionId="child", state={"state": "idle", "stopReason": "end_turn"}, title=None)
    state = log.state(2)
    assert kinds(state) == [("subagent", "child")]
    assert state.entries[0].fields == {"state": {"state": "idle", "stopReason": "end_turn"}}


def test_session_message_participants_are_sticky() -> None:
    log = Log()
    log.u("session_message_chunk", messageId="r1", senderSessionId="parent", content=text("Please "))
    log.u("session_message_chunk", messageId="r1", recipientSessionId="child", content=text("look"))
    log.u("session_message", messageId="r1", senderSessionId=None)
    fields = entry_of(log.state(2), "session_message", "r1").fields
    assert fields["senderSessionId"] == "parent" and fields["recipientSessionId"] == "child"
    assert fields["content"] == [text("Please "), text("look")]


# ---- turns -------------------------------------------------------------------------------------------------------


def test_v1_turn_ends_at_prompt_response() -> None:
    log = Log()
    prompt = log.prompt(1, "fix it")  # ts 1000
    log.u("agent_thought_chunk", content=text("hmm"))  # 1001
    log.u("agent_message_chunk", content=text("done"))  # 1002
    log.respond(prompt, {"stopReason": "end_turn", "usage": {"totalTokens": 5}})  # 1003
    state = log.state(1)
    (turn,) = state.turns
    assert (turn.index, turn.prompt, turn.stop_reason, turn.usage) == (
        1,
        [text("fix it")],
        "end_turn",
        {"totalTokens": 5},
    )
    assert turn.duration == 3.0 and turn.time_to_first_message == 2.0
    assert turn.entry_ids == ["agent_thought:msg-1", "agent_message:msg-2"]
    assert (state.run_state, state.stop_reason) == ("idle", "end_turn")


def test_v1_error_response_ends_turn_with_error() -> None:
    log = Log()
    prompt = log.prompt(1)
    log.respond(prompt, error={"code": -32603, "message": "boom"})
    (turn,) = log.state(1).turns
    assert turn.stop_reason == "error" and turn.error == {"code": -32603, "message": "boom"} and turn.ended


def test_response_correlated_without_request_field() -> None:
    log = Log()
    prompt = log.prompt("a")
    log.respond(prompt, {"stopReason": "max_tokens"}, correlate=False)
    assert log.state(1).turns[0].stop_reason == "max_tokens"


def test_response_ids_are_typed_per_direction() -> None:
    log = Log()
    log.prompt(1)
    log.add("a2c", {"jsonrpc": "2.0", "id": "1", "result": {"stopReason": "refusal"}})  # "1" is not 1
    log.add("c2a", {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "refusal"}})  # wrong direction
    assert not log.state(1).turns[0].ended


@pytest.mark.parametrize("key", ["messageId", "userMessageId"])
def test_v2_turn_accepted_then_ends_at_idle(key: str) -> None:
    log = Log()
    prompt = log.prompt(2)
    log.respond(prompt, {key: "u1"})
    log.u("user_message", messageId="u1", content=[text("hi")])
    log.u("state_update", state="running")
    log.u("agent_message_chunk", messageId="a1", content=text("ok"))
    state = log.state(2)
    assert not state.turns[0].ended and state.turns[0].accepted_ts == 1001.0
    log.u("state_update", state="idle", stopReason="end_turn", usage={"totalTokens": 9})
    state = log.state(2)
    (turn,) = state.turns
    assert (turn.user_message_id, turn.stop_reason, turn.usage, turn.duration) == (
        "u1",
        "end_turn",
        {"totalTokens": 9},
        5.0,
    )
    assert turn.time_to_first_message == 4.0
    assert (state.run_state, state.stop_reason) == ("idle", "end_turn")


def test_v2_prompt_rejected_is_error() -> None:
    log = Log()
    prompt = log.prompt(2)
    log.respond(prompt, error={"code": -32000, "message": "Authentication required"})
    (turn,) = log.state(2).turns
    assert turn.stop_reason == "error" and turn.error["code"] == -32000


def test_v1_state_update_idle_does_not_end_v1_turn() -> None:
    log = Log()
    log.prompt(1)
    log.u("state_update", state="idle", stopReason="end_turn")
    assert not log.state(1).turns[0].ended


def test_cancel_recorded_on_current_turn() -> None:
    log = Log()
    prompt = log.prompt(1)
    log.add("c2a", {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s1"}})
    log.respond(prompt, {"stopReason": "cancelled"})
    (turn,) = log.state(1).turns
    assert turn.cancel_ts == 1001.0 and turn.stop_reason == "cancelled"


def test_entities_outside_turns_have_no_turn() -> None:
    log = Log()
    log.u("agent_message_chunk", messageId="m", content=text("background"))
    assert log.state(2).entries[0].turn is None


# ---- requests to the client --------------------------------------------------------------------------------------

OPTIONS = [
    {"optionId": "allow", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "deny", "name": "Reject", "kind": "reject_once"},
]


@pytest.mark.parametrize(
    "v, params",
    [
        (1, {"sessionId": "s1", "toolCall": {"toolCallId": "t1"}, "options": OPTIONS}),
        (
            2,
            {
                "sessionId": "s1",
                "title": "Run?",
                "subject": {"type": "tool_call", "toolCall": {"toolCallId": "t1"}},
                "options": OPTIONS,
            },
        ),
        (
            2,
            {
                "sessionId": "s1",
                "title": "Run?",
                "subject": {"type": "command", "command": "rm", "toolCallId": "t1"},
                "options": OPTIONS,
            },
        ),
    ],
)
def test_permission_with_chosen_option(v: int, params: dict) -> None:
    log = Log()
    req = log.request(5, "session/request_permission", params)
    log.respond(req, {"outcome": {"outcome": "selected", "optionId": "allow"}})
    (entry,) = log.state(v).entries
    assert entry.kind == "permission" and not entry.replayable
    assert (entry.fields["toolCallId"], entry.fields["outcome"], entry.fields["optionName"]) == (
        "t1",
        "selected",
        "Allow once",
    )


def test_permission_cancelled() -> None:
    log = Log()
    req = log.request(5, "session/request_permission", {"toolCall": {"toolCallId": "t1"}, "options": OPTIONS})
    log.respond(req, {"outcome": {"outcome": "cancelled"}})
    fields = log.state(1).entries[0].fields
    assert fields["outcome"] == "cancelled" and "optionName" not in fields


def test_fs_request_recorded_not_replayable() -> None:
    log = Log()
    req = log.request(6, "fs/read_text_file", {"sessionId": "s1", "path": "/a"})
    log.respond(req, {"content": "x"})
    state = log.state(1)
    (entry,) = state.entries
    assert entry.kind == "client_request" and entry.fields["result"] == {"content": "x"}
    assert replay_updates(state, 1) == []


# ---- replay -------------------------------------------------------------------------------------------------------


def full_v2_log() -> tuple[Log, dict]:
    log = Log()
    prompt = log.prompt(1, "go")
    log.respond(prompt, {"messageId": "u1"})
    log.u("user_message_chunk", messageId="u1", content=text("go"))
    log.u("notice", severity="info", title="slow")
    log.u("agent_message_chunk", messageId="a1", content=text("Hel"))
    log.u("agent_message_chunk", messageId="a1", content=text("lo"))
    log.u("tool_call_update", toolCallId="t1", title="Run", status="pending")
    log.u("tool_call_update", toolCallId="t1", status="completed")
    log.request(7, "session/request_permission", {"toolCall": {"toolCallId": "t1"}, "options": OPTIONS})
    log.u("terminal_output_chunk", terminalId="term", data=b64(b"a"))
    log.u("terminal_output_chunk", terminalId="term", data=b64(b"b"))
    log.u("compaction_update", compactionId="c", status="in_progress")
    log.u("compaction_summary_chunk", compactionId="c", content=text("sum"))
    log.u("compaction_update", compactionId="c", status="completed")
    log.u("plan_update", plan={"type": "items", "planId": "p", "entries": []})
    vendor = log.u("_vendor/thing", payload=[1, 2])
    log.u("usage_update", used=1, size=2)
    log.u("session_info_update", title="T")
    log.u("state_update", state="idle", stopReason="end_turn")
    return log, vendor


def test_replay_v2() -> None:
    log, vendor = full_v2_log()
    out = replay_updates(log.state(2), 2)
    assert out == [
        {"sessionUpdate": "user_message", "messageId": "u1", "content": [text("go")]},
        {"sessionUpdate": "agent_message", "messageId": "a1", "content": [text("Hel"), text("lo")]},
        {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "title": "Run", "status": "completed"},
        {"sessionUpdate": "terminal_update", "terminalId": "term", "output": {"data": b64(b"ab")}},
        {"sessionUpdate": "compaction_update", "compactionId": "c", "status": "completed", "summary": [text("sum")]},
        {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": "p", "entries": []}},
        vendor,
        {"sessionUpdate": "session_info_update", "title": "T"},
        {"sessionUpdate": "usage_update", "used": 1, "size": 2},
    ]
    assert out[6] is vendor


def test_replay_v1_chunks_with_message_ids() -> None:
    log = Log()
    prompt = log.prompt(1, "go")  # v1 agent does not echo the prompt: replay still shows it
    log.u("agent_message_chunk", content=text("a"))
    log.u("agent_message_chunk", content=text("b"))
    log.u("tool_call", toolCallId="t", title="Read", status="completed")
    log.u("agent_thought_chunk", messageId="th", content=text("t"))
    log.u("plan", entries=[{"content": "x", "priority": "low", "status": "pending"}])
    log.u("notice", severity="info", title="n")
    log.u("current_mode_update", currentModeId="code")
    log.respond(prompt, {"stopReason": "end_turn"})
    assert replay_updates(log.state(1), 1) == [
        {"sessionUpdate": "user_message_chunk", "messageId": "msg-prompt-1", "content": text("go")},
        {"sessionUpdate": "agent_message_chunk", "messageId": "msg-1", "content": text("a")},
        {"sessionUpdate": "agent_message_chunk", "messageId": "msg-1", "content": text("b")},
        {"sessionUpdate": "tool_call", "toolCallId": "t", "title": "Read", "kind": "other", "status": "completed"},
        {"sessionUpdate": "agent_thought_chunk", "messageId": "th", "content": text("t")},
        {"sessionUpdate": "plan", "entries": [{"content": "x", "priority": "low", "status": "pending"}]},
        {"sessionUpdate": "current_mode_update", "currentModeId": "code"},
    ]


def test_replay_invented_ids_do_not_collide_with_real_ones() -> None:
    log = Log()
    log.u("agent_message_chunk", content=text("anon"))
    log.u("user_message_chunk", messageId="msg-1", content=text("real"))
    ids = [u["messageId"] for u in replay_updates(log.state(1), 1)]
    assert len(set(ids)) == 2 and "msg-1" in ids


def test_replay_skips_removed_plans_and_rejected_prompts() -> None:
    log = Log()
    prompt = log.prompt(1)
    log.respond(prompt, error={"code": -32000, "message": "auth"})
    log.u("plan_update", plan={"type": "items", "planId": "p", "entries": []})
    log.u("plan_removed", planId="p")
    assert replay_updates(log.state(2), 2) == []


# ---- robustness ---------------------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
VARIANTS = [
    "user_message_chunk",
    "agent_message",
    "tool_call",
    "tool_call_update",
    "tool_call_content_chunk",
    "terminal_update",
    "terminal_output_chunk",
    "plan",
    "plan_update",
    "plan_removed",
    "notice",
    "compaction_update",
    "compaction_summary_chunk",
    "state_update",
    "session_info_update",
    "usage_update",
    "available_commands_update",
    "current_mode_update",
    "subagent_update",
    "session_message",
    "_x",
]
FIELDS = [
    "messageId",
    "toolCallId",
    "terminalId",
    "compactionId",
    "planId",
    "content",
    "summary",
    "data",
    "output",
    "exitStatus",
    "entries",
    "plan",
    "state",
    "stopReason",
    "title",
    "sessionId",
]
updates = st.fixed_dictionaries({"sessionUpdate": st.sampled_from(VARIANTS)}, optional={f: json_values for f in FIELDS})
METHODS = ["session/update", "session/prompt", "session/cancel", "session/request_permission", "fs/x", "other"]
messages = st.one_of(
    st.dictionaries(st.text(max_size=8), json_values, max_size=5),
    st.fixed_dictionaries(
        {"method": st.sampled_from(METHODS)},
        optional={
            "id": json_values,
            "params": st.fixed_dictionaries(
                {},
                optional={
                    "update": updates | json_values,
                    "prompt": json_values,
                    "options": json_values,
                    "toolCall": json_values,
                },
            ),
        },
    ),
    st.fixed_dictionaries({"id": st.integers(0, 3)}, optional={"result": json_values, "error": json_values}),
)
events = st.lists(
    st.tuples(
        st.sampled_from(["c2a", "a2c", "?"]),
        messages,
        st.none() | st.dictionaries(st.text(max_size=8), json_values, max_size=3),
    ),
    max_size=20,
)


@settings(max_examples=120, deadline=None)
@given(events, st.sampled_from([1, 2]))
def test_feed_never_raises(items: list, v: int) -> None:
    from acp_relay.render.transcript import render_transcript

    m = Materializer(v)
    for n, (direction, message, request) in enumerate(items):
        m.feed(Event(seq=n, ts=float(n), direction=direction, message=message, request=request))
    assert m.state.errors == [], m.state.errors  # everything handled, not caught by the safety net
    assert m.state.problems == [], m.state.problems
    replay_updates(m.state, v)
    render_transcript(m.state, color=True)


@settings(max_examples=60, deadline=None)
@given(st.lists(json_values, max_size=10))
def test_feed_never_raises_on_non_objects(values: list) -> None:
    m = Materializer(2)
    for n, value in enumerate(values):
        m.feed(Event(seq=n, ts=0.0, direction="a2c", message=value))
        m.feed(Event(seq=n, ts=0.0, direction="a2c", message={"method": "session/update", "params": {"update": value}}))
    assert m.state.errors == [], m.state.errors  # handled by the rules, not by feed's safety net
    not_objects = sum(not isinstance(v, dict) for v in values)
    assert sum("message is not an object" in p for p in m.state.problems) == not_objects, m.state.problems


def test_a_reload_in_the_same_connection_does_not_double_the_history() -> None:
    def ev(seq: int, direction: str, msg: dict) -> Event:
        return Event(seq, float(seq), direction, {"jsonrpc": "2.0", **msg})

    def chunk(text: str) -> dict:
        return {
            "method": "session/update",
            "params": {
                "sessionId": "s",
                "update": {
                    "sessionUpdate": "agent_message_chunk",
                    "messageId": "m1",
                    "content": {"type": "text", "text": text},
                },
            },
        }

    events = [
        ev(1, "c2a", {"id": 1, "method": "session/prompt", "params": {"sessionId": "s", "prompt": []}}),
        ev(2, "a2c", chunk("Hello")),
        ev(3, "a2c", {"id": 1, "result": {"stopReason": "end_turn"}}),
        ev(4, "c2a", {"id": 2, "method": "session/load", "params": {"sessionId": "s", "cwd": "/", "mcpServers": []}}),
        ev(5, "a2c", chunk("Hello")),
        ev(6, "a2c", {"id": 2, "result": {}}),
        ev(7, "a2c", chunk(" again")),
    ]
    state = materialize(events, 1)
    texts = [b.get("text") for e in state.entries for b in e.content]
    assert texts == ["Hello", " again"] and state.replayed_updates == 1
    fresh = materialize(events[3:6], 1)  # a load on a new connection is the only source: folded in
    assert [b.get("text") for e in fresh.entries for b in e.content] == ["Hello"] and fresh.replayed_updates == 0
