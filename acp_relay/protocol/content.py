"""ACP content blocks as plain text, and the one percentile every report uses (pure).

The transcript (render/) cleans the text for a terminal; the diff engine compares it as it is. Both join
blocks the same way, so what `show --transcript` prints and what `diff` compares cannot drift apart.
"""

from __future__ import annotations

import math
from typing import Any

from .jsonrpc import dumps_text


def block_text(block: Any) -> tuple[bool, str]:
    """(is_text, text) of one ContentBlock; non-text blocks become a one-line marker."""
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text" and isinstance(block.get("text"), str):
        return True, block["text"]
    if kind in ("image", "audio"):
        return False, f"[{kind} {block.get('mimeType') or ''}]".replace(" ]", "]")
    if kind == "resource_link":
        return False, f"[link {block.get('name') or block.get('uri')}: {block.get('uri')}]"
    if kind == "resource":
        resource = block.get("resource")
        return False, f"[resource {resource.get('uri') if isinstance(resource, dict) else dumps_text(resource)}]"
    return False, dumps_text(block)


def blocks_plain(blocks: Any) -> str:
    """Chunks split text anywhere, so text blocks are joined with nothing in between; markers on their own
    lines. Trailing newlines are dropped (a transcript line ends there anyway)."""
    out = ""
    for block in blocks if isinstance(blocks, list) else []:
        is_text, text = block_text(block)
        if not is_text:
            text = ("\n" if out and not out.endswith("\n") else "") + text + "\n"
        out += text
    return out.rstrip("\n")


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile of sorted values (no interpolation: every number printed was measured)."""
    if not values:
        return None
    return values[max(0, math.ceil(p / 100 * len(values)) - 1)]
