"""Render a materialized session as plain text lines for `acp-relay show --transcript`.

Pure function of `SessionState`: no wall-clock times (only durations), payload order kept, so the
output is stable and golden-test friendly. One small renderer per entry kind (table below).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from ..protocol import vocab
from ..protocol.content import blocks_plain
from ..protocol.jsonrpc import dumps_text
from ..protocol.materialize import (
    MESSAGE_KINDS,
    Entry,
    Event,
    Materializer,
    SessionState,
    Turn,
    elapsed,
    turn_user_message_reported,
)
from ..protocol.words import counted
from ..store.queries import FrameRow, View, iter_messages
from .preview import quota_summary
from .text import TEXT_MAX, escape

__all__ = ["render_transcript", "blocks_text", "transcript_lines", "transcript_parts", "transcript_sections"]

TERMINAL_TAIL = 20  # terminal lines shown; a transcript is for reading, the database has all bytes
_COLORS = {
    "turn": "1;36",
    vocab.USER_MESSAGE: "1;32",
    vocab.AGENT_MESSAGE: "1;34",
    vocab.AGENT_THOUGHT: "2",
    "tool_call": "33",
    "terminal": "33",
    "permission": "35",
    "notice": "2;33",
    "quota": "2;33",
    "unknown": "2",
    "invalid": "31",
    "session": "1",
}


def _paint(text: str, key: str, color: bool) -> str:
    code = _COLORS.get(key)
    text = _clean(text)  # recorded strings never reach the terminal raw, painted or not
    return f"\x1b[{code}m{text}\x1b[0m" if color and code else text


def _clean(text: str) -> str:
    """Printable text that keeps its lines: a recording must not drive the reader's terminal. Its tabs
    become spaces: the transcript prints no control character but the newline."""
    return escape(text, multiline=True, limit=TEXT_MAX).expandtabs(4)


def blocks_text(blocks: Any) -> str:
    """The blocks' text (protocol.content), cleaned for a terminal."""
    return _clean(blocks_plain(blocks))


def _body(label: str, text: str, indent: str = "  ") -> list[str]:
    lines = text.split("\n") if text else [""]
    return [f"{label}{lines[0]}".rstrip()] + [f"{indent}{line}".rstrip() for line in lines[1:]]


def _quoted(lines: list[str], indent: str = "  | ") -> list[str]:
    return [f"{indent}{line}".rstrip() for line in lines]


def _seconds(value: float | None) -> str:
    return "?" if value is None else f"{value:.2f}s"


def _usage(usage: Any) -> str:
    if not isinstance(usage, dict):
        return dumps_text(usage)
    return " ".join(f"{k}={dumps_text(v)}" for k, v in usage.items() if k != "_meta")


# ---- one renderer per entry kind -----------------------------------------------------------------


def _message(e: Entry) -> list[str]:
    label = {vocab.USER_MESSAGE: "User", vocab.AGENT_MESSAGE: "Agent", vocab.AGENT_THOUGHT: "Thought"}.get(e.kind)
    if label is None:  # session_message: messages between sessions
        sender, recipient = e.fields.get("senderSessionId"), e.fields.get("recipientSessionId")
        who = " ".join(p for p in (f"From {sender}" if sender else "", f"To {recipient}" if recipient else "") if p)
        label = f"Session message {e.id}" + (f" ({who})" if who else "")
    return _body(f"{label}: ", blocks_text(e.content))


def _tool_content(item: Any) -> list[str]:
    kind = item.get("type") if isinstance(item, dict) else None
    if kind == "content":
        return _quoted(blocks_text([item.get("content")]).split("\n"))
    if kind == "diff":
        old, new = item.get("oldText"), item.get("newText")
        old_n = len(old.splitlines()) if isinstance(old, str) else 0
        new_n = len(new.splitlines()) if isinstance(new, str) else 0
        return [f"  diff {item.get('path')}: {'new file, ' if old is None else ''}-{old_n} +{counted(new_n, 'line')}"]
    if kind == "terminal":
        return [f"  terminal {item.get('terminalId')}"]
    return [f"  {dumps_text(item)}"]


def _tool_call(e: Entry) -> list[str]:
    f = e.fields
    head = f"Tool call {e.id}: {_clean(str(f.get('title') or ''))}".rstrip()
    status = " ".join(str(x) for x in (f.get("status"), f"({f['kind']})" if f.get("kind") else None) if x)
    lines = [f"{head} [{status}]" if status else head]
    for loc in f.get("locations") or []:
        if isinstance(loc, dict):
            lines.append(f"  at {loc.get('path')}" + (f":{loc['line']}" if loc.get("line") is not None else ""))
    for item in e.content:
        lines += _tool_content(item)
    return lines


