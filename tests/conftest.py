"""Fixtures only; shared helper functions live in helpers.py and support/ (the CLI runner, the databases)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state" / "relay.db"


@pytest.fixture(scope="session")
def fixture_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scripted fixture recordings (tests/fixtures/recordings.py), built once for the whole run and
    shared: read it, never write it (a test that writes, e.g. a search index, copies it first)."""
    from support.databases import recordings

    return recordings(tmp_path_factory.mktemp("fixtures") / "fixtures.db")


@pytest.fixture(scope="session")
def sdk_remote_server() -> Iterator[Any]:
    """The Python SDK's ASGI agent under hypercorn, with the affinity cookie (tests/peers/sdk_remote_agent.py),
    started once for every test that only connects to it (test_remote_e2e, test_remote_ts): each connection
    gets its own agent, so tests do not see each other; the SDK's import alone costs a second of CPU."""
    from test_remote_e2e import Server

    s = Server("--set-cookie")
    yield s
    s.stop()
