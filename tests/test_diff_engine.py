"""protocol/diff: the alignment against a brute-force LCS, and the layers on small hand-made sessions."""

from __future__ import annotations

import random
import re
from typing import Any

from acp_relay.protocol.diff import compare, digest, opcodes, unified
from acp_relay.protocol.diff.align import intern
from acp_relay.protocol.materialize import Event


def lcs(a: list[int], b: list[int]) -> int:
    t = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) - 1, -1, -1):
        for j in range(len(b) - 1, -1, -1):
            t[i][j] = t[i + 1][j + 1] + 1 if a[i] == b[j] else max(t[i + 1][j], t[i][j + 1])
    return t[0][0]


def test_opcodes_rebuild_b_and_are_minimal() -> None:
    rng = random.Random(12)
    for _ in range(1500):
        alphabet = rng.randint(1, 4)
        a = [rng.randrange(alphabet) for _ in range(rng.randint(0, 14))]
        b = [rng.randrange(alphabet) for _ in range(rng.randint(0, 14))]
        ops, gave_up = opcodes(a, b)
        assert not gave_up
        rebuilt, equal, pos = [], 0, (0, 0)
        for tag, i1, i2, j1, j2 in ops:
            assert (i1, j1) == pos
            pos = (i2, j2)
            if tag == "equal":
                assert a[i1:i2] == b[j1:j2]
                equal += i2 - i1
            rebuilt += b[j1:j2]
        assert pos == (len(a), len(b)) and rebuilt == b
        assert equal == lcs(a, b), (a, b, ops)


def test_too_many_edits_are_reported_replaced_not_aligned() -> None:
    a, b = intern([f"a{i}" for i in range(3000)], [f"b{i}" for i in range(3000)])
    ops, gave_up = opcodes(a, b, max_edits=100)
    assert gave_up and ops == [("replace", 0, 3000, 0, 3000)]


def test_unified_names_the_section_of_each_hunk() -> None:
    a = ["=== turn 1 ===", "x", "y", "=== turn 2 ===", "p", "q", "r", "s", "t", "u", "v"]
    b = ["=== turn 1 ===", "x", "y", "=== turn 2 ===", "p", "q", "r", "s", "t", "CHANGED", "v"]
    sec = lambda i: "turn 1" if i < 3 else "turn 2"  # noqa: E731
    hunks, _ = unified(a, b, sec, sec)
    assert len(hunks) == 1 and hunks[0].section == "turn 2"
    assert hunks[0].lines == [" r", " s", " t", "-u", "+CHANGED", " v"]
    assert hunks[0].header() == "@@ -7,5 +7,5 @@ turn 2"