def _terminal(e: Entry) -> list[str]:
    f = e.fields
    head = f"Terminal {e.id}" + (f" $ {_clean(str(f['command']))}" if f.get("command") else "")
    head += f" (in {f['cwd']})" if f.get("cwd") else ""
    if e.exited:
        status = f["exitStatus"]
        code, signal = status.get("exitCode"), status.get("signal")
        head += " [exited" + (f" {code}" if code is not None else "") + (f" {signal}" if signal else "") + "]"
    lines = [head]
    if e.output:
        out = _clean(bytes(e.output).decode("utf-8", errors="replace")).rstrip("\n").split("\n")
        if len(out) > TERMINAL_TAIL:
            lines.append(f"  ({len(out) - TERMINAL_TAIL} earlier lines not shown)")
            out = out[-TERMINAL_TAIL:]
        lines += _quoted(out)
    return lines


def _plan(e: Entry) -> list[str]:
    f = e.fields
    if e.removed:
        return [f"Plan {e.id} (removed)"]
    lines = [f"Plan {e.id}:"]
    if f.get("type") in (None, "items"):
        for item in f.get("entries") or []:
            if isinstance(item, dict):
                prio = f" ({item['priority']})" if item.get("priority") else ""
                lines.append(f"  [{item.get('status')}]{prio} {_clean(str(item.get('content')))}")
    elif f.get("type") == "markdown":
        lines += _quoted(_clean(str(f.get("content"))).split("\n"))
    elif f.get("type") == "file":
        lines.append(f"  file {f.get('uri')}")
    else:
        lines.append(f"  {dumps_text(f)}")
    return lines


def _compaction(e: Entry) -> list[str]:
    lines = [f"Compaction {e.id} [{e.fields.get('status')}]"]
    summary = blocks_text(e.fields.get("summary"))
    lines += _quoted(summary.split("\n")) if summary else []
    if e.fields.get("error") is not None:
        lines.append(f"  error: {_clean(str(e.fields['error']))}")
    return lines


def _subagent(e: Entry) -> list[str]:
    f = e.fields
    title = f.get("title") or f.get("name")
    state = f.get("state")
    if isinstance(state, dict):
        state = " ".join(str(state[k]) for k in ("state", "stopReason") if state.get(k))
    head = f"Child session {e.id}" + (f": {_clean(str(title))}" if title else "") + (f" [{state}]" if state else "")
    rest = {k: v for k, v in f.items() if k not in ("title", "name", "state")}
    return [head] + ([f"  {dumps_text(rest)}"] if rest else [])


def _permission(e: Entry) -> list[str]:
    f = e.fields
    target = f" for {f['toolCallId']}" if f.get("toolCallId") else ""
    title = f": {_clean(str(f['title']))}" if f.get("title") else ""
    if "error" in f:
        answer = f"error {dumps_text(f['error'])}"
    elif f.get("outcome") == "selected":
        answer = f'selected "{f.get("optionName")}" ({f.get("optionId")})'
    elif "outcome" in f:
        answer = str(f.get("outcome"))
    else:
        answer = "no answer"
    return [f"Permission request{target}{title} -> {answer}"]


def _client_request(e: Entry) -> list[str]:
    f = e.fields
    answer = f"error {dumps_text(f['error'])}" if "error" in f else ("answered" if "result" in f else "no answer")
    return [f"Request {f.get('method')} {dumps_text(f.get('params'))} -> {answer}"]


def _notice(e: Entry) -> list[str]:
    f = e.fields
    desc = f" - {_clean(str(f['description']))}" if f.get("description") else ""
    return [f"[live-only] Notice {f.get('severity')}: {_clean(str(f.get('title')))}{desc}"]


def _quota(e: Entry) -> list[str]:
    when = f" as of {e.fields['updatedAt']}" if e.fields.get("updatedAt") else ""
    return [f"[live-only] Quota{when}: {quota_summary(e.fields, full=True)}"]


def _generic(e: Entry) -> list[str]:
    label = "Unknown update" if e.kind == "unknown" else "Invalid update"
    why = f" ({'; '.join(e.problems)})" if e.kind == "invalid" and e.problems else ""
    name = f" {e.variant}" if e.variant else ""
    return [f"{label}{name}{why}: {dumps_text(e.raw_update)}"]


RENDERERS: dict[str, Callable[[Entry], list[str]]] = {
    **dict.fromkeys(MESSAGE_KINDS, _message),
    "tool_call": _tool_call,
    "terminal": _terminal,
    "plan": _plan,
    "compaction": _compaction,
    "subagent": _subagent,
    "permission": _permission,
    "client_request": _client_request,
    "notice": _notice,
    "quota": _quota,
    "unknown": _generic,
    "invalid": _generic,
}


# ---- the whole transcript ---------------------------------------------------------------------------


