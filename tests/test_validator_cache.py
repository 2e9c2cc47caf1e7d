"""Compiled validators kept between runs (fdio.FileCache under $XDG_CACHE_HOME/acp-relay): the same verdicts
and messages whether a validator was just generated, loaded back, or found damaged and made again; entries
another user could have written are not loaded; `acp-relay check` fills the cache once and reuses it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastjsonschema
import pytest

from acp_relay.fdio import FileCache
from acp_relay.protocol.check import validator_store
from acp_relay.protocol.check.schema import SchemaSet, compile_validator

TEXT = {"type": "text", "text": "hi"}
CASES: list[tuple[int, str, str, Any]] = [
    (1, "initialize", "request", {"protocolVersion": 1}),
    (1, "initialize", "request", {"protocolVersion": "one"}),
    (1, "session/prompt", "request", {"sessionId": "s", "prompt": [TEXT]}),
    (1, "session/prompt", "request", {"sessionId": "s", "prompt": [{"type": "image", "data": "x"}]}),
    (1, "session/prompt", "response", {"stopReason": "finished"}),
    (1, "session/update", "notification", {"sessionId": "s", "update": {"sessionUpdate": "plan", "entries": [{}]}}),
    (1, "session/update", "notification", {"sessionId": "s", "update": {"sessionUpdate": "_custom"}}),
    (2, "session/prompt", "request", {}),
    (2, "session/prompt", "request", {"sessionId": "s", "prompt": [TEXT]}),
    (2, "session/update", "notification", {"sessionId": "s", "update": {"sessionUpdate": "state_update"}}),
    (2, "session/new", "response", {"sessionId": 7}),
]


def verdicts() -> list[str | None]:
    sets = {v: SchemaSet(v) for v in (1, 2)}  # fresh: nothing compiled in this process yet
    return [sets[v].validate(m, k, value, "result" if k == "response" else "params") for v, m, k, value in CASES]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[FileCache]:
    cache = FileCache(tmp_path / "validators")
    validator_store.keep_validators_in(cache)
    try:
        yield cache
    finally:
        validator_store.keep_validators_in(None)


def test_kept_validators_give_the_verdicts_of_fresh_ones(store: FileCache) -> None:
    validator_store.keep_validators_in(None)
    reference = verdicts()
    assert any(reference) and None in reference  # the cases hold both valid and invalid values
    validator_store.keep_validators_in(store)
    assert verdicts() == reference  # generated, and written
    entries = sorted(Path(store.directory).iterdir())
    assert entries and all(p.stat().st_mode & 0o777 == 0o600 for p in entries)
    stamps = {p: p.stat().st_mtime_ns for p in entries}
    assert verdicts() == reference  # loaded back: nothing written again
    assert {p: p.stat().st_mtime_ns for p in Path(store.directory).iterdir()} == stamps
    damaged = b"\xe3not marshal data"
    for p in entries:  # damaged entries are made again, and replaced
        p.write_bytes(damaged)
    assert verdicts() == reference
    assert all(p.read_bytes() != damaged for p in entries)


def test_an_entry_others_could_write_is_not_read(tmp_path: Path) -> None:
    where = tmp_path / "cache" / "validators"
    cache = FileCache(where)
    cache.put("k", b"data")
    assert cache.get("k") == b"data"
    assert (where.stat().st_mode & 0o777, where.parent.stat().st_mode & 0o777) == (0o700, 0o700)
    os.chmod(where / "k", 0o620)
    assert cache.get("k") is None
    os.chmod(where / "k", 0o600)
    (where / "link").symlink_to(where / "k")
    assert cache.get("link") is None
    os.chmod(where, 0o770)  # a directory others could write: they could have swapped any entry in it
    assert cache.get("k") is None
    os.chmod(where, 0o700)
    (tmp_path / "linked").symlink_to(where)
    assert FileCache(tmp_path / "linked").get("k") is None
    assert cache.get("k") == b"data" and cache.get("missing") is None
    FileCache(where / "k" / "below-a-file").put("x", b"y")  # cannot be written: no error either


def test_an_entry_under_another_key_or_damaged_is_made_again(store: FileCache) -> None:
    one = {"type": "object", "properties": {"a": {"type": "string"}}}
    two = {"type": "object", "properties": {"b": {"type": "integer"}}}
    where = Path(store.directory)
    compile_validator(one)
    (key_one,) = (p.name for p in where.iterdir())
    compile_validator(two)
    (key_two,) = (p.name for p in where.iterdir() if p.name != key_one)
    entry_one, entry_two = (where / key_one).read_bytes(), (where / key_two).read_bytes()
    store.put(key_one, entry_two)  # each entry filed under the other's key
    store.put(key_two, entry_one)
    with pytest.raises(fastjsonschema.JsonSchemaValueException, match="data.a must be string"):
        compile_validator(one)({"a": 1, "b": "x"})
    with pytest.raises(fastjsonschema.JsonSchemaValueException, match="data.b must be integer"):
        compile_validator(two)({"a": 1, "b": "x"})
    assert ((where / key_one).read_bytes(), (where / key_two).read_bytes()) == (entry_one, entry_two)  # replaced
    damaged = entry_one[:40] + bytes([entry_one[40] ^ 0xFF]) + entry_one[41:]  # one byte of its code
    store.put(key_one, damaged)
    with pytest.raises(fastjsonschema.JsonSchemaValueException, match="data.a must be string"):
        compile_validator(one)({"a": 1})
    assert (where / key_one).read_bytes() == entry_one


def test_the_order_of_properties_keeps_its_own_entry(store: FileCache) -> None:
    """The generated code checks properties in their order, which decides the error it reports."""
    ab = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
    ba = {"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "string"}}}
    for schema, first in ((ab, "a"), (ba, "b"), (ab, "a"), (ba, "b")):  # generated, then loaded back
        with pytest.raises(fastjsonschema.JsonSchemaValueException, match=f"data.{first} must be string"):
            compile_validator(schema)({"a": 1, "b": 1})


def test_check_fills_the_cache_once(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    db = tmp_path / "relay.db"
    exe = [sys.executable, "-m", "acp_relay"]
    subprocess.run([*exe, "demo", "--db", str(db)], env=env, capture_output=True, check=True)
    first = subprocess.run([*exe, "check", "--db", str(db), "last"], env=env, capture_output=True)
    kept = tmp_path / "cache" / "acp-relay" / "validators"
    entries = {p.name: p.stat().st_mtime_ns for p in kept.iterdir()}
    assert entries
    second = subprocess.run([*exe, "check", "--db", str(db), "last"], env=env, capture_output=True)
    assert (second.returncode, second.stdout, second.stderr) == (first.returncode, first.stdout, first.stderr)
    assert {p.name: p.stat().st_mtime_ns for p in kept.iterdir()} == entries
