"""Transcript rendering: golden sessions for v1 and v2, then one test per presentation rule."""

from __future__ import annotations

import base64
from typing import Any

from acp_relay.protocol.materialize import Event, SessionState, materialize
from acp_relay.render.transcript import blocks_text, render_transcript


def events(frames: list[tuple[str, dict]]) -> list[Event]:
    """(direction, message) pairs -> Events half a second apart, responses correlated."""
    out: list[Event] = []
    pending: dict[tuple[str, Any], dict] = {}
    for n, (direction, msg) in enumerate(frames):
        request = None
        if "method" in msg and "id" in msg:
            pending[(direction, msg["id"])] = msg
        elif "method" not in msg:
            request = pending.get(("a2c" if direction == "c2a" else "c2a", msg["id"]))
        out.append(Event(seq=n, ts=50.0 + n * 0.5, direction=direction, message=msg, request=request))
    return out


def upd(update_type: str, **fields: Any) -> tuple[str, dict]:
    return (
        "a2c",
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": "s", "update": {"sessionUpdate": update_type, **fields}},
        },
    )


def prompt(rid: int, text: str) -> tuple[str, dict]:
    return (
        "c2a",
        {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "session/prompt",
            "params": {"sessionId": "s", "prompt": [{"type": "text", "text": text}]},
        },
    )


def reply(rid: int, direction: str = "a2c", **body: Any) -> tuple[str, dict]:
    return (direction, {"jsonrpc": "2.0", "id": rid, **body})


def text(t: str) -> dict:
    return {"type": "text", "text": t}


def render(frames: list[tuple[str, dict]], v: int = 2, color: bool = False) -> list[str]:
    return render_transcript(materialize(events(frames), v), color=color)


OPTIONS = [
    {"optionId": "allow", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "deny", "name": "Reject", "kind": "reject_once"},
]

V1_SESSION = [
    upd("available_commands_update", availableCommands=[{"name": "web", "description": "search"}]),
    prompt(1, "Fix the bug"),
    upd("agent_thought_chunk", content=text("Look at ")),
    upd("agent_thought_chunk", content=text("main.py")),
    upd(
        "plan",
        entries=[
            {"content": "Read", "priority": "high", "status": "completed"},
            {"content": "Edit", "priority": "low", "status": "pending"},
        ],
    ),
    upd(
        "tool_call",
        toolCallId="t1",
        title="Edit main.py",
        kind="edit",
        status="pending",
        locations=[{"path": "/w/main.py", "line": 3}],
    ),
    (
        "a2c",
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "session/request_permission",
            "params": {"sessionId": "s", "toolCall": {"toolCallId": "t1"}, "options": OPTIONS},
        },
    ),
    reply(0, "c2a", result={"outcome": {"outcome": "selected", "optionId": "allow"}}),
    upd(
        "tool_call_update",
        toolCallId="t1",
        status="completed",
        content=[{"type": "diff", "path": "/w/main.py", "oldText": "a\nb\n", "newText": "a\nc\nd\n"}],
    ),
    upd("agent_message_chunk", content=text("Fixed.\nRun the ")),
    upd("agent_message_chunk", content=text("tests.")),
    upd("current_mode_update", currentModeId="code"),
    reply(1, result={"stopReason": "end_turn", "usage": {"inputTokens": 10, "outputTokens": 4, "totalTokens": 14}}),
]

V1_GOLDEN = [
    "Session (ACP v1)",
    "",
    "=== Turn 1 · 5.50s · end_turn ===",
    "  first agent message after 4.00s",
    "  usage: inputTokens=10 outputTokens=4 totalTokens=14",
    "User: Fix the bug",
    "Thought: Look at main.py",
    "Plan main:",
    "  [completed] (high) Read",
    "  [pending] (low) Edit",
    "Tool call t1: Edit main.py [completed (edit)]",
    "  at /w/main.py:3",
    "  diff /w/main.py: -2 +3 lines",
    'Permission request for t1 -> selected "Allow once" (allow)',
    "Agent: Fixed.",
    "  Run the tests.",
    "",
    "--- session ---",
    "Mode: code",
    "Commands: /web",
    "State: idle (end_turn)",
]

