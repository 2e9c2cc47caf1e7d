"""What people read in a message, as plain text for the full-text index. Pure: a parsed message in, text out.

Prompts, agent messages and thoughts, tool call titles and content, plan entries, terminal output,
permission requests and error messages. Machinery (capabilities, ids, usage numbers, command lists) is left
out: a search for "session" must not match every frame.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

# session/update variants whose text is worth finding (the rest are state and bookkeeping).
TEXT_UPDATES = (
    "user_message_chunk",
    "agent_message_chunk",
    "agent_thought_chunk",
    "user_message",
    "agent_message",
    "agent_thought",
    "tool_call",
    "tool_call_update",
    "tool_call_content_chunk",
    "plan",
    "plan_update",
    "terminal_output_chunk",
    "terminal_update",
    "compaction_summary_chunk",
    "compaction_update",
    "session_message",
    "session_info_update",
    "notice",
)
# Methods whose requests or answers carry such text (an answer is indexed under its request's method).
TEXT_METHODS = ("session/prompt", "session/request_permission", "terminal/output", "session/update")
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
    if method == "session/prompt" and isinstance(params, dict):
        _blocks(params.get("prompt"), parts)
    elif method == "session/update" and isinstance(params, dict) and isinstance(params.get("update"), dict):
        _update(params["update"], parts)
    elif method == "session/request_permission" and isinstance(params, dict):
        call = params.get("toolCall")
        if isinstance(call, dict):
            _tool(call, parts)
    elif method == "terminal/output" and isinstance(result, dict) and isinstance(result.get("output"), str):
        parts.append(result["output"])
    text = "\n".join(p for p in parts if p)
    for m in MARKERS:
        text = text.replace(m, "")
    return text[:MAX_TEXT]


def _update(u: dict[str, Any], parts: list[str]) -> None:
    variant = u.get("sessionUpdate")
    if variant in ("tool_call", "tool_call_update", "tool_call_content_chunk"):
        _tool(u, parts)
    elif variant == "plan":
        _entries(u.get("entries"), parts)
    elif variant == "plan_update":
        plan = u.get("plan")
        if isinstance(plan, dict):
            _entries(plan.get("entries"), parts)
            if isinstance(plan.get("content"), str):
                parts.append(plan["content"])
    elif variant == "terminal_output_chunk":
        parts.append(_b64(u.get("data")))
    elif variant == "terminal_update":
        for key in ("command", "output"):
            if isinstance(u.get(key), str):
                parts.append(u[key])
    elif variant in ("session_info_update", "notice"):
        for key in ("title", "description"):
            if isinstance(u.get(key), str):
                parts.append(u[key])
    elif variant == "compaction_update":
        _blocks(u.get("summary"), parts)
        if isinstance(u.get("error"), str):
            parts.append(u["error"])
    elif variant in TEXT_UPDATES:
        _blocks(u.get("content"), parts)


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
