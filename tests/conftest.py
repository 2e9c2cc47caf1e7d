"""Fixtures only; shared helper functions live in helpers.py and support/ (the CLI runner, the databases)."""

from __future__ import annotations

from pathlib import Path

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
