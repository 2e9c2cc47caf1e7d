"""Fixtures only; shared helper functions live in helpers.py."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state" / "relay.db"
