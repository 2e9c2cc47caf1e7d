"""A session's history as a client must be sent it again (`session/load` of `acp-relay replay`): the state's
entries turned back into `session/update`s, v1 or v2 draft shapes."""

from __future__ import annotations

import base64

from . import vocab
from .session_state import MESSAGE_KINDS, STICKY, Entry, SessionState, Turn


def turn_user_message_reported(state: SessionState, turn: Turn) -> bool:
    """Did the agent report the turn's user message? (v1 agents need not echo the prompt.)"""
    if turn.user_message_id and state.entry(vocab.USER_MESSAGE, turn.user_message_id):
        return True
    return any(uid.startswith("user_message:") for uid in turn.entry_ids)


def turn_needs_prompt_message(state: SessionState, turn: Turn) -> bool:
    """Replay builds the user message from the prompt when none was reported (not for failed prompts)."""
    return turn.error is None and not turn_user_message_reported(state, turn)


def _message_updates(kind: str, ident: str, fields: dict, v2: bool) -> list[dict]:
    """v2: one whole-message upsert. v1 has none: one chunk per content block."""
    content = fields.get("content")
    content = list(content) if isinstance(content, list) else []
    if v2:
        rest = {k: v for k, v in fields.items() if k != "content"}
        return [{"sessionUpdate": kind, "messageId": ident, **rest, "content": content}]
    extra = {k: fields[k] for k in STICKY.get(kind, ()) if fields.get(k) is not None}
    return [{"sessionUpdate": f"{kind}_chunk", "messageId": ident, **extra, "content": b} for b in content]


def _entry_updates(entry: Entry, ident: str, v2: bool) -> list[dict]:
    if entry.live_only or not entry.replayable or entry.removed:
        return []
    if entry.kind == "unknown":
        return [entry.raw_update]  # the original object: the replayer may use entry.raw bytes
    fields = dict(entry.fields)
    if entry.kind in MESSAGE_KINDS:
        return _message_updates(entry.kind, ident, fields, v2)
    if entry.kind == "tool_call":
        if v2:
            return [{"sessionUpdate": vocab.TOOL_CALL_UPDATE, "toolCallId": ident, **fields}]
        return [{"sessionUpdate": vocab.TOOL_CALL, "toolCallId": ident, "title": "", **fields}]
    if entry.kind == "terminal":
        if entry.output is not None:
            fields["output"] = {"data": base64.b64encode(bytes(entry.output)).decode("ascii")}
        return [{"sessionUpdate": vocab.TERMINAL_UPDATE, "terminalId": ident, **fields}]
    if entry.kind == "plan":
        if not v2 and entry.variant == vocab.PLAN and ident == "main":
            return [{"sessionUpdate": vocab.PLAN, "entries": fields.get("entries", [])}]
        return [{"sessionUpdate": vocab.PLAN_UPDATE, "plan": fields}]
    if entry.kind == "compaction":
        status = fields.pop("status", "in_progress")
        # The seed: a non-empty summary is only valid with `completed` (a failed or unfinished compaction's
        # partial summary is not retained context), and `error` only with `failed`. A fresh client holds
        # nothing to clear, so an empty summary is left out too.
        if status != "completed" or not fields.get("summary"):
            fields.pop("summary", None)
        if status != "failed":
            fields.pop("error", None)
        return [{"sessionUpdate": vocab.COMPACTION_UPDATE, "compactionId": ident, "status": status, **fields}]
    if entry.kind == "subagent":
        return [{"sessionUpdate": vocab.SUBAGENT_UPDATE, "sessionId": ident, **fields}]
    return []


def replay_updates(state: SessionState, protocol_version: int) -> list[dict]:
    """The `params.update` payloads a replayer sends for history replay, in timeline order.

    Notices, requests to the client and malformed updates are left out; compactions, tool calls
    and terminals are one materialized update each; session-level state comes last.
    """
    v2 = protocol_version >= 2
    real_ids = {e.id for e in state.entries if e.kind in MESSAGE_KINDS and not e.synthetic_id}

    def fresh(ident: str) -> str:
        while ident in real_ids:
            ident += "-replay"
        real_ids.add(ident)
        return ident

    prompts: dict[int, list[Turn]] = {}
    for turn in state.turns:
        if turn_needs_prompt_message(state, turn):
            prompts.setdefault(turn.timeline_pos, []).append(turn)
    out: list[dict] = []
    for pos in range(len(state.entries) + 1):
        for turn in prompts.get(pos, ()):
            ident = turn.user_message_id or fresh(f"msg-prompt-{turn.index}")
            out += _message_updates(vocab.USER_MESSAGE, ident, {"content": turn.prompt}, v2)
        if pos < len(state.entries):
            entry = state.entries[pos]
            ident = fresh(entry.id) if entry.synthetic_id else entry.id
            out += _entry_updates(entry, ident, v2)
    if state.commands is not None:
        out.append({"sessionUpdate": vocab.AVAILABLE_COMMANDS_UPDATE, "availableCommands": list(state.commands)})
    if state.mode is not None and not v2:
        out.append({"sessionUpdate": vocab.CURRENT_MODE_UPDATE, "currentModeId": state.mode})
    if state.config_options is not None:
        out.append({"sessionUpdate": vocab.CONFIG_OPTION_UPDATE, "configOptions": list(state.config_options)})
    if state.info:
        out.append({"sessionUpdate": vocab.SESSION_INFO_UPDATE, **state.info})
    if state.usage is not None:
        out.append({"sessionUpdate": vocab.USAGE_UPDATE, **state.usage})
    return out
