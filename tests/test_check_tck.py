"""The conformance kit table (protocol/check/tck.py): every id of both registries once, each `rule`/`partial`
row backed by real rules, and severities that follow the kit's tiers."""

from __future__ import annotations

from collections import Counter

import pytest

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
    requirements,
    tck_ids,
)

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
        }
    )
