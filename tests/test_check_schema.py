"""`check`'s schema verdicts are those of the schemas as published, and its messages say what is wrong.

jsonschema-rs on a whole published definition is the reference; SchemaSet.validate (session/update checked
envelope first, then its variant) must accept and reject exactly the same values, over realistic messages
and random mutations of them, and say the same thing each time it is asked.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_relay.protocol.check.schema import SchemaSet, _Base64, overlay_v2, schema_set

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
METHODS = {
    "SessionNotification": ("session/update", "notification"),
    "UpdateSessionNotification": ("session/update", "notification"),
    "PromptRequest": ("session/prompt", "request"),
    "SetSessionConfigOptionRequest": ("session/set_config_option", "request"),
    "RequestPermissionResponse": ("session/request_permission", "response"),
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
def published(version: int, name: str) -> Any:
    # contentEncoding asserted, as check does (and did with fastjsonschema): an annotation in 2020-12
    schema = {"$ref": f"#/$defs/{name}", "$defs": defs(version)}
    return jsonschema_rs.Draft202012Validator(schema, keywords={"contentEncoding": _Base64})


def verdicts(version: int, name: str, value: Any) -> tuple[bool, bool]:
    """(the published definition's verdict, check's)."""
    method, kind = METHODS[name]
    return published(version, name).is_valid(value), schema_set(version).validate(method, kind, value, "x") is None


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
        assert verdicts(*key, seed) == (True, True)


@pytest.mark.parametrize("key", sorted(SEEDS), ids=lambda k: f"v{k[0]}-{k[1]}")
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_check_keeps_every_verdict_of_the_published_schema(key: tuple[int, str], data: Any) -> None:
    seed = data.draw(st.sampled_from(SEEDS[key]))
    value = data.draw(mutated(seed))
    update = value.get("update") if isinstance(value, dict) else None
    tag = update.get("sessionUpdate") if isinstance(update, dict) else None
    if isinstance(tag, str) and tag.startswith("_"):
        return  # an extension's update: check reports it as info and validates nothing (the schema may not say)
    reference, ours = verdicts(*key, value)
    assert ours == reference, value


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("UpdateSessionNotification", {"sessionId": "s", "update": {"sessionUpdate": "session_message_chunk"}}),
        ("UpdateSessionNotification", {"sessionId": "s", "update": {"sessionUpdate": "session_message", "content": 1}}),
    ],
)
def test_a_malformed_new_variant_is_not_taken_for_an_unknown_one(name: str, value: Any) -> None:
    # The Prompt Lifecycle variants are known tags: the `other` fallback must not accept a broken instance.
    assert verdicts(2, name, value) == (False, False)


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
    prefix = "result" if kind == "response" else "params"
    assert schema_set(version).validate(method, kind, value, prefix) == message


HOSTILE: list[Any] = [
    {"sessionId": "s", "prompt": [{"type": "text", "text": "x", "_meta": {"a": [[[[[[[[]]]]]]]] * 1}}]},
    {"sessionId": "s", "prompt": [{"type": "text", "text": 10**400}]},
    {"sessionId": "s", "prompt": [{"type": "text", "text": "x" * (8 << 20), "annotations": 7}]},
    {"sessionId": "s", "prompt": [{"type": "image", "data": 1}] * 10_000},
]


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("value", [*HOSTILE, {"sessionId": nested(100_000), "prompt": []}], ids=range(5))
def test_hostile_values_get_a_short_finding_the_same_each_time(value: Any) -> None:
    """Deep, huge or many-times-wrong values: a one-line finding (or none), never an exception, and the same
    one from a fresh SchemaSet (no state of a previous validation decides what is reported)."""
    said = [SchemaSet(2).validate("session/prompt", "request", value, "params") for _ in range(2)]
    said.append(schema_set(2).validate("session/prompt", "request", value, "params"))
    assert said[0] == said[1] == said[2]
    assert said[0] is None or (said[0].startswith("params") and len(said[0]) < 300 and "\n" not in said[0])


def test_the_deepest_value_says_it_could_not_be_validated() -> None:
    value = {"sessionId": nested(100_000), "prompt": []}
    assert schema_set(2).validate("session/prompt", "request", value, "params") == (
        "params could not be validated (ValueError)"
    )


def test_the_first_error_in_the_schemas_order_is_the_one_reported() -> None:
    value = {"sessionId": 5, "prompt": [{"type": "image", "data": "x"}]}
    assert schema_set(2).validate("session/prompt", "request", value, "params") == (
        "params.sessionId must be string (got 5)"
    )


def _raw_defs(version: int, file: str) -> dict[str, Any]:
    text = resources.files("acp_relay.protocol.check").joinpath("schemas", f"v{version}", file).read_text()
    return json.loads(text)["$defs"]


@pytest.mark.parametrize("version", [1, 2])
def test_the_unstable_schema_check_uses_requires_nothing_the_stable_one_does_not(version: int) -> None:
    """check validates against schema.unstable.json: an agent keeping to the stable schema must get no
    finding from it that schema.json would not give (no field required, no object closed, no tag or enum
    value dropped that the stable file has)."""
    stable, unstable = _raw_defs(version, "schema.json"), _raw_defs(version, "schema.unstable.json")
    assert set(stable) <= set(unstable)
    for name, body in stable.items():
        wider = unstable[name]
        assert set(wider.get("required", ())) <= set(body.get("required", ())), name
        assert set(body.get("properties", {})) <= set(wider.get("properties", {})), name
        if wider.get("additionalProperties") is False:
            assert body.get("additionalProperties") is False, name
        assert set(body.get("enum", ())) <= set(wider.get("enum", body.get("enum", ()))), name
        assert _tags(body) <= _tags(wider), name


def _tags(body: dict[str, Any]) -> set[str]:
    """What tells a union's branches apart: each branch's `const`, and the `const`s of its properties."""
    branches = body.get("anyOf") or body.get("oneOf") or []
    return {
        json.dumps([b.get("const"), {k: v["const"] for k, v in b.get("properties", {}).items() if "const" in v}])
        for b in branches
    }


def test_a_v1_prompt_result_without_message_id_is_valid() -> None:
    """Real v1 agents send no messageId: neither v1 file asks for one, so check says nothing."""
    for file in ("schema.json", "schema.unstable.json"):
        assert "messageId" not in _raw_defs(1, file)["PromptResponse"].get("required", ())
    assert schema_set(1).validate("session/prompt", "response", {"stopReason": "end_turn"}, "result") is None


def test_v2_leaves_message_id_presence_to_the_lifecycle_rules() -> None:
    """2.4.0's v2 requires messageId on the prompt result and on message updates; check takes the
    requirement out of the schema only (lifecycle.accept-message-id and update-message-id report it, once),
    keeping its type."""
    assert "messageId" in _raw_defs(2, "schema.unstable.json")["PromptResponse"]["required"]
    v2 = schema_set(2)
    assert v2.validate("session/prompt", "response", {}, "result") is None
    assert v2.validate("session/prompt", "response", {"messageId": 5}, "result") == (
        "result.messageId must be string (got 5)"
    )
    chunk = {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "content": TEXT}}
    assert v2.validate("session/update", "notification", chunk, "params") is None
