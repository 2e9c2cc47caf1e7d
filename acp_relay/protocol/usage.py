"""ACP's token counts as OpenTelemetry GenAI attributes (protocol/spans.py puts them on spans; docs/otel.md
says the mapping): a turn's Usage as `gen_ai.usage.*`, a usage_update as `acp.usage.*`."""

from __future__ import annotations

from typing import Any

from .jsonrpc import get


def _number(value: Any) -> int | float | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


# ACP Usage field -> the conventions' attribute (gen_ai.usage.input_tokens is computed: _input_tokens)
_TOKENS = {
    "inputTokens": "acp.usage.input_tokens",  # as the agent reported it: the input not read from or written to cache
    "outputTokens": "gen_ai.usage.output_tokens",
    "cachedReadTokens": "gen_ai.usage.cache_read.input_tokens",
    "cachedWriteTokens": "gen_ai.usage.cache_creation.input_tokens",
    "thoughtTokens": "gen_ai.usage.reasoning.output_tokens",
    "totalTokens": "acp.usage.total_tokens",
}


def token_usage(usage: Any) -> dict[str, Any]:
    """A turn's Usage as span attributes (None where the agent gave no number)."""
    counts = {key: _number(get(usage, key)) for key in _TOKENS}
    return {"gen_ai.usage.input_tokens": _input_tokens(counts), **{_TOKENS[k]: v for k, v in counts.items()}}


def _input_tokens(counts: dict[str, int | float | None]) -> int | float | None:
    """The conventions' input count, which includes the input read from and written to a provider's cache.

    ACP's token types are disjoint (its totalTokens is their sum), so the cache reads and writes are added to
    inputTokens; unless the agent's own totalTokens equals inputTokens + outputTokens (+ thoughtTokens) and not
    that plus the cache counts, which says its inputTokens already holds them (OpenAI's way of counting). None
    without an inputTokens."""
    given, cached = counts["inputTokens"], (counts["cachedReadTokens"] or 0) + (counts["cachedWriteTokens"] or 0)
    if given is None or not cached:
        return given
    total, thought = counts["totalTokens"], counts["thoughtTokens"] or 0
    rest = given + (counts["outputTokens"] or 0)
    holds_cache = total in (rest, rest + thought) and total not in (rest + cached, rest + cached + thought)
    return given if holds_cache else given + cached


def context_usage(update: Any) -> dict[str, Any]:
    """A usage_update (a context-window snapshot, not one operation's count) as `acp.usage.*` attributes."""
    cost = get(update, "cost")
    return {
        "acp.usage.context.used": _number(get(update, "used")),
        "acp.usage.context.size": _number(get(update, "size")),
        "acp.usage.cost.amount": _number(get(cost, "amount")),
        "acp.usage.cost.currency": get(cost, "currency") if isinstance(get(cost, "currency"), str) else None,
    }
