"""One line's view of a message's content, for the frame list, the sequence diagram and search: a table
keyed by the vocabulary's update variants (UPDATE_PREVIEWS), and a view per method of params and results.
Pure functions of the message. The functions below build plain text; `preview` (and `fmt_id`) escape what
they return once, at their exit, so no field a row adds can reach the terminal raw (the `clean` and `quote`
inside only cut long values early: escaping is idempotent)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

from ..protocol import vocab
from ..protocol.jsonrpc import dumps_text
from ..protocol.words import counted
from ..store.queries import FrameRow
from .text import LINE_MAX, clean, quote


def fmt_id(rpc_id: Any) -> str:
    """`#1` for the number 1, `#"1"` for the string: they are different ids."""
    if rpc_id is None:
        return ""
    if isinstance(rpc_id, str):
        return "#" + clean(json.dumps(rpc_id, ensure_ascii=False))
    if isinstance(rpc_id, bool):  # not a legal id, but sent: shown as its JSON text
        return "#true" if rpc_id else "#false"
    if isinstance(rpc_id, float) and rpc_id.is_integer():
        return f"#{rpc_id!r}"
    return clean(f"#{rpc_id}")  # ints exactly, however wide; any other value (not a legal id) escaped


def _blocks(content: Any) -> str:
    """Text of content blocks (one or a list), other block types as [type]."""
    items = content if isinstance(content, list) else [content]
    out = []
    for b in items:
        if not isinstance(b, dict):
            continue
        t = b.get("type")
        if t == "text" and isinstance(b.get("text"), str):
            out.append(b["text"])
        elif t == "content":
            out.append(_blocks(b.get("content")))
        elif t == "resource_link":
            out.append(f"[{b.get('uri', 'link')}]")
        elif t == "diff":
            out.append(f"[diff {b.get('path', '')}]".replace(" ]", "]"))
        elif t == "terminal":
            out.append(f"[terminal {b.get('terminalId', '')}]")
        elif t:
            out.append(f"[{t}]")
    return " ".join(x for x in out if x)


def _fields(d: dict[str, Any], *keys: str) -> str:
    return " ".join(f"{k}={clean(str(d[k]))}" for k in keys if d.get(k) is not None)


def _dict_at(d: dict[str, Any], key: str, default: Any = ...) -> Any:
    """d[key] when it is an object, else `default` ({} unless given): payloads may have any shape."""
    value = d.get(key)
    return value if isinstance(value, dict) else ({} if default is ... else default)


def _list_at(d: dict[str, Any], key: str, default: Any = ...) -> Any:
    """d[key] when it is an array, else `default` ([] unless given)."""
    value = d.get(key)
    return value if isinstance(value, list) else ([] if default is ... else default)


def _peer_preview(d: dict[str, Any], info: Any) -> str:
    """An initialize request's or answer's preview: the protocol version, then the peer's name and version."""
    name = info.get("name") if isinstance(info, dict) else None
    if not name:
        return clean(f"v{d.get('protocolVersion', '?')}")
    return clean(f"v{d.get('protocolVersion', '?')} {name} {info.get('version', '')}".rstrip())


def _update_preview(u: dict[str, Any]) -> str:
    """The short preview of one session/update, from the variant's row of `UPDATE_PREVIEWS` (a variant the
    table does not know, or maps to None, shows its fields as JSON)."""
    variant = u.get("sessionUpdate")
    preview = UPDATE_PREVIEWS.get(variant) if isinstance(variant, str) else None
    if preview is None:
        return clean(dumps_text({k: x for k, x in u.items() if k not in ("sessionUpdate", "_meta")}))
    return preview(u)


def _content_preview(u: dict[str, Any]) -> str:
    return quote(_blocks(u.get("content")))


def _message_preview(u: dict[str, Any]) -> str:
    return _upsert_preview(u, {k: x for k, x in u.items() if k not in ("sessionUpdate", "_meta")})


def _tool_preview(u: dict[str, Any]) -> str:
    parts = [
        quote(u["title"]) if isinstance(u.get("title"), str) else "",
        f"[{u['status']}]" if isinstance(u.get("status"), str) else "",
        clean(str(u["kind"])) if isinstance(u.get("kind"), str) else "",
    ]
    if u.get("content"):
        parts.append(quote(_blocks(u["content"])))
    return " ".join(p for p in parts if p)


def _plan_preview(u: dict[str, Any]) -> str:
    entries = _list_at(u, "entries")
    first = entries[0] if entries and isinstance(entries[0], dict) else None
    return counted(len(entries), "entry", "entries") + (
        ": " + quote(str(first.get("content"))) if first is not None else ""
    )


def _plan_update_preview(u: dict[str, Any]) -> str:
    plan = _dict_at(u, "plan")
    entries = _list_at(plan, "entries", None)
    return clean(
        f"{plan.get('type', '?')}" + (f" {counted(len(entries), 'entry', 'entries')}" if entries is not None else "")
    )