V2_SESSION = [
    upd("session_info_update", title="Bug hunt", updatedAt="2026-01-02T03:04:05Z"),
    prompt(1, "Hi"),
    reply(1, result={"messageId": "u1"}),
    upd("user_message", messageId="u1", content=[text("Hi")]),
    upd("state_update", state="running"),
    upd("notice", severity="warning", title="MCP server unavailable", description="Continuing without it."),
    upd("agent_message_chunk", messageId="a1", content=text("Running ")),
    upd("agent_message_chunk", messageId="a1", content={"type": "image", "mimeType": "image/png", "data": "AA=="}),
    upd("tool_call_update", toolCallId="t1", title="make test", kind="execute", status="in_progress"),
    upd("tool_call_content_chunk", toolCallId="t1", content={"type": "terminal", "terminalId": "term1"}),
    upd("terminal_update", terminalId="term1", command="make test", cwd="/w"),
    upd("terminal_output_chunk", terminalId="term1", data=base64.b64encode(b"\x1b[32mok\x1b[0m\r\n").decode()),
    upd("terminal_update", terminalId="term1", exitStatus={"exitCode": 0}),
    upd("tool_call_update", toolCallId="t1", status="completed"),
    upd("compaction_update", compactionId="c1", status="in_progress"),
    upd("compaction_summary_chunk", compactionId="c1", content=text("Kept: the bug is in main.py")),
    upd("compaction_update", compactionId="c1", status="completed"),
    upd("subagent_update", sessionId="child1", title="Researcher", state={"state": "running"}),
    upd(
        "session_message",
        messageId="sm1",
        senderSessionId="s",
        recipientSessionId="child1",
        content=[text("Look at logs")],
    ),
    upd("_vendor/progress", pct=50),
    upd("usage_update", used=53000, size=200000, cost={"amount": 0.045, "currency": "USD"}),
    upd("state_update", state="idle", stopReason="end_turn", usage={"totalTokens": 99}),
]

V2_GOLDEN = [
    "Session (ACP v2): Bug hunt · updated 2026-01-02T03:04:05Z",
    "",
    "=== Turn 1 · 10.00s · end_turn ===",
    "  first agent message after 2.50s",
    "  usage: totalTokens=99",
    "User: Hi",
    "[live-only] Notice warning: MCP server unavailable - Continuing without it.",
    "Agent: Running",
    "  [image image/png]",
    "Tool call t1: make test [completed (execute)]",
    "  terminal term1",
    "Terminal term1 $ make test (in /w) [exited 0]",
    "  | ok",
    "Compaction c1 [completed]",
    "  | Kept: the bug is in main.py",
    "Child session child1: Researcher [running]",
    "Session message sm1 (From s To child1): Look at logs",
    'Unknown update _vendor/progress: {"sessionUpdate":"_vendor/progress","pct":50}',
    "",
    "--- session ---",
    "Context: 53000/200000 tokens, cost 0.045 USD",
    "State: idle (end_turn)",
]


def test_golden_v1() -> None:
    assert render(V1_SESSION, v=1) == V1_GOLDEN


def test_golden_v2() -> None:
    assert render(V2_SESSION, v=2) == V2_GOLDEN


def test_output_is_stable() -> None:
    state = materialize(events(V2_SESSION), 2)
    assert render_transcript(state) == render_transcript(state)


def test_color_only_when_asked() -> None:
    plain = render(V2_SESSION)
    colored = render(V2_SESSION, color=True)
    assert not any("\x1b" in line for line in plain)
    assert any("\x1b[" in line for line in colored) and len(colored) == len(plain)


def test_chunks_joined_without_separator() -> None:
    assert (
        blocks_text(
            [text("Hel"), text("lo"), {"type": "resource_link", "name": "a.py", "uri": "file:///a.py"}, text("end")]
        )
        == "Hello\n[link a.py: file:///a.py]\nend"
    )


