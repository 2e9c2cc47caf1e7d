"""Bad input never makes `acp-relay check` crash or hang: the engine over the fuzz corpus and hypothesis
streams of hostile frames (arbitrary bytes, JSON of any shape, ACP methods with random params)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from check_helpers import Script
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_relay.protocol.check.engine import Checker
from acp_relay.protocol.check.rules import RULES
from acp_relay.protocol.jsonrpc import A2C, C2A, dumps

CORPUS = Path(__file__).resolve().parent / "corpus"
CORPUS_FILES = sorted(p for p in CORPUS.glob("*") if p.is_file() and not p.name.startswith("."))
METHODS = [
    "initialize",
    "session/new",
    "session/load",
    "session/resume",
    "session/prompt",
    "session/cancel",
    "session/update",
    "session/request_permission",
    "fs/read_text_file",
    "terminal/create",
    "$/cancel_request",
    "_ext/thing",
    "unknown/method",
]
VARIANTS = [
    "agent_message_chunk",
    "user_message",
    "state_update",
    "tool_call_update",
    "compaction_update",
    "compaction_summary_chunk",
    "notice",
    "subagent_update",
    "session_message_chunk",
    "_custom",
    "bogus",
]


def run(frames: list[tuple[str, bytes]], version_hint: int | None = None) -> None:
    """Feed everything; every finding must be a registered rule with its severity, about a fed frame."""
    checker = Checker(version_hint)
    found = []
    for n, (direction, raw) in enumerate(frames, 1):
        found += checker.feed(n, direction, raw, unterminated=n == len(frames))
    found += checker.end(True)
    for f in found:
        assert f.rule in RULES and f.severity == RULES[f.rule].severity
        assert f.frame is None or 1 <= f.frame <= len(frames)
        assert isinstance(f.message, str) and f.message


def prelude(version: int) -> list[tuple[str, bytes]]:
    s = Script(version)
    s.new_session("s1")
    return list(s.frames)


@pytest.mark.parametrize("path", CORPUS_FILES, ids=[p.name for p in CORPUS_FILES])
@pytest.mark.parametrize("version", [1, 2, 9])
def test_corpus(path: Path, version: int) -> None:
    lines = path.read_bytes().split(b"\n")
    run(prelude(version) + [(C2A, x) for x in lines] + [(A2C, x) for x in lines])
    run([(A2C, x) for x in lines], version_hint=version)  # no initialize at all


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
ids = st.none() | st.integers(-3, 3) | st.sampled_from(["a", "1"]) | st.floats(allow_nan=False) | json_values


@st.composite
def acp_messages(draw: Any) -> bytes:
    kind = draw(st.sampled_from(["request", "notification", "response", "error", "update", "junk"]))
    msg: dict[str, Any] = {"jsonrpc": draw(st.sampled_from(["2.0", "2.0", "2.0", "1.0", None]))}
    if kind in ("request", "notification"):
        msg["method"] = draw(st.sampled_from(METHODS))
        msg["params"] = draw(
            st.dictionaries(
                st.sampled_from(["sessionId", "prompt", "protocolVersion", "update"]), json_values, max_size=3
            )
            | json_values
        )
        if kind == "request":
            msg["id"] = draw(ids)
    elif kind in ("response", "error"):
        msg["id"] = draw(ids)
        msg["result" if kind == "response" else "error"] = draw(json_values)
    elif kind == "update":
        update = {"sessionUpdate": draw(st.sampled_from(VARIANTS))}
        update.update(
            draw(
                st.dictionaries(
                    st.sampled_from(
                        [
                            "messageId",
                            "content",
                            "state",
                            "stopReason",
                            "compactionId",
                            "status",
                            "summary",
                            "toolCallId",
                        ]
                    ),
                    json_values,
                    max_size=4,
                )
            )
        )
        msg.update(method="session/update", params={"sessionId": draw(st.sampled_from(["s1", "s2"])), "update": update})
    else:
        return draw(st.binary(max_size=40))
    return dumps(msg) if draw(st.booleans()) else dumps([msg])


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from([1, 2]), st.lists(st.tuples(st.sampled_from([C2A, A2C]), acp_messages()), max_size=25))
def test_hostile_streams(version: int, frames: list[tuple[str, bytes]]) -> None:
    run(prelude(version) + frames)


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(st.sampled_from([C2A, A2C]), st.binary(max_size=64)), max_size=20))
def test_arbitrary_bytes(frames: list[tuple[str, bytes]]) -> None:
    run(frames)
    run(prelude(2) + frames)


def test_unknown_version_is_judged_by_the_version_the_messages_show() -> None:
    """Issue 30, item 15: an unknown version no longer drops check to JSON-RPC only; v2's fields show v2."""
    s = Script(2, answer_version=7)
    sid = s.new_session()
    s.request(C2A, "session/prompt", {"sessionId": sid})  # schema.params on v2
    s.line(A2C, b"not json")
    found = s.check()
    rules = [f.rule for f in found]
    assert rules == [
        "protocol.unknown-version",
        "protocol.version",
        "schema.params",
        "rpc.not-json",
        "protocol.unanswered",
    ]
    assert "judged as v2" in found[0].message


def test_deep_nesting_is_a_finding_not_a_crash() -> None:
    s = Script(2)
    sid = s.new_session()
    deep = (
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"'
        + sid.encode()
        + b'","update":{"sessionUpdate":"agent_message_chunk","messageId":"m","content":'
        + b"[" * 5000
        + b"]" * 5000
        + b"}}}"
    )
    s.line(A2C, deep)
    assert s.check()  # reported (schema or not-json), and no exception


def _scripts() -> list[Script]:
    """Every breaking and keeping recording of the per-rule table (tests/test_check_rules.py)."""
    import test_check_rules as table

    out = [build(broken) for build in table.CASES.values() for broken in (True, False)]
    out += [build(broken, v) for build in table.VERSIONED.values() for broken in (True, False) for v in (1, 2)]
    return out


HOSTILE: list[Any] = [[{"x": 1}], {"x": []}, None]


def _mutations(obj: Any, depth: int = 3) -> list[Any]:
    """`obj` with one value at a time (up to `depth` levels down, into lists too) replaced by each hostile
    value."""
    out: list[Any] = []
    if depth == 0:
        return out
    if isinstance(obj, dict):
        for key, value in obj.items():
            out += [{**obj, key: h} for h in HOSTILE]
            out += [{**obj, key: m} for m in _mutations(value, depth - 1)]
    elif isinstance(obj, list):
        for i, value in enumerate(obj[:2]):
            out += [[*obj[:i], h, *obj[i + 1 :]] for h in HOSTILE]
            out += [[*obj[:i], m, *obj[i + 1 :]] for m in _mutations(value, depth - 1)]
    return out


def test_every_rule_recording_with_hostile_values_never_crashes() -> None:
    """The new rules put wire values in sets and compare them: lists, objects, nulls and numbers where
    strings belong (a session id, a config value, an auth method id, a method in a batch) are findings at
    most, never an exception."""
    for script in _scripts():
        for n, (direction, raw) in enumerate(script.frames):
            try:
                msg = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            for part in ("params", "result"):
                if isinstance(msg, dict) and isinstance(msg.get(part), dict):
                    for mutated in _mutations(msg[part])[:30]:
                        frames = list(script.frames)
                        frames[n] = (direction, dumps({**msg, part: mutated}))
                        run(frames, script.version)
