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

import pytest

from acp_relay.fdio import FileCache
from acp_relay.protocol.check import validator_store
from acp_relay.protocol.check.schema import SchemaSet

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
    cache = FileCache(tmp_path)
    cache.put("k", b"data")
    assert cache.get("k") == b"data"
    os.chmod(tmp_path / "k", 0o620)
    assert cache.get("k") is None
    os.chmod(tmp_path / "k", 0o600)
    (tmp_path / "link").symlink_to(tmp_path / "k")
    assert cache.get("link") is None
    assert cache.get("missing") is None
    FileCache(tmp_path / "k" / "below-a-file").put("x", b"y")  # cannot be written: no error either


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
