"""Where compiled schema validators are kept between runs, set by the CLI before any command runs. Apart
from schema.py so that setting it costs no import of fastjsonschema (about 90 ms) in commands that never
validate."""

from __future__ import annotations

from typing import Protocol


class CodeStore(Protocol):
    """Values by key; the CLI's is a private cache directory (fdio.FileCache)."""

    def get(self, key: str) -> bytes | None: ...

    def put(self, key: str, data: bytes) -> None: ...


store: CodeStore | None = None


def keep_validators_in(where: CodeStore | None) -> None:
    """Keep compiled validators in `where`: generating one costs about 50 ms of CPU and loading it back well
    under one, and `check` of a short session needs a dozen or more."""
    global store
    store = where
