"""A bad protocolVersion in the initialize answer (issue 30, item 15): reported under its own rule with the kit's
requirement it breaks, and the rest of the connection still judged, by the version the messages show."""

from __future__ import annotations

from typing import Any

import pytest
from check_helpers import V1_AGENT_CAPS, V1_CLIENT_CAPS, V2_AGENT_CAPS, Script

from acp_relay.protocol.check.rules import Finding
from acp_relay.protocol.jsonrpc import A2C, C2A

ABSENT: Any = object()


def exchange(version: int, answered: Any, *, asked: Any = None, fields: int | None = None) -> Script:
    """An initialize exchange of `version`'s shape (or `fields`' shape) whose answer is `answered` (ABSENT: no
    protocolVersion at all); the client asks for `asked` (default: `version`)."""
    s = Script(version, init=False)
    shape = fields or version
    if shape == 1:
        params: dict[str, Any] = {"clientCapabilities": V1_CLIENT_CAPS}
        result: dict[str, Any] = {"agentCapabilities": V1_AGENT_CAPS, "agentInfo": {"name": "a", "version": "1"}}
    else:
        params = {"info": {"name": "e", "version": "1"}, "capabilities": {}}
        result = {"info": {"name": "a", "version": "1"}, "capabilities": V2_AGENT_CAPS}
    params["protocolVersion"] = version if asked is None else asked
    if answered is not ABSENT:
        result["protocolVersion"] = answered
    rid = s.request(C2A, "initialize", params)
    s.respond(A2C, rid, result)
    return s


def bad_v1_stop(s: Script) -> int:
    """A v1 turn answered with a stop reason v1 does not define; returns the answer's frame."""
    sid = s.new_session()
    rid = s.prompt_request(sid)
    return s.respond(A2C, rid, {"stopReason": "exploded"})


def bad_v2_stop(s: Script) -> int:
    """A v2 turn that ends with a stop reason neither standard nor `_`-prefixed; returns the idle's frame."""
    sid = s.new_session()
    s.open_turn(sid)
    return s.state(sid, "idle", stopReason="exploded")


def only(found: list[Finding], rule: str) -> Finding:
    hits = [f for f in found if f.rule == rule]
    assert len(hits) == 1, [(f.rule, f.message) for f in found]
    return hits[0]


@pytest.mark.parametrize("answered", ["1", 1.5, 1.0, None, ABSENT, True, [1]])
def test_v1_bad_version_is_its_own_finding_and_the_rest_is_judged(answered: Any) -> None:
    s = exchange(1, answered)
    stop = bad_v1_stop(s)
    found = s.check()
    fault = only(found, "protocol.version-value")
    assert fault.frame == 2 and fault.severity == "error" and fault.tck == "ACP-INIT-001"
    assert "judged as v1" in fault.message
    said = " has no protocolVersion" if answered is ABSENT else "'s protocolVersion is "
    assert fault.message.startswith(f"the initialize result{said}")
    assert not [f for f in found if f.rule == "protocol.unknown-version"]
    # judged, not JSON-RPC only: the later stop reason is caught, under the kit's id for the prompt's answer
    late = only(found, "schema.result")
    assert late.frame == stop and "stopReason" in late.message and late.tck == "ACP-PROMPT-001"


@pytest.mark.parametrize("answered", ["2", 2.0, None, ABSENT, {"v": 2}])
def test_v2_bad_version_is_its_own_finding_and_the_rest_is_judged(answered: Any) -> None:
    s = exchange(2, answered)
    stop = bad_v2_stop(s)
    found = s.check()
    fault = only(found, "protocol.version-value")
    assert fault.tck == "ACP-INIT-201" and "judged as v2" in fault.message
    late = only(found, "lifecycle.custom-stop-reason")
    assert late.frame == stop and late.tck == "ACP-STATE-203"


def test_the_version_shown_by_the_fields_wins_over_the_one_asked() -> None:
    """v1-shaped messages whose client asked for 2 and whose agent answered "1": judged as v1, and said why."""
    s = exchange(1, "1", asked=2)
    bad_v1_stop(s)
    found = s.check()
    assert "fields are v1's" in only(found, "protocol.version-value").message
    assert only(found, "schema.result").tck == "ACP-PROMPT-001"


def test_with_nothing_to_go_by_only_json_rpc_is_checked() -> None:
    """No field of either version, no version asked, none stored: said so, and the JSON-RPC rules still run."""
    s = Script(1, init=False)
    rid = s.request(C2A, "initialize", {})
    s.respond(A2C, rid, {"protocolVersion": "x"})
    s.line(A2C, b"not json")
    found = s.check()
    assert "JSON-RPC checks only" in only(found, "protocol.version-value").message
    assert only(found, "rpc.not-json").frame == 3


def test_unknown_integer_version_the_client_did_not_ask_for() -> None:
    """The client asks for 1, the agent answers 7 and the client goes on: not JSON-RPC only any more."""
    s = exchange(1, 7)
    stop = bad_v1_stop(s)
    found = s.check()
    unknown = only(found, "protocol.unknown-version")
    assert "judged as v1" in unknown.message and unknown.tck is None  # a version we do not know is no fault
    assert only(found, "protocol.version").tck == "ACP-INIT-002"
    assert not [f for f in found if f.rule == "protocol.version-value"]
    assert only(found, "schema.result").frame == stop


def test_known_version_the_client_did_not_ask_for_with_the_asked_versions_fields() -> None:
    """Asked 1, answered 2, every field v1's and the client goes on in v1: reported, and judged as v1 (the
    messages' version), so the v1 turn's bad stop reason is caught rather than v2 rules firing on v1 turns."""
    s = exchange(1, 2)
    stop = bad_v1_stop(s)
    found = s.check()
    version = only(found, "protocol.version")
    assert "judged as v1" in version.message and version.tck == "ACP-INIT-002"
    assert only(found, "schema.result").frame == stop
    assert not [f for f in found if f.rule.startswith("lifecycle.")]


def test_a_good_version_says_nothing() -> None:
    for version in (1, 2):
        s = exchange(version, version)
        (bad_v1_stop if version == 1 else bad_v2_stop)(s)
        rules = {f.rule for f in s.check()}
        assert not rules & {"protocol.version-value", "protocol.unknown-version", "protocol.version"}


def test_a_result_that_is_not_an_object_is_one_schema_finding() -> None:
    s = Script(1, init=False)
    rid = s.request(C2A, "initialize", {"protocolVersion": 1, "clientCapabilities": V1_CLIENT_CAPS})
    s.respond(A2C, rid, ["not", "an", "object"])
    s.prompt_request("sess-x")  # still judged as v1: the version asked for
    found = s.check()
    assert not [f for f in found if f.rule in ("protocol.version-value", "protocol.unknown-version")]
    assert only(found, "schema.result").tck == "ACP-INIT-001"
    assert only(found, "protocol.unknown-session").frame == 3