def _session(text: str, *, stop: str = "end_turn", slow: float = 0.01, permission: str = "allow-once") -> Any:
    msgs: list[tuple[str, dict]] = [
        ("c2a", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}),
        ("a2c", {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentInfo": {"name": "x"}}}),
        ("c2a", {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}}),
        ("a2c", {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s"}}),
        (
            "c2a",
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "session/prompt",
                "params": {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]},
            },
        ),
    ]
    for chunk in (text[:3], text[3:]):
        u = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": chunk}}
        msgs.append(("a2c", {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": u}}))
    msgs += [
        (
            "a2c",
            {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "session/request_permission",
                "params": {
                    "sessionId": "s",
                    "toolCall": {"toolCallId": "c1", "title": "Run", "kind": "execute"},
                    "options": [
                        {"optionId": "allow-once", "name": "Allow", "kind": "allow_once"},
                        {"optionId": "no", "name": "No", "kind": "reject_once"},
                    ],
                },
            },
        ),
        ("c2a", {"jsonrpc": "2.0", "id": 7, "result": {"outcome": {"outcome": "selected", "optionId": permission}}}),
        ("a2c", {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": stop}}),
    ]
    requests: dict[tuple[str, Any], dict] = {}
    events = []
    for i, (direction, m) in enumerate(msgs):
        ts = i * 0.001 + (slow if "result" in m and m.get("id") == 2 else 0.0)
        req = requests.get(("a2c" if direction == "c2a" else "c2a", m["id"])) if "method" not in m else None
        if "method" in m and "id" in m:
            requests[(direction, m["id"])] = m
        events.append(Event(i, ts, direction, m, request=req))
    return digest("s", events)


def test_the_same_session_is_the_same_in_every_layer() -> None:
    layers = compare(_session("hello world"), _session("hello world"))
    assert [(x.name, x.differs) for x in layers] == [
        ("conversation", False),
        ("protocol", False),
        ("metadata", False),
        ("timing", False),
    ]


def test_changed_text_is_named_by_turn_and_ignored_on_request() -> None:
    conv = compare(_session("hello world"), _session("hello there"))[0]
    assert conv.differs and conv.data["turns_changed"] == ["turn 1"]
    assert "-agent: hello world" in conv.lines and "+agent: hello there" in conv.lines
    assert not compare(_session("a"), _session("b"), ignore=frozenset({"conversation"}))[0].differs


def test_permission_outcome_and_stop_reason_are_conversation() -> None:
    conv = compare(_session("x", permission="allow-once"), _session("x", permission="no", stop="refusal"))[0]
    assert "-permission: Run -> selected allow_once" in conv.lines
    assert "+permission: Run -> selected reject_once" in conv.lines
    assert "+stop: refusal" in conv.lines
    ignored = compare(
        _session("x", permission="allow-once"), _session("x", permission="no"), ignore=frozenset({"permissions"})
    )
    assert not ignored[0].differs and not ignored[1].differs


def test_protocol_streams_count_as_runs() -> None:
    a, b = _session("hello"), _session("hello")
    b.tokens.insert(6, b.tokens[5])  # one more chunk
    b.token_turns.insert(6, 1)
    proto = compare(a, b)[1]
    assert proto.differs
    assert "-agent -> editor notification session/update agent_message_chunk x2" in proto.lines
    assert "+agent -> editor notification session/update agent_message_chunk x3" in proto.lines


def test_timing_differs_only_past_max_slowdown() -> None:
    fast, slow = _session("x", slow=0.0), _session("x", slow=1.0)
    assert not compare(fast, slow)[3].differs
    assert compare(fast, slow, max_slowdown=2.0)[3].differs
    assert not compare(fast, slow, max_slowdown=5000.0)[3].differs


def _planned(status: str, extra_update: bool = False) -> Any:
    """A one-turn v1 session whose plan ends at `status` (and, with extra_update, one more mode update)."""
    prompt = {"sessionId": "s", "prompt": [{"type": "text", "text": "go"}]}
    msgs: list[tuple[str, dict]] = [
        ("c2a", {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}}),
        ("a2c", {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s"}}),
        ("c2a", {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": prompt}),
    ]
    updates = [{"sessionUpdate": "plan", "entries": [{"content": "step", "priority": "high", "status": status}]}]
    if extra_update:
        updates.append({"sessionUpdate": "current_mode_update", "currentModeId": "code"})
    for u in updates:
        msgs.append(("a2c", {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": u}}))
    msgs.append(("a2c", {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}))
    requests: dict[Any, dict] = {}
    events = []
    for i, (direction, m) in enumerate(msgs):
        if "method" in m and "id" in m:
            requests[m["id"]] = m
        events.append(Event(i, i * 0.001, direction, m, request=None if "method" in m else requests.get(m["id"])))
    return digest("s", events)


def test_plan_status_reads_as_a_word_and_an_insertion_has_no_backwards_range() -> None:
    conv = compare(_planned("pending"), _planned("completed"))[0]
    assert "-  [pending] step" in conv.lines and "+  [completed] step" in conv.lines, conv.lines
    proto = compare(_planned("pending"), _planned("pending", extra_update=True))[1]
    heads = [line for line in proto.lines if line.startswith("@@")]
    assert heads and all(not re.search(r"items (\d+)-(\d+)", h) or _forward(h) for h in heads), heads
    assert any("A none after item" in h for h in heads), heads


def _forward(head: str) -> bool:
    return all(int(a) <= int(b) for a, b in re.findall(r"items (\d+)-(\d+)", head))


def test_ignored_parts_leave_the_protocol_layer() -> None:
    """--ignore thoughts/tools/plans/permissions drops those variants' and methods' tokens, nothing else."""
    from acp_relay.protocol.diff.compare import runs

    upd = "session/update"
    tokens = [
        ("a2c", "notification", upd, "agent_thought_chunk"),
        ("a2c", "notification", upd, "agent_message_chunk"),
        ("a2c", "notification", upd, "tool_call_update"),
        ("a2c", "notification", upd, "terminal_output_chunk"),
        ("a2c", "request", "fs/read_text_file", None),
        ("a2c", "request", "terminal/create", None),
        ("a2c", "notification", upd, "plan_removed"),
        ("a2c", "request", "session/request_permission", None),
        ("c2a", "response", "session/request_permission", None),
        ("a2c", "notification", upd, "_custom"),
        ("c2a", "invalid", None, None),
    ]
    kept = {
        "thoughts": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
        "tools": [0, 1, 6, 7, 8, 9, 10],
        "plans": [0, 1, 2, 3, 4, 5, 7, 8, 9, 10],
        "permissions": [0, 1, 2, 3, 4, 5, 6, 9, 10],
        "timing": list(range(len(tokens))),
    }
    for part, want in kept.items():
        items, _ = runs(tokens, [0] * len(tokens), frozenset({part}))
        assert [t for t, _ in items] == [tokens[i] for i in want], part