def _turn_lines(state: SessionState, turn: Turn, color: bool) -> list[str]:
    if turn.ended:
        outcome = str(turn.stop_reason) if turn.stop_reason else "no stop reason"
    else:
        outcome = "not finished"
    head = f"=== Turn {turn.index} · {_seconds(turn.duration)} · {outcome} ==="
    lines = ["", _paint(head, "turn", color)]
    if turn.error is not None:
        lines.append(_clean(f"  error: {dumps_text(turn.error)}"))
    if turn.cancel_ts is not None:
        lines.append(f"  cancelled by the client after {_seconds(elapsed(turn.start_ts, turn.cancel_ts))}")
    if turn.time_to_first_message is not None:
        lines.append(f"  first agent message after {_seconds(turn.time_to_first_message)}")
    if turn.usage is not None:
        lines.append(_clean(f"  usage: {_usage(turn.usage)}"))
    if not turn_user_message_reported(state, turn):  # show what the client sent instead
        label = "Prompt (error): " if turn.error is not None else "User: "
        lines += _body(_paint(label, vocab.USER_MESSAGE, color), blocks_text(turn.prompt))
    return lines


def _session_lines(state: SessionState) -> list[str]:
    lines = ["", "--- session ---"]
    if state.mode is not None:
        lines.append(f"Mode: {state.mode}")
    if state.commands:
        names = (c.get("name") if isinstance(c, dict) else dumps_text(c) for c in state.commands)
        lines.append("Commands: " + " ".join(f"/{n}" for n in names))
    for opt in state.config_options or []:
        if isinstance(opt, dict):
            name = opt.get("name") or opt.get("configId") or opt.get("id")
            lines.append(f"Config {name}: {dumps_text(opt.get('currentValue', opt.get('value')))}")
    if state.usage is not None:
        used, size, cost = state.usage.get("used"), state.usage.get("size"), state.usage.get("cost")
        text = f"Context: {used}/{counted(size, 'token')}"
        if isinstance(cost, dict):
            text += f", cost {cost.get('amount')} {cost.get('currency')}"
        lines.append(text)
    state_text = str(state.run_state) + (f" ({state.stop_reason})" if state.stop_reason else "")
    lines.append(f"State: {state_text}" if state.run_state else "State: not reported")
    if state.replayed_updates:
        lines.append(
            f"History replayed by session/load or session/resume: {counted(state.replayed_updates, 'update')} "
            "(already shown above)"
        )
    return lines


Section = tuple[int | None, list[str]]  # (seq of the frame the lines start at, or None; the lines)


def transcript_sections(state: SessionState, *, color: bool = False) -> list[Section]:
    """The transcript in pieces, each with the seq of the frame it comes from: lets a page link lines to frames."""
    title = state.info.get("title")
    head = f"Session (ACP v{state.protocol_version})" + (f": {_clean(str(title))}" if title else "")
    if state.info.get("updatedAt"):
        head += f" · updated {state.info['updatedAt']}"
    sections: list[Section] = [(None, [_paint(head, "session", color)])]
    starts: dict[int, list[Turn]] = {}
    for turn in state.turns:
        starts.setdefault(turn.timeline_pos, []).append(turn)
    last_turn = state.turns[-1] if state.turns else None
    after = False
    for pos in range(len(state.entries) + 1):
        for turn in starts.get(pos, ()):
            sections.append((turn.start_seq, _turn_lines(state, turn, color)))
        if pos < len(state.entries):
            entry = state.entries[pos]
            if (
                not after
                and last_turn
                and last_turn.ended
                and entry.turn is None
                and entry.first_seq > (last_turn.end_seq or 0)
            ):
                after = True  # background output: it is not the last turn's, whose header is above it
                sections.append((None, ["", _paint("--- after the last turn ended ---", "turn", color)]))
            body = [_clean(line) for line in RENDERERS.get(entry.kind, _generic)(entry)]
            sections.append((entry.first_seq, [_paint(body[0], entry.kind, color)] + body[1:]))
    sections.append((None, [_clean(line) for line in _session_lines(state)]))
    return sections


def render_transcript(state: SessionState, *, color: bool = False) -> list[str]:
    """Timeline in first-seen order, with a header where each turn began."""
    return [line for _, lines in transcript_sections(state, color=color) for line in lines]


def materialize_view(
    conn: sqlite3.Connection, view: View, each: Callable[[FrameRow], None] | None = None
) -> SessionState:
    m = Materializer(view.protocol_version or 1)
    last = None
    for f, msg, request in iter_messages(conn, view):
        if each is not None and f.id != last:  # a batch comes once per member
            last = f.id
            each(f)
        m.feed(Event(f.seq, f.ts, f.direction, msg, request=request, frame_id=f.id, raw=f.raw))
        del f, msg, request  # released before the next row is read (one big frame at a time)
    return m.state


def transcript_lines(conn: sqlite3.Connection, view: View, *, color: bool = False) -> list[str]:
    """The conversation as a person reads it: the view's messages folded by the materializer, then rendered."""
    return render_transcript(materialize_view(conn, view), color=color)


def transcript_parts(
    conn: sqlite3.Connection, view: View, each: Callable[[FrameRow], None] | None = None
) -> list[Section]:
    """transcript_lines in sections that know their first frame's seq (for `acp-relay view`); `each` sees
    every frame of the view on the way, so a caller that needs the frames too reads them only once."""
    return transcript_sections(materialize_view(conn, view, each))