def test_notice_marked_live_only() -> None:
    assert render([upd("notice", severity="info", title="Heads up")])[1] == "[live-only] Notice info: Heads up"


def test_unknown_variant_shown_with_compact_raw_payload() -> None:
    lines = render([upd("future_variant", nested={"a": [1, 2]})])
    assert lines[1] == 'Unknown update future_variant: {"sessionUpdate":"future_variant","nested":{"a":[1,2]}}'


def test_invalid_update_says_why() -> None:
    line = render([upd("tool_call_update", title="no id")])[1]
    assert line.startswith("Invalid update tool_call_update (seq 0: tool_call_update: toolCallId must be a string)")


def test_permission_cancelled_and_unanswered() -> None:
    request = (
        "a2c",
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "session/request_permission",
            "params": {"sessionId": "s", "title": "Delete?", "options": OPTIONS},
        },
    )
    assert render([request])[1] == "Permission request: Delete? -> no answer"
    answered = render([request, reply(3, "c2a", result={"outcome": {"outcome": "cancelled"}})])
    assert answered[1] == "Permission request: Delete? -> cancelled"


def test_compaction_failure_shows_error() -> None:
    lines = render([upd("compaction_update", compactionId="c", status="failed", error="too big")])
    assert lines[1:3] == ["Compaction c [failed]", "  error: too big"]


def test_plan_removed_and_markdown_plan() -> None:
    lines = render(
        [
            upd("plan_update", plan={"type": "markdown", "planId": "p", "content": "# Steps\n1. a"}),
            upd("plan_update", plan={"type": "items", "planId": "q", "entries": []}),
            upd("plan_removed", planId="q"),
        ]
    )
    assert lines[1:5] == ["Plan p:", "  | # Steps", "  | 1. a", "Plan q (removed)"]


def test_turn_with_cancel_error_and_unfinished() -> None:
    lines = render(
        [
            prompt(1, "a"),
            ("c2a", {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}}),
            reply(1, error={"code": -32603, "message": "x"}),
            prompt(2, "b"),
        ],
        v=1,
    )
    assert lines[1:9] == [
        "",
        "=== Turn 1 · 1.00s · error ===",
        '  error: {"code":-32603,"message":"x"}',
        "  cancelled by the client after 0.50s",
        "Prompt (error): a",
        "",
        "=== Turn 2 · ? · not finished ===",
        "User: b",
    ]


def test_terminal_shows_only_the_tail_without_control_sequences() -> None:
    data = "".join(f"\x1b[1mline {i}\x07\r\n" for i in range(30)).encode()
    lines = render([upd("terminal_update", terminalId="t", output={"data": base64.b64encode(data).decode()})])
    # ANSI sequences are removed; other controls (BEL here) show as escapes, as in every view (issue 10)
    assert lines[1:4] == ["Terminal t", "  (10 earlier lines not shown)", "  | line 10\\x07"]
    assert lines[-4] == "  | line 29\\x07"


def test_empty_state_renders() -> None:
    assert render_transcript(SessionState()) == ["Session (ACP v1)", "", "--- session ---", "State: not reported"]


def test_each_turn_shows_its_own_plan() -> None:
    """The v1 plan (one per session, replaced whole) showed only in turn 1, with the last turn's state."""
    step = [{"content": "write the test", "priority": "high"}]
    lines = render(
        [
            prompt(1, "plan it"),
            upd("plan", entries=[{**step[0], "status": "pending"}]),
            reply(1, result={"stopReason": "end_turn"}),
            prompt(2, "do it"),
            upd("plan", entries=[{**step[0], "status": "in_progress"}]),
            upd("plan", entries=[{**step[0], "status": "completed"}]),
            reply(2, result={"stopReason": "end_turn"}),
        ],
        v=1,
    )
    second = next(i for i, line in enumerate(lines) if "do it" in line)
    first, later = lines[:second], lines[second:]
    assert sum("Plan main" in line for line in first) == 1 and sum("Plan main" in line for line in later) == 1
    assert any("pending" in line and "write the test" in line for line in first), first
    assert any("completed" in line for line in later) and not any("completed" in line for line in first), lines
