"""setup/plan on generated configs: wrapping any entry, laid out any way, and unwrapping it gives back the text."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from test_jsonc import KEYS, styled

from acp_relay.protocol import jsonc
from acp_relay.protocol.editors import EDITORS, entries, wrapped
from acp_relay.setup import plan

WORDS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=8)
ENTRIES = st.fixed_dictionaries(
    {"command": WORDS},
    optional={"args": st.lists(WORDS, max_size=4), "env": st.dictionaries(KEYS, WORDS, max_size=2), "type": WORDS},
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(KEYS, ENTRIES, min_size=1, max_size=3), st.data(), st.integers(0, 10**6))
def test_wrap_then_unwrap_is_the_identity_on_any_layout(
    servers: dict[str, Any], data: st.DataObject, seed: int
) -> None:
    text = "// settings\n" + styled({"theme": "x", "agent_servers": servers}, random.Random(seed)) + "\n"
    name = data.draw(st.sampled_from(sorted(servers)))
    grown = plan.wrap_entry(text, name, "/opt/bin/acp-relay", "/db ✓/relay.db", name)
    [found] = [e for e in entries(jsonc.parse(grown)) if e.name == name]
    w = wrapped(found)
    assert w is not None and w.db == "/db ✓/relay.db" and w.label == name
    assert w.agent == [servers[name]["command"], *servers[name].get("args", [])]
    env = servers[name].get("env", {})
    assert found.node.plain().get("env", {}) == env  # the file keeps every pair; Entry.env, those exec can set
    assert found.env == {k: v for k, v in env.items() if k and "=" not in k and "\0" not in k + v}
    assert plan.wrap_entry(grown, name, "/opt/bin/acp-relay", "/db ✓/relay.db", name) == grown
    back = plan.unwrap_entry(grown, name)
    if "args" in servers[name]:
        assert back == text
    else:  # an entry without args gets an empty list back (the only change left)
        assert jsonc.parse(back).plain()["agent_servers"][name] == {**servers[name], "args": []}


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(KEYS, ENTRIES, max_size=3), WORDS, st.lists(WORDS, max_size=3), st.integers(0, 10**6))
def test_an_added_entry_is_there_and_adding_it_again_changes_nothing(
    servers: dict[str, Any], name: str, args: list[str], seed: int
) -> None:
    text = styled({"agent_servers": servers}, random.Random(seed))
    once = plan.add_entry(text, EDITORS["zed"], name, "/opt/bin/acp-relay", args)
    assert jsonc.parse(once).plain()["agent_servers"][name] == {
        **servers.get(name, {}),
        "type": "custom",
        "command": "/opt/bin/acp-relay",
        "args": args,
    }
    assert plan.add_entry(once, EDITORS["zed"], name, "/opt/bin/acp-relay", args) == once


SAMPLE = '{"agent_servers": {"a": {"command": "x", "args": ["run", "--", "y"]}, "b": [1]}, // c\n"z": {}}'


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, len(SAMPLE)), st.integers(0, 3), st.sampled_from(list('{}[]",:/ \n'))), max_size=4
    )
)
def test_any_text_is_changed_or_refused_with_a_reason(cuts: list[tuple[int, int, str]]) -> None:
    """The sample config mangled (characters cut out, others put in): a change, or a JsoncError/PlanError."""
    text = SAMPLE
    for at, length, put in cuts:
        text = text[:at] + put + text[at + length :]
    for change in (
        lambda t: plan.wrap_entry(t, "a", "/r/acp-relay", "/d", "a"),
        lambda t: plan.unwrap_entry(t, "a"),
        lambda t: plan.add_entry(t, EDITORS["jetbrains"], "a", "/r/acp-relay", ["run"]),
    ):
        try:
            jsonc.parse(change(text))
        except (jsonc.JsoncError, plan.PlanError):
            pass


def test_a_label_or_db_spelled_like_the_end_of_options_is_read_back() -> None:
    """Found by the property above: an entry named `--` wrapped as `--label -- --` read its label as ''."""
    for label in ("--", "-", "--db"):
        text = '{"agent_servers": {"x": {"command": "0", "args": []}}}'
        grown = plan.wrap_entry(text, "x", "/opt/bin/acp-relay", "--", label)
        [found] = entries(jsonc.parse(grown))
        w = wrapped(found)
        assert w is not None and (w.db, w.label, w.agent) == ("--", label, ["0"])
