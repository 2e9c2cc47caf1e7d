"""Import this before the `agent-client-protocol` SDK: it halves what importing the SDK costs (about 1 s of
CPU to 0.5 s), for the many SDK peers the suite starts.

The SDK's models ask pydantic for attribute docstrings, which pydantic finds by reading and tokenizing each
model's source: nearly half of `import acp`. The docstrings only fill in JSON Schema descriptions; nothing a
peer sends, accepts or refuses depends on them. A pydantic without the hook is left as it is."""

from __future__ import annotations

from typing import Any

try:
    from pydantic._internal import _fields
except ImportError:  # pragma: no cover - another pydantic layout: the SDK imports at its usual cost
    pass
else:
    if hasattr(_fields, "extract_docstrings_from_cls"):

        def _no_docstrings(cls: type, use_inspect: bool = False) -> dict[str, Any]:
            return {}

        _fields.extract_docstrings_from_cls = _no_docstrings