def _terminal_output_preview(u: dict[str, Any]) -> str:
    try:
        data = base64.b64decode(str(u.get("data", "")), validate=True).decode("utf-8", "replace")
    except ValueError:
        return "(bad base64)"
    return quote(data)


def _terminal_preview(u: dict[str, Any]) -> str:
    exit_status = u.get("exitStatus")
    command = quote(str(u["command"])) if u.get("command") else ""
    status = f"exit={dumps_text(exit_status)}" if isinstance(exit_status, dict) else ""
    return " ".join(x for x in (command, status) if x)


def _commands_preview(u: dict[str, Any]) -> str:
    cmds = _list_at(u, "availableCommands")
    return clean(" ".join("/" + str(c.get("name")) for c in cmds if isinstance(c, dict)))


def _session_message_preview(u: dict[str, Any]) -> str:
    return (_fields(u, "senderSessionId", "recipientSessionId") + " " + _upsert_preview(u, {})).strip()


def quota_summary(snapshot: dict[str, Any], *, full: bool = False) -> str:
    """A quota snapshot (quota_update, the Quotas and Limits RFD) on one line: each pool, its state, and each
    meter's share, amounts and status, only what the agent reported; `full` names them by their labels and
    says when each meter resets."""
    pools = []
    for pool in _list_at(snapshot, "pools"):
        if not isinstance(pool, dict):
            continue
        head = str(pool.get("label") if full and pool.get("label") else pool.get("id"))
        head += f" ({pool['state']})" if pool.get("state") else ""
        meters = [_meter(m, full) for m in _list_at(pool, "meters") if isinstance(m, dict)]
        pools.append(head + (": " + ", ".join(meters) if meters else ""))
    return clean("; ".join(pools))


def _meter(m: dict[str, Any], full: bool) -> str:
    parts = [str(m.get("label") if full and m.get("label") else m.get("id"))]
    share = m.get("usedPercent")
    if isinstance(share, int | float) and not isinstance(share, bool):
        parts.append(f"{share:g}%")
    amounts = [a for a in (_dict_at(m, "used"), _dict_at(m, "limit")) if "value" in a]
    if amounts:
        unit = amounts[-1].get("unit")
        parts.append("/".join(str(a["value"]) for a in amounts) + (f" {unit}" if unit else ""))
    if m.get("status"):
        parts.append(str(m["status"]))
    if full and m.get("resetsAt"):
        parts.append(f"resets {m['resetsAt']}")
    return " ".join(parts)


def _fields_preview(*keys: str) -> Callable[[dict[str, Any]], str]:
    return lambda u: _fields(u, *keys)


UPDATE_PREVIEWS: dict[str, Callable[[dict[str, Any]], str] | None] = vocab.variant_table(
    "render.frames: one-line preview",
    {
        vocab.USER_MESSAGE_CHUNK: _content_preview,
        vocab.AGENT_MESSAGE_CHUNK: _content_preview,
        vocab.AGENT_THOUGHT_CHUNK: _content_preview,
        vocab.SESSION_MESSAGE_CHUNK: _content_preview,
        vocab.COMPACTION_SUMMARY_CHUNK: _content_preview,
        vocab.TOOL_CALL_CONTENT_CHUNK: _content_preview,
        vocab.USER_MESSAGE: _message_preview,
        vocab.AGENT_MESSAGE: _message_preview,
        vocab.AGENT_THOUGHT: _message_preview,
        vocab.TOOL_CALL: _tool_preview,
        vocab.TOOL_CALL_UPDATE: _tool_preview,
        vocab.PLAN: _plan_preview,
        vocab.PLAN_UPDATE: _plan_update_preview,
        vocab.PLAN_REMOVED: None,
        vocab.TERMINAL_OUTPUT_CHUNK: _terminal_output_preview,
        vocab.TERMINAL_UPDATE: _terminal_preview,
        vocab.STATE_UPDATE: _fields_preview("state", "stopReason"),
        vocab.NOTICE: lambda u: clean(f"{u.get('severity', '?')}: {u.get('title', '')}") + " (live only)",
        vocab.COMPACTION_UPDATE: lambda u: (
            _fields(u, "status", "error") + (f" summary {quote(_blocks(u['summary']))}" if u.get("summary") else "")
        ),
        vocab.USAGE_UPDATE: lambda u: (
            _fields(u, "used", "size") + (f" cost={dumps_text(u['cost'])}" if u.get("cost") else "")
        ),
        vocab.QUOTA_UPDATE: lambda u: quota_summary(u) + " (live only)",
        vocab.SESSION_INFO_UPDATE: _fields_preview("title", "updatedAt"),
        vocab.AVAILABLE_COMMANDS_UPDATE: _commands_preview,
        vocab.CURRENT_MODE_UPDATE: _fields_preview("currentModeId"),
        vocab.CONFIG_OPTION_UPDATE: None,
        vocab.SUBAGENT_UPDATE: None,
        vocab.SESSION_MESSAGE: _session_message_preview,
    },
)


