"""What people read in a message, as plain text for the full-text index. Pure: a parsed message in, text out.

Prompts, agent messages and thoughts, tool call titles and content, plan entries, terminal output,
permission requests and error messages. Machinery (capabilities, ids, usage numbers, command lists) is left
out: a search for "session" must not match every frame.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any

from . import vocab

# Methods whose requests or answers carry such text (an answer is indexed under its request's method).
TEXT_METHODS = (vocab.PROMPT, vocab.REQUEST_PERMISSION, vocab.TERMINAL_OUTPUT, vocab.UPDATE)
MARKERS = ("\ue000", "\ue001")  # highlight markers for snippets: never left in indexed text
MAX_TEXT = 64 * 1024  # per message: a pasted file is found by its start, the index stays small


def message_text(msg: Any, method: str | None) -> str:
    """The readable text of one JSON-RPC message (`method`: its own, or for an answer its request's)."""
    if not isinstance(msg, dict):
        return ""
    parts: list[str] = []
    err = msg.get("error")
    if isinstance(err, dict):
        if isinstance(err.get("message"), str):
            parts.append(err["message"])
        data = err.get("data")
        if isinstance(data, str):
            parts.append(data)
        elif isinstance(data, dict) and isinstance(data.get("message"), str):
            parts.append(data["message"])
    params = msg.get("params")
    result = msg.get("result")
    if method == vocab.PROMPT and isinstance(params, dict):
        _blocks(params.get("prompt"), parts)
    elif method == vocab.UPDATE and isinstance(params, dict) and isinstance(params.get("update"), dict):
        _update(params["update"], parts)
    elif method == vocab.REQUEST_PERMISSION and isinstance(params, dict):
        call = params.get("toolCall")
        if isinstance(call, dict):
            _tool(call, parts)
    elif method == vocab.TERMINAL_OUTPUT and isinstance(result, dict) and isinstance(result.get("output"), str):
        parts.append(result["output"])
    text = "\n".join(p for p in parts if p)
    for m in MARKERS:
        text = text.replace(m, "")
    return text[:MAX_TEXT]


def _update(u: dict[str, Any], parts: list[str]) -> None:
    """The update's text, by its variant's row of `UPDATE_TEXT` (None: state and bookkeeping, not indexed)."""
    variant = u.get("sessionUpdate")
    collect = UPDATE_TEXT.get(variant) if isinstance(variant, str) else None
    if collect is not None:
        collect(u, parts)


def _content(u: dict[str, Any], parts: list[str]) -> None:
    _blocks(u.get("content"), parts)


def _plan(u: dict[str, Any], parts: list[str]) -> None:
    _entries(u.get("entries"), parts)


def _plan_update(u: dict[str, Any], parts: list[str]) -> None:
    plan = u.get("plan")
    if isinstance(plan, dict):
        _entries(plan.get("entries"), parts)
        if isinstance(plan.get("content"), str):
            parts.append(plan["content"])


def _strings(*keys: str) -> Callable[[dict[str, Any], list[str]], None]:
    def collect(u: dict[str, Any], parts: list[str]) -> None:
        parts.extend(u[key] for key in keys if isinstance(u.get(key), str))

    return collect


def _compaction(u: dict[str, Any], parts: list[str]) -> None:
    _blocks(u.get("summary"), parts)
    if isinstance(u.get("error"), str):
        parts.append(u["error"])


def _quota(u: dict[str, Any], parts: list[str]) -> None:
    """The labels a person reads ("Weekly limit"), not the ids and numbers."""
    pools = u.get("pools")
    for pool in pools if isinstance(pools, list) else []:
        meters = pool.get("meters") if isinstance(pool, dict) else None
        for item in [pool, *(meters if isinstance(meters, list) else [])]:
            if isinstance(item, dict) and isinstance(item.get("label"), str):
                parts.append(item["label"])


def _terminal_output(u: dict[str, Any], parts: list[str]) -> None:
    parts.append(_b64(u.get("data")))


def _tool(call: dict[str, Any], parts: list[str]) -> None:
    if isinstance(call.get("title"), str):
        parts.append(call["title"])
    _blocks(call.get("content"), parts)
    raw = call.get("rawInput")
    if isinstance(raw, dict):
        for key in ("command", "description", "pattern", "query"):
            if isinstance(raw.get(key), str):
                parts.append(raw[key])


def _entries(entries: Any, parts: list[str]) -> None:
    if isinstance(entries, list):
        for e in entries:
            if isinstance(e, dict) and isinstance(e.get("content"), str):
                parts.append(e["content"])


def _blocks(content: Any, parts: list[str]) -> None:
    """Text of content blocks (one or a list), nested tool call content, diffs' new text, resource text."""
    for b in content if isinstance(content, list) else [content]:
        if not isinstance(b, dict):
            continue
        kind = b.get("type")
        if kind == "text" and isinstance(b.get("text"), str):
            parts.append(b["text"])
        elif kind == "content":
            _blocks(b.get("content"), parts)
        elif kind == "diff":
            for key in ("path", "newText"):
                if isinstance(b.get(key), str):
                    parts.append(b[key])
        elif kind == "resource" and isinstance(b.get("resource"), dict):
            if isinstance(b["resource"].get("text"), str):
                parts.append(b["resource"]["text"])
        elif kind == "resource_link":
            for key in ("name", "uri"):
                if isinstance(b.get(key), str):
                    parts.append(b[key])


def _b64(data: Any) -> str:
    if not isinstance(data, str):
        return ""
    try:
        return base64.b64decode(data, validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return ""


# session/update variants whose text is worth finding; None for state and bookkeeping.
UPDATE_TEXT: dict[str, Callable[[dict[str, Any], list[str]], None] | None] = vocab.variant_table(
    "protocol.searchtext: indexed text",
    {
        vocab.USER_MESSAGE_CHUNK: _content,
        vocab.AGENT_MESSAGE_CHUNK: _content,
        vocab.AGENT_THOUGHT_CHUNK: _content,
        vocab.USER_MESSAGE: _content,
        vocab.AGENT_MESSAGE: _content,
        vocab.AGENT_THOUGHT: _content,
        vocab.TOOL_CALL: _tool,
        vocab.TOOL_CALL_UPDATE: _tool,
        vocab.TOOL_CALL_CONTENT_CHUNK: _tool,
        vocab.PLAN: _plan,
        vocab.PLAN_UPDATE: _plan_update,
        vocab.PLAN_REMOVED: None,
        vocab.TERMINAL_OUTPUT_CHUNK: _terminal_output,
        vocab.TERMINAL_UPDATE: _strings("command", "output"),
        vocab.STATE_UPDATE: None,
        vocab.CURRENT_MODE_UPDATE: None,
        vocab.CONFIG_OPTION_UPDATE: None,
        vocab.AVAILABLE_COMMANDS_UPDATE: None,
        vocab.SESSION_INFO_UPDATE: _strings("title", "description"),
        vocab.USAGE_UPDATE: None,
        vocab.QUOTA_UPDATE: _quota,
        vocab.NOTICE: _strings("title", "description"),
        vocab.COMPACTION_UPDATE: _compaction,
        vocab.COMPACTION_SUMMARY_CHUNK: _content,
        vocab.SUBAGENT_UPDATE: None,
        vocab.SESSION_MESSAGE: _content,
        vocab.SESSION_MESSAGE_CHUNK: None,  # not indexed until now; kept so
    },
)
# The variants whose frames the index reads (store/search.py selects them in SQL).
TEXT_UPDATES = tuple(sorted(v for v, collect in UPDATE_TEXT.items() if collect is not None))
