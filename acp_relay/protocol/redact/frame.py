"""Redaction of one recorded frame's bytes, and of a line of text that is not a frame (sans-I/O)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from .. import vocab
from ..framing import BIG_FRAME
from ..jsonrpc import dumps, loads, may_hold_wide_int
from .keys import PLACEHOLDER
from .policy import _UNPARSED, SHAPE_SCAN_MAX, WITHHELD_MESSAGE, Policy
from .shapes import any_literal_in, redact_text, shapes_maybe_in

WITHHELD = dumps(WITHHELD_MESSAGE)


def redact_frame(
    raw: bytes, policy: Policy, answers: Sequence[str | None] | str | None = None, parsed: Any = _UNPARSED
) -> tuple[bytes, int]:
    """(bytes to store, values redacted) for one frame's bytes (without its \\n). 0: the bytes as they came.

    `parsed` is the frame's message when the caller has it (an exact parse is made when it may not be:
    big frames are indexed from a copy, and orjson reads integers beyond 64 bits as floats). A frame that is
    not JSON (invalid UTF-8, a cut line) is redacted as text, its other bytes kept; a frame with a
    duplicated key is stored as the copy every reader sees (the last), its earlier copies counted as
    redacted values (they could hold a secret the rules never see)."""
    if not policy.enabled:
        return raw, 0
    body = raw[:-1] if raw[-1:] == b"\r" else raw
    try:
        if parsed is _UNPARSED or len(raw) >= BIG_FRAME or may_hold_wide_int(raw):
            try:
                parsed = loads(body)
            except ValueError:
                return _redact_bytes(raw, policy, answers)
        new, n = policy.apply(parsed, answers)
        dropped = _duplicates(body, parsed) if n or dumps(parsed) != body else 0
        if dropped:
            pairs = json.loads(body.decode("utf-8"), object_pairs_hook=_last_wins)
            new, n = policy.apply(pairs, answers)
            n += dropped
        return (dumps(new), n) if n else (raw, 0)
    except Exception:  # RecursionError and the like: withhold, never store what could not be checked
        return WITHHELD, 1


def _last_wins(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return dict(pairs)


def _duplicates(body: bytes, parsed: Any) -> int:
    """How many key copies a JSON text holds beyond its last (0 for almost every frame: only called when
    the compact re-serialization differs from the bytes)."""
    count = 0

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal count
        d = dict(pairs)
        count += len(pairs) - len(d)
        return d

    try:
        json.loads(body.decode("utf-8"), object_pairs_hook=hook)
    except (ValueError, RecursionError):
        return 0
    return count


# The keys the structural rules act on, spelled as bytes (or any \u escape, which may spell one).
_KEY_LITERALS = (
    b"_meta",
    b'"headers"',
    b"mcpServers",
    b'"auth',
    vocab.TERMINAL_CREATE.encode(),
    b'"_',
    b"\\u",
    b'"env"',
    b'"args"',
)


def _keys_in_text(raw: bytes) -> bool:
    """Whether bytes that do not parse may hold a key the structural rules act on (memchr first: text with
    no quote holds no JSON key at all)."""
    return b'"' in raw and any_literal_in(raw, _KEY_LITERALS)


def _redact_bytes(raw: bytes, policy: Policy, answers: Sequence[str | None] | str | None) -> tuple[bytes, int]:
    """A frame orjson refuses. Invalid UTF-8 in an otherwise JSON frame: parsed with the bad bytes kept as
    they are (surrogate escapes), redacted like any frame, written back byte for byte around the changes.
    Anything else (a cut line): the free-text rules, so a stray byte never keeps a secret in the store."""
    if len(raw) > SHAPE_SCAN_MAX and not policy._compiled and not _keys_in_text(raw):
        return raw, 0  # big, and no key the rules look for: scanning it for shapes costs what big frames skip
    text = raw.decode("utf-8", "surrogateescape")
    try:
        msg = json.loads(text[:-1] if text.endswith("\r") else text)
    except (ValueError, RecursionError):
        return redact_line(raw, policy) if len(raw) <= SHAPE_SCAN_MAX or policy._compiled else (raw, 0)
    new, n = policy.apply(msg, answers)
    if not n:
        return raw, 0
    return json.dumps(new, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogateescape"), n


def _redact_text_bytes(raw: bytes, policy: Policy) -> tuple[bytes, int]:
    text = raw.decode("utf-8", "surrogateescape")
    out, n = redact_text(text)
    for rx in policy._compiled:
        out, k = rx.subn(PLACEHOLDER, out)
        n += k
    return (out.encode("utf-8", "surrogateescape"), n) if n else (raw, 0)


_ASSIGN_HINT = re.compile(
    rb"(?i)token|secret|passw|passphrase|api[-_]?key|auth|credential|cookie|private[-_]?key|access[-_]?key"
)


def redact_line(raw: bytes, policy: Policy) -> tuple[bytes, int]:
    """One line of the agent's stderr (or any recorded text that is not a frame): the free-text rules and
    the user's regexes."""
    if not policy.enabled:
        return raw, 0
    if not policy._compiled and not shapes_maybe_in(raw) and _ASSIGN_HINT.search(raw) is None:
        return raw, 0
    return _redact_text_bytes(raw, policy)