def _upsert_preview(u: dict[str, Any], rest: dict[str, Any]) -> str:
    """A message upsert: its text; `content` null or [] clears it; without `content` it patches other
    fields only (shown as such, not as an empty text)."""
    if "content" not in u:
        patch = {k: x for k, x in rest.items() if k != "messageId"}
        return clean(dumps_text(patch)) if patch else "(content unchanged)"
    if not u.get("content"):
        return "(content cleared)"
    return quote(_blocks(u.get("content")))


def _params_preview(method: str | None, p: Any) -> str:
    if not isinstance(p, dict):
        return "" if p is None else clean(dumps_text(p))
    if method == vocab.INITIALIZE:
        return _peer_preview(p, p.get("clientInfo", p.get("info")))
    if method == vocab.PROMPT:
        return quote(_blocks(p.get("prompt")))
    if method == vocab.UPDATE:
        return _update_preview(p["update"]) if isinstance(p.get("update"), dict) else clean(dumps_text(p))
    if method in vocab.SESSION_ORIGINS:
        return _fields(p, "cwd")
    if method == vocab.REQUEST_PERMISSION:
        subject = _dict_at(p, "subject")  # v2: subject.toolCall, or subject.toolCallId for a command
        call = _dict_at(p, "toolCall") or _dict_at(subject, "toolCall")
        if "toolCallId" not in call and subject.get("toolCallId") is not None:
            call = {**call, "toolCallId": subject["toolCallId"]}
        options = [o.get("optionId") for o in p.get("options") or [] if isinstance(o, dict)]
        title = p.get("title") or call.get("title")
        return clean(
            " ".join(
                x
                for x in (
                    str(call.get("toolCallId") or ""),
                    quote(title) if title else "",
                    "options: " + ", ".join(map(str, options)),
                )
                if x
            )
        )
    if method in (vocab.FS_READ, vocab.FS_WRITE):
        return _fields(p, "path", "line", "limit")
    if method == vocab.TERMINAL_CREATE:
        return quote(" ".join([str(p.get("command", ""))] + [str(a) for a in p.get("args") or []]))
    if method == vocab.CANCEL:
        return ""
    if method == vocab.CANCEL_REQUEST:
        return f"request {fmt_id(p.get('requestId'))}"
    rest = {k: v for k, v in p.items() if k not in ("sessionId", "_meta")}
    return clean(dumps_text(rest)) if rest else ""


def _result_preview(method: str | None, r: Any) -> str:
    if not isinstance(r, dict):
        return clean(dumps_text(r))
    if method == vocab.INITIALIZE:
        return _peer_preview(r, r.get("agentInfo", r.get("info")))
    if method in vocab.SESSION_MINTING and "sessionId" in r:
        return clean(str(r["sessionId"]))
    if method == vocab.PROMPT:
        return _fields(r, "stopReason") or ("accepted" if not r else clean(dumps_text(r)))
    if method == vocab.REQUEST_PERMISSION:
        o = _dict_at(r, "outcome")
        return clean(" ".join(str(x) for x in (o.get("outcome"), o.get("optionId")) if x))
    if method == vocab.FS_READ and isinstance(r.get("content"), str):
        return f"{counted(len(r['content'].encode()), 'byte')} " + quote(r["content"])
    return clean(dumps_text(r)) if r else "{}"


def preview(f: FrameRow, message: Any = ...) -> str:
    """A short human view of the content: text, tool title and status, stop reason, error... escaped here,
    whatever the row of UPDATE_PREVIEWS or the method's view put in it."""
    return clean(_preview(f, f.message() if message is ... else message))


def _preview(f: FrameRow, msg: Any) -> str:
    if msg is None:
        return quote(f.raw[: LINE_MAX * 4].decode("utf-8", "backslashreplace"))
    if isinstance(msg, list):
        return clean(", ".join(_member_summary(m) for m in msg))
    if not isinstance(msg, dict):
        return clean(dumps_text(msg))
    if f.kind == "error":
        err = msg.get("error")
        if isinstance(err, dict):
            return clean(f"{err.get('code')} {err.get('message', '')}".strip())
        return clean(dumps_text(err))
    if f.kind == "response":
        return _result_preview(f.method, msg.get("result"))
    if f.kind in ("request", "notification"):
        return _params_preview(f.method, msg.get("params"))
    return clean(dumps_text(msg))


def _member_summary(m: Any) -> str:
    if not isinstance(m, dict):
        return "invalid"
    if isinstance(m.get("method"), str):
        return f"{m['method']} {fmt_id(m.get('id'))}".rstrip()
    if "error" in m:
        return f"error {fmt_id(m.get('id'))}"
    if "result" in m:
        return f"result {fmt_id(m.get('id'))}"
    return "invalid"


# -- one frame in full ------------------------------------------------------------------------------------
