"""The conformance kit table (protocol/check/tck.py): every id of both registries once, each `rule`/`partial`
row backed by real rules, and severities that follow the kit's tiers."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from check_helpers import V1_AGENT_CAPS, Script

from acp_relay.protocol.check.engine import check_frames
from acp_relay.protocol.check.rules import ERROR, RULES
from acp_relay.protocol.check.tck import (
    ACTIVE,
    CAPABILITY,
    INFO,
    MANDATORY,
    MISSING,
    PARTIAL,
    REQUIREMENTS,
    RULE,
    STATUSES,
    picks_for,
    requirement,
    requirements,
    tck_ids,
)
from acp_relay.protocol.jsonrpc import A2C, C2A

# The registries' sizes at the commits read (EugeneTheDev/acp-tck src/tck/v1|v2/requirements.py).
SIZES = {1: 56, 2: 106}


@pytest.mark.parametrize("version", [1, 2])
def test_each_registry_id_once(version: int) -> None:
    ids = [r.id for r in requirements(version)]
    assert len(ids) == SIZES[version]
    assert [i for i, n in Counter(ids).items() if n > 1] == []
    assert all(i.startswith("ACP-") for i in ids)


def test_rows_name_real_rules_and_explain_themselves() -> None:
    for r in REQUIREMENTS:
        assert r.status in STATUSES
        assert set(r.rules) <= set(RULES), (r.id, set(r.rules) - set(RULES))
        if r.status in (RULE, PARTIAL):
            assert r.rules, r.id
        if r.status in (PARTIAL, ACTIVE, MISSING):
            assert r.note, f"{r.id}: a {r.status} row says why"
        if r.status in (ACTIVE, MISSING):
            assert not r.rules, r.id


def test_musts_are_errors() -> None:
    """A MANDATORY or CAPABILITY requirement judged in full has at least one error rule behind it."""
    for r in REQUIREMENTS:
        if r.status == RULE and r.tier in (MANDATORY, CAPABILITY):
            assert any(RULES[x].severity == ERROR for x in r.rules), r.id


def test_informational_rows_assert_nothing_unless_we_judge_them() -> None:
    for r in REQUIREMENTS:
        if r.status == INFO:
            assert not r.rules


def test_tck_ids_per_version() -> None:
    assert tck_ids("protocol.agent-info", 1) == ("ACP-INIT-004",)
    assert tck_ids("protocol.agent-info", 2) == ()
    assert tck_ids("lifecycle.cancel-response", 1) == ("ACP-CANCEL-001", "ACP-CLOSE-002")
    assert set(tck_ids("protocol.session-ids", None)) == {"ACP-SESSION-001", "ACP-SESSION-002"}
    assert tck_ids("rpc.blank-line", 2) == ()


def test_most_rules_have_a_kit_counterpart() -> None:
    """Not a target, a tripwire: a rule added without thinking about the kit shows up here."""
    without = sorted(r for r in RULES if not tck_ids(r, None))
    assert without == sorted(
        {
            "rpc.blank-line",
            "rpc.cr-line",
            "rpc.unterminated",
            "rpc.id-type",
            "rpc.id-discouraged",
            "rpc.params-type",
            "rpc.answered-twice",
            "rpc.id-reused",
            "schema.extension",
            "protocol.initialize-first",
            "protocol.initialize-twice",
            "protocol.wrong-side",
            "protocol.wrong-kind",
            "protocol.prompt-content",
            "lifecycle.permission-cancelled",
            "lifecycle.compaction-order",
            "lifecycle.compaction-end",
            "lifecycle.compaction-reuse",
            "lifecycle.compaction-fields",
            "lifecycle.notice-replay",
            "lifecycle.subagent-state",
            "protocol.unknown-version",  # a version this checker does not know is no fault (issue 30, item 15)
        }
    )


# -- each finding names the one requirement it breaks (issue 30, item 16) -----------------------------------
def test_every_rule_with_several_ids_chooses_among_them() -> None:
    for rule in RULES:
        for version in (1, 2):
            if len(tck_ids(rule, version)) > 1:
                assert picks_for(rule, version), (rule, version)


def test_a_pick_is_always_one_of_the_rules_ids() -> None:
    topics = ["", "_x", "after-error", "batch", "empty", "relative", "env", "auth", "cancelled", "other-reason"]
    topics += ["session/close", "session/cancel", "session/load", "fs/read_text_file", "terminal/create"]
    topics += ["tool_call_update", "plan_update", "terminal_update", "current_mode_update", "requires_action"]
    messages = ["", "session/new: result.configOptions[0] is bad", "initialize: result.info is bad", "x: a._meta"]
    for rule in RULES:
        for version in (1, 2, None):
            for topic in topics:
                for message in messages:
                    rid = requirement(rule, version, topic, message)
                    assert rid is None or rid in tck_ids(rule, version), (rule, version, topic, message, rid)


@pytest.mark.parametrize(
    ("rule", "version", "topic", "message", "expected"),
    [
        ("schema.result", 1, "", "session/prompt: result.stopReason 'x' is not one of ...", "ACP-PROMPT-001"),
        ("schema.result", 1, "", "session/new: result.modes.currentModeId must be a string", "ACP-MODES-001"),
        ("schema.result", 1, "", "session/load: result must be an object", "ACP-LOAD-001"),
        ("schema.result", 1, "", "initialize: result.agentInfo is missing `name`", "ACP-INIT-001"),
        ("schema.result", 2, "", "initialize: result.info is missing the required field `version`", "ACP-INIT-203"),
        ("schema.result", 2, "", "initialize: result.capabilities.session must be an object", "ACP-INIT-204"),
        ("schema.result", 2, "", "session/resume: result.configOptions[0] is bad", "ACP-CONFIG-203"),
        ("schema.result", 2, "", "session/new: result._meta must be an object or null", "ACP-META-201"),
        ("schema.result", 2, "", "session/list: result is missing the required field `sessions`", "ACP-LIST-201"),
        ("schema.result", 2, "", "_vendor/x: result is bad", "ACP-SCHEMA-001"),
        ("schema.params", 1, "current_mode_update", "session/update: params.update is bad", "ACP-MODES-002"),
        ("schema.params", 1, "agent_message_chunk", "session/update: params.update is bad", "ACP-PROMPT-002"),
        ("schema.params", 1, "session/new", "session/new: params is missing `cwd`", "ACP-SCHEMA-001"),
        ("schema.params", 2, "tool_call_update", "session/update: a.update missing `toolCallId`", "ACP-PATCH-204"),
        ("schema.params", 2, "tool_call_update", "session/update: a.update.kind not a string", "ACP-PROMPT-205"),
        ("schema.params", 2, "plan_update", "session/update: params.update.plan is missing `planId`", "ACP-PATCH-205"),
        ("schema.params", 2, "terminal_output_chunk", "session/update: a.update.data not base64", "ACP-PATCH-207"),
        ("schema.params", 2, "session/request_permission", "session/request_permission: params.title", "ACP-PERM-201"),
        ("schema.params", 2, "session/cancel", "session/cancel: params is missing `sessionId`", "ACP-CANCEL-206"),
        ("rpc.notification-answered", 2, "session/cancel", "", "ACP-CANCEL-205"),
        ("rpc.notification-answered", 2, "_zed/ping", "", "ACP-EXT-201"),
        ("rpc.notification-answered", 2, "batch", "", "ACP-BATCH-202"),
        ("rpc.notification-answered", 1, "session/cancel", "", "ACP-JSONRPC-003"),
        ("protocol.unanswered", 1, "_vendor/op", "", "ACP-EXT-001"),
        ("protocol.unanswered", 2, "after-error", "", "ACP-JSONRPC-005"),
        ("protocol.unanswered", 2, "session/prompt", "", "ACP-JSONRPC-001"),
        ("protocol.client-capability", 1, "fs/write_text_file", "", "ACP-CLIENTCAP-001"),
        ("protocol.client-capability", 1, "terminal/create", "", "ACP-CLIENTCAP-002"),
        ("protocol.client-capability", 1, "elicitation/create", "", "ACP-CLIENTCAP-003"),
        ("protocol.client-capability", 1, "configOptions.boolean", "", "ACP-CONFIG-003"),
        ("protocol.client-capability", 1, "plan_update", "", None),
        ("protocol.agent-capability", 1, "session/list", "", "ACP-LIST-001"),
        ("protocol.agent-capability", 1, "session/fork", "", None),
        ("protocol.session-ids", 2, "empty", "", "ACP-SESSION-001"),
        ("protocol.session-ids", 2, "", "", "ACP-SESSION-002"),
        ("protocol.list-cwd", 2, "relative", "", "ACP-LIST-204"),
        ("protocol.list-cwd", 1, "relative", "", None),
        ("lifecycle.cancel-response", 1, "session/close", "", "ACP-CLOSE-002"),
        ("lifecycle.cancel-idle", 2, "session/close", "", "ACP-CANCEL-208"),
        ("lifecycle.cancel-idle", 2, "other-reason", "", "ACP-CANCEL-203"),
        ("lifecycle.turn-open", 2, "requires_action", "", "ACP-PERM-201"),
        ("lifecycle.custom-stop-reason", 2, "cancelled", "", "ACP-CANCEL-207"),
        ("patch.ids", 2, "session/prompt", "", "ACP-PROMPT-201"),
        ("patch.ids", 2, "terminalId", "", None),
        ("protocol.version-value", 1, "", "", "ACP-INIT-001"),
        ("protocol.version-value", 2, "", "", "ACP-INIT-201"),
        ("rpc.not-utf8", None, "", "", "ACP-TRANSPORT-002"),  # the same id in both versions
        ("rpc.not-json", None, "", "", None),  # TRANSPORT-001 or -201: the version decides
    ],
)
def test_the_requirement_picked(rule: str, version: int | None, topic: str, message: str, expected: Any) -> None:
    assert requirement(rule, version, topic, message) == expected


def _tags(s: Script) -> list[tuple[str, str | None]]:
    rows = [(i, d, raw, False, None) for i, (d, raw) in enumerate(s.frames, 1)]
    return [(f.rule, f.tck) for f in check_frames(rows)[0]]


def test_findings_carry_one_id_each_by_what_was_checked() -> None:
    """The planted faults of the issue's kind: each finding names the requirement it broke, never its rule's
    other ids (a v1 load without the capability is ACP-LOAD-001, not also RESUME/LIST/DELETE/CLOSE-001)."""
    s = Script(1, agent_caps={**V1_AGENT_CAPS, "loadSession": False})
    rid = s.request(C2A, "session/load", {"sessionId": "old", "cwd": "/tmp", "mcpServers": []})
    s.respond(A2C, rid, {})
    sid = s.new_session()
    rid = s.prompt_request(sid)
    s.respond(A2C, rid, {"stopReason": "exploded"})
    s.request(C2A, "_vendor/op", {})
    assert _tags(s) == [
        ("protocol.agent-capability", "ACP-LOAD-001"),
        ("schema.result", "ACP-PROMPT-001"),
        ("schema.extension", None),  # (info: the kit has no requirement about it)
        ("protocol.unanswered", "ACP-EXT-001"),
    ]


def test_v2_findings_carry_one_id_each() -> None:
    s = Script(2)
    sid = s.new_session()
    s.open_turn(sid)
    s.notify(C2A, "session/cancel", {"sessionId": sid})
    s.respond(A2C, None, {})  # a result for the cancel notification
    s.update(sid, sessionUpdate="tool_call_update", toolCallId="")
    s.state(sid, "idle", stopReason="aborted")
    tags = _tags(s)
    assert ("rpc.notification-answered", "ACP-CANCEL-205") in tags
    assert ("patch.ids", "ACP-PATCH-204") in tags
    assert ("lifecycle.custom-stop-reason", "ACP-CANCEL-207") in tags
    assert ("lifecycle.cancel-idle", "ACP-CANCEL-203") in tags
    assert all(isinstance(t, str) or t is None for _, t in tags)
