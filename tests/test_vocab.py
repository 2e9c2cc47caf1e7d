"""The vocabulary against the shipped JSON Schemas, and every dispatch table against the vocabulary.

Both ways, per version: the methods and variants the vocabulary gives a version are exactly those that
version's schema.unstable.json defines (the file check validates against), with the same side and kind; every
other name the vocabulary keeps is in no shipped schema and says so (`versions` empty: seen on the wire, or
defined by the schemas 2.4.0 replaced, `former`)."""

from __future__ import annotations

import importlib
import json
from importlib import resources
from typing import Any

import pytest

from acp_relay.protocol import vocab

# Modules that register variant tables (vocab.variant_table): imported here so the walk below sees them all.
TABLE_MODULES = (
    "acp_relay.render.frames",
    "acp_relay.protocol.searchtext",
    "acp_relay.protocol.materialize",
    "acp_relay.protocol.check.lifecycle",
    "acp_relay.protocol.spans",
    "acp_relay.info.command",
    "acp_relay.view.data",
    "acp_relay.protocol.check.sessions",
    "acp_relay.protocol.check.engine",
    "acp_relay.protocol.diff.compare",
)
_KIND = ("Request", "Response", "Notification")


def _schema(version: int, file: str = "schema.unstable.json") -> dict[str, Any]:
    path = resources.files("acp_relay.protocol.check").joinpath("schemas", f"v{version}", file)
    doc = json.loads(path.read_text("utf-8"))
    return doc


def _schema_methods(version: int, file: str = "schema.unstable.json") -> dict[str, tuple[str, bool]]:
    """method -> (side, notification only); the side is "both" where the kinds' sides differ (mcp/message)."""
    kinds: dict[str, set[str]] = {}
    sides: dict[str, set[str]] = {}
    for name, body in _schema(version, file)["$defs"].items():
        method = body.get("x-method") if isinstance(body, dict) else None
        kind = next((k for k in _KIND if name.endswith(k)), None)
        if method and kind:
            kinds.setdefault(method, set()).add(kind)
            sides.setdefault(method, set()).add(body.get("x-side", "both"))
    return {m: (next(iter(sides[m])) if len(sides[m]) == 1 else "both", kinds[m] == {"Notification"}) for m in kinds}


def _schema_variants(version: int, file: str = "schema.unstable.json") -> set[str]:
    union = _schema(version, file)["$defs"]["SessionUpdate"]
    tags = set()
    for branch in union.get("anyOf") or union.get("oneOf"):
        tag = branch.get("properties", {}).get("sessionUpdate", {}).get("const")
        if tag is not None:  # v2's `other` fallback has none
            tags.add(tag)
    return tags


@pytest.mark.parametrize("version", [vocab.V1, vocab.V2])
def test_methods_match_the_schema(version: int) -> None:
    schema = _schema_methods(version)
    assert vocab.methods(version) == set(schema)
    for name, (side, notification) in schema.items():
        m = vocab.METHODS[name]
        assert (m.side.value, m.notification) == (side, notification), name


@pytest.mark.parametrize("version", [vocab.V1, vocab.V2])
def test_variants_match_the_schema(version: int) -> None:
    assert vocab.variants(version) == _schema_variants(version)


def test_methods_outside_the_schemas_are_marked_so() -> None:
    in_schemas = {m for v in (1, 2) for m in _schema_methods(v)}
    assert {m.name for m in vocab.METHODS.values() if not m.versions} == set(vocab.METHODS) - in_schemas
    assert all(not (m.versions & m.former) for m in vocab.METHODS.values())  # `former`: only where dropped
    # What 2.4.0 dropped from both versions, kept for the recordings that carry it.
    dropped = {m.name for m in vocab.METHODS.values() if m.former}
    assert {"nes/start", "document/didOpen", "mcp/connect", "mcp/disconnect"} <= dropped
    assert dropped.isdisjoint(in_schemas)


@pytest.mark.parametrize("version", [vocab.V1, vocab.V2])
def test_the_stable_schema_names_nothing_the_unstable_one_lacks(version: int) -> None:
    """check validates against schema.unstable.json: every stable method and variant must be in it."""
    assert set(_schema_methods(version, "schema.json")) <= set(_schema_methods(version))
    assert _schema_variants(version, "schema.json") <= _schema_variants(version)


def test_the_session_creating_set() -> None:
    assert {"session/new", "session/load", "session/resume", "session/fork"} == vocab.SESSION_ORIGINS
    assert vocab.SESSION_MINTING < vocab.SESSION_ORIGINS
    assert {"tool_call", "plan", "current_mode_update"} == vocab.V1_ONLY


def test_every_table_has_a_row_for_every_variant() -> None:
    for module in TABLE_MODULES:
        importlib.import_module(module)
    assert len(vocab.TABLES) >= len(TABLE_MODULES)
    missing = {name: sorted(set(vocab.VARIANTS) - set(rows)) for name, rows in vocab.TABLES.items()}
    missing = {name: gaps for name, gaps in missing.items() if gaps}
    assert not missing, f"tables without a row (give them one, or an explicit None) for: {missing}"
    stray = {name: sorted(set(rows) - set(vocab.VARIANTS)) for name, rows in vocab.TABLES.items()}
    assert not any(stray.values()), f"tables keyed by names the vocabulary lacks: {stray}"


def test_a_missing_row_is_named() -> None:
    """The walk above cannot pass vacuously: a table short of one variant is reported by name."""
    rows = {v: None for v in vocab.VARIANTS if v != vocab.NOTICE}
    vocab.variant_table("test: short table", rows)
    try:
        with pytest.raises(AssertionError, match=r"test: short table.*notice"):
            test_every_table_has_a_row_for_every_variant()
    finally:
        del vocab.TABLES["test: short table"]


@pytest.mark.parametrize("variant", [[], {"a": 1}, None, 3])
def test_a_variant_that_is_not_a_string_reaches_no_table(variant: object) -> None:
    """Tables are dicts: an unhashable `sessionUpdate` (a list, an object) must be looked up as no row."""
    from acp_relay.info.command import _update as info_update
    from acp_relay.protocol.materialize import Event
    from acp_relay.protocol.searchtext import message_text
    from acp_relay.protocol.spans import session_spans
    from acp_relay.render.preview import _params_preview

    params = {"sessionId": "s", "update": {"sessionUpdate": variant, "title": "t"}}
    msg = {"jsonrpc": "2.0", "method": "session/update", "params": params}
    assert message_text(msg, "session/update") == ""
    assert "title" in _params_preview("session/update", params)
    info_update(None, params["update"], set(), set())  # type: ignore[arg-type]
    session_spans([Event(0, 1.0, "a2c", msg)], "s", 2)
