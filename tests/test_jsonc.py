"""protocol/jsonc: JSON with comments read with positions, and edited by splices that keep every other byte."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_relay.protocol import jsonc

KEYS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6)
SCALARS = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | KEYS
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4))
GAPS = ["", " ", "\n", "\r\n", "  // note\n", "/* c */", " /* multi\nline */ ", "\t"]


def styled(value: Any, rnd: random.Random, depth: int = 0) -> str:
    """`value` as JSON with comments: random gaps (whitespace and comments) and random trailing commas."""

    def gap() -> str:
        return rnd.choice(GAPS)

    if isinstance(value, dict):
        parts = [
            gap() + json.dumps(k) + gap() + ":" + gap() + styled(v, rnd, depth + 1) + gap() for k, v in value.items()
        ]
        tail = "," + gap() if parts and rnd.random() < 0.5 else ""
        return "{" + gap() + ",".join(parts) + tail + "}"
    if isinstance(value, list):
        parts = [gap() + styled(v, rnd, depth + 1) + gap() for v in value]
        tail = "," + gap() if parts and rnd.random() < 0.5 else ""
        return "[" + gap() + ",".join(parts) + tail + "]"
    return json.dumps(value, ensure_ascii=rnd.random() < 0.5)


@settings(max_examples=150, deadline=None)
@given(VALUES, st.integers(0, 10**6))
def test_it_reads_what_json_reads_whatever_the_comments_and_trailing_commas(value: Any, seed: int) -> None:
    text = styled(value, random.Random(seed))
    assert jsonc.parse(text).plain() == value
    assert jsonc.parse(json.dumps(value, indent=2)).plain() == value


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(KEYS, VALUES, max_size=4), KEYS, VALUES, st.integers(0, 10**6))
def test_a_member_added_keeps_every_other_byte(obj: dict[str, Any], key: str, value: Any, seed: int) -> None:
    rnd = random.Random(seed)
    text = "// head\n" + styled(obj, rnd) + "\n// tail\n"
    root = jsonc.parse(text)
    style = jsonc.style_of(text, root)
    after = jsonc.set_member(text, root, key, value, style) if key not in obj else text
    expected = {**obj, key: value} if key not in obj else obj
    assert jsonc.parse(after).plain() == expected
    assert after.startswith("// head\n") and after.endswith("\n// tail\n")
    # what was there is all still there, in order: the edit only inserted characters
    it = iter(after)
    assert all(ch in it for ch in text)


@settings(max_examples=150, deadline=None)
@given(st.lists(SCALARS, max_size=4), st.lists(KEYS, min_size=1, max_size=4), st.integers(0, 10**6))
def test_items_put_in_front_come_out_byte_for_byte(items: list[Any], front: list[str], seed: int) -> None:
    text = '{"args": ' + styled(items, random.Random(seed)) + "}"
    style = jsonc.style_of(text, jsonc.parse(text))
    grown = jsonc.insert_items(text, _args(text), [json.dumps(f) for f in front], style)
    assert _args(grown).plain() == front + items
    assert jsonc.remove_items(grown, _args(grown), len(front)) == text


def _args(text: str) -> jsonc.Node:
    node = jsonc.parse(text).get("args")
    assert node is not None
    return node


def test_a_replaced_value_leaves_comments_and_layout() -> None:
    text = '{\n  // the agent\n  "command": "npx", /* keep */\n  "x": [1,2 ,3],\n}\n'
    root = jsonc.parse(text)
    command = root.get("command")
    assert command is not None
    after = jsonc.replace_value(text, command, '"/usr/bin/agent"')
    assert after == '{\n  // the agent\n  "command": "/usr/bin/agent", /* keep */\n  "x": [1,2 ,3],\n}\n'


@pytest.mark.parametrize(
    ("text", "key", "expected"),
    [
        ("{}", "a", '{\n  "a": 1\n}'),
        ('{\n    "x": 0\n}', "a", '{\n    "x": 0,\n    "a": 1\n}'),
        ('{\n  "x": 0, // why\n}', "a", '{\n  "x": 0, // why\n  "a": 1,\n}'),
        ('{\n  "x": 0 // why\n}', "a", '{\n  "x": 0, // why\n  "a": 1\n}'),
        ('{"x": 0}', "a", '{"x": 0, "a": 1}'),
        ('{"x": 0,}', "a", '{"x": 0, "a": 1,}'),
        ('{\r\n\t"x": 0\r\n}', "a", '{\r\n\t"x": 0,\r\n\t"a": 1\r\n}'),
        ('\ufeff{\n  "x": {}\n}', "a", '\ufeff{\n  "x": {},\n  "a": 1\n}'),
    ],
)
def test_a_new_member_follows_the_objects_own_style(text: str, key: str, expected: str) -> None:
    root = jsonc.parse(text)
    assert jsonc.insert_member(text, root, key, 1, jsonc.style_of(text, root)) == expected


def test_nested_values_are_laid_out_at_their_depth_with_the_files_line_breaks() -> None:
    text = '{\r\n    "servers": {\r\n        "old": {}\r\n    }\r\n}\r\n'
    root = jsonc.parse(text)
    servers = root.get("servers")
    assert servers is not None
    after = jsonc.insert_member(text, servers, "new", {"command": "a", "args": ["b"]}, jsonc.style_of(text, root))
    assert after == (
        '{\r\n    "servers": {\r\n        "old": {},\r\n        "new": {\r\n'
        '            "command": "a",\r\n            "args": ["b"]\r\n        }\r\n    }\r\n}\r\n'
    )
    assert "\n" not in after.replace("\r\n", "")


@pytest.mark.parametrize(
    ("text", "where", "says"),
    [
        ("", (1, 1), "empty"),
        ('{\n  "a": 1\n  "b": 2\n}', (3, 3), "',' or '}' expected"),
        ('{\n  "a": tru\n}', (2, 8), "a value was expected"),
        ('{"a": "x\ny"}', (1, 9), "control character"),
        ('{"a": 1} x', (1, 10), "after the value"),
        ("{\n  /* never closed\n}", (2, 3), "unterminated /* comment"),
        ('{"a": "never closed}', (1, 7), "unterminated string"),
        ('{"a": 01}', (1, 8), "',' or '}' expected"),
        ("[1, 2", (1, 6), "',' or ']' expected"),
        ('{"a": "\\q"}', (1, 7), "bad escape"),
        ("{a: 1}", (1, 2), "member name in quotes"),
        ("[" * 300, (1, 202), "nested deeper"),
        ('\ufeff{"é": ü}', (1, 7), 'unexpected "ü"'),
        ("{\n\u202e}", (2, 1), "U+202E"),
        ('{"a": "\\ud800"}', (1, 7), "half a surrogate pair"),
    ],
)
def test_what_it_cannot_read_it_says_where(text: str, where: tuple[int, int], says: str) -> None:
    with pytest.raises(jsonc.JsoncError) as caught:
        jsonc.parse(text)
    assert (caught.value.line, caught.value.column) == where, str(caught.value)
    assert says in caught.value.reason
    assert str(caught.value).startswith(f"line {where[0]}, column {where[1]}: ")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='{}[]",:/*\n\r\t \\01aetrufnl-.eE\ufeff', max_size=40))
def test_any_text_parses_or_raises_jsonc_error(text: str) -> None:
    try:
        jsonc.parse(text)
    except jsonc.JsoncError as exc:
        assert exc.line >= 1 and exc.column >= 1
