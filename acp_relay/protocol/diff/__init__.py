"""`acp-relay diff`, the engine (pure): what differs between two recorded sessions, layer by layer.

- align.py: Myers' O(ND) alignment in linear space, and unified-diff hunks.
- session.py: one pass over a session's messages: the materialized state, protocol tokens, metadata, latencies.
- compare.py: the layers (conversation, protocol, metadata, timing) and their text and JSON.
"""

from .align import matches, opcodes, unified
from .compare import IGNORABLE, LAYERS, Layer, compare, conversation_lines
from .session import Digester, SessionDigest, digest

__all__ = [
    "IGNORABLE",
    "LAYERS",
    "Digester",
    "Layer",
    "SessionDigest",
    "compare",
    "conversation_lines",
    "digest",
    "matches",
    "opcodes",
    "unified",
]
