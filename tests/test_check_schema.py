"""The schema rewrites `check` validates with give the same verdicts as the schemas as published.

fastjsonschema on the published definitions is the reference; the fast rewrite (annotations dropped,
tagged unions testing their tag first) and the precise one (if/then) must accept and reject exactly the
same values, over realistic messages and random mutations of them.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from typing import Any

import fastjsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_relay.protocol.check.schema import overlay_v2, reachable, rewrite_unions, strip_annotations

TEXT = {"type": "text", "text": "hi"}
SEEDS: dict[tuple[int, str], list[Any]] = {
    (1, "SessionNotification"): [
        {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "content": TEXT}},
        {"sessionId": "s", "update": {"sessionUpdate": "tool_call", "toolCallId": "c", "title": "t", "kind": "read"}},
        {
            "sessionId": "s",
            "update": {"sessionUpdate": "plan", "entries": [{"content": "x", "priority": "high", "status": "pending"}]},
        },
    ],
    (2, "UpdateSessionNotification"): [
        {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "messageId": "m", "content": TEXT}},
        {"sessionId": "s", "update": {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}},
        {
            "sessionId": "s",
            "update": {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "c",
                "content": [{"type": "content", "content": TEXT}],
            },
        },
        {"sessionId": "s", "update": {"sessionUpdate": "session_message_chunk", "messageId": "m", "content": TEXT}},
    ],
    (1, "PromptRequest"): [
        {"sessionId": "s", "prompt": [TEXT, {"type": "resource_link", "uri": "file:///a", "name": "a"}]}
    ],
    (2, "PromptRequest"): [
        {"sessionId": "s", "prompt": [TEXT, {"type": "image", "data": "AA==", "mimeType": "image/png"}]}
    ],
    (1, "SetSessionConfigOptionRequest"): [
        {"sessionId": "s", "configId": "c", "value": "v"},
        {"sessionId": "s", "configId": "c", "type": "boolean", "value": True},
    ],
    (2, "RequestPermissionResponse"): [
        {"outcome": {"outcome": "selected", "optionId": "o"}},
        {"outcome": {"outcome": "cancelled"}},
    ],
}
FORMATS = {
    f: (lambda _v: True)
    for f in ("int32", "int64", "uint16", "uint32", "uint64", "double", "uri", "date-time", "regex")
}


@cache
def defs(version: int) -> dict[str, Any]:
    text = (
        resources.files("acp_relay.protocol.check")
        .joinpath("schemas", f"v{version}", "schema.unstable.json")
        .read_text()
    )
    doc = json.loads(text)
    return (overlay_v2(doc) if version == 2 else doc)["$defs"]


@cache
def validators(version: int, name: str) -> tuple[Any, Any, Any]:
    root = {"$ref": f"#/$defs/{name}"}
    plain = strip_annotations(defs(version))
    out = [fastjsonschema.compile({**root, "$defs": defs(version)}, formats=FORMATS)]
    for precise in (False, True):
        rewritten = rewrite_unions(plain, precise)
        out.append(fastjsonschema.compile({**root, "$defs": reachable(root, rewritten)}, formats=FORMATS))
    return out[0], out[1], out[2]


def verdict(fn: Any, value: Any) -> bool:
    try:
        fn(value)
    except fastjsonschema.JsonSchemaValueException:
        return False
    return True


leaf = (
    st.none()
    | st.booleans()
    | st.integers(-2, 2)
    | st.sampled_from(["", "x", "text", "image", "idle", "cancelled", "selected", "boolean", "_x"])
)
json_values = st.recursive(
    leaf,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["type", "text", "content", "state", "x"]), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def mutated(draw: Any, seed: Any) -> Any:
    value = copy.deepcopy(seed)
    for _ in range(draw(st.integers(1, 3))):
        path: list[Any] = []
        node = value
        while isinstance(node, (dict, list)) and node and draw(st.booleans()):
            key = draw(st.sampled_from(sorted(node) if isinstance(node, dict) else list(range(len(node)))))
            path.append(key)
            node = node[key]
        if not path:
            continue
        parent = value
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict) and draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(json_values)
    return value


@pytest.mark.parametrize("key", sorted(SEEDS), ids=lambda k: f"v{k[0]}-{k[1]}")
def test_seeds_valid_in_all_three(key: tuple[int, str]) -> None:
    for seed in SEEDS[key]:
        assert [verdict(fn, seed) for fn in validators(*key)] == [True, True, True]


@pytest.mark.parametrize("key", sorted(SEEDS), ids=lambda k: f"v{k[0]}-{k[1]}")
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_rewrites_keep_every_verdict(key: tuple[int, str], data: Any) -> None:
    seed = data.draw(st.sampled_from(SEEDS[key]))
    value = data.draw(mutated(seed))
    published, fast, precise = (verdict(fn, value) for fn in validators(*key))
    assert fast == published and precise == published, value


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("UpdateSessionNotification", {"sessionId": "s", "update": {"sessionUpdate": "session_message_chunk"}}),
        ("UpdateSessionNotification", {"sessionId": "s", "update": {"sessionUpdate": "session_message", "content": 1}}),
    ],
)
def test_a_malformed_overlay_variant_is_not_taken_for_an_unknown_one(name: str, value: Any) -> None:
    # The seed page's new variants are known tags: the `other` fallback must not accept a broken instance.
    assert [verdict(fn, value) for fn in validators(2, name)] == [False, False, False]


@pytest.mark.parametrize(
    ("version", "method", "kind", "value", "message"),
    [
        (
            1,
            "initialize",
            "request",
            {"protocolVersion": 1, "clientInfo": {"name": "zed"}},
            "params.clientInfo is missing the required field `version`",
        ),
        (
            2,
            "session/set_config_option",
            "request",
            {"sessionId": "s", "configId": "m", "value": "x"},
            "params is missing the required field `type`",
        ),
        (2, "session/prompt", "request", {}, "params is missing the required fields `prompt`, `sessionId`"),
        (
            2,
            "session/prompt",
            "request",
            {"sessionId": "s", "prompt": [{"type": "image", "data": "x"}]},
            "params.prompt[0] is missing the required field `mimeType`",
        ),
        (
            1,
            "session/prompt",
            "response",
            {"stopReason": "finished"},
            'result.stopReason must be one of end_turn, max_tokens, max_turn_requests, refusal, cancelled (got "finished")',
        ),
    ],
)
def test_schema_messages_say_what_is_missing(version: int, method: str, kind: str, value: Any, message: str) -> None:
    """Messages people can act on: the missing field by name, as a sentence (not the validator's wording)."""
    from acp_relay.protocol.check.schema import schema_set

    prefix = "result" if kind == "response" else "params"
    assert schema_set(version).validate(method, kind, value, prefix) == message
