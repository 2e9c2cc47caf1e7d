"""Fold one session's recorded ACP JSON-RPC messages into its final state (sans-I/O).

Plain Python over dicts, no trio and no SQLite, so that every materialization rule of the spec
(ACP Prompt Lifecycle (v2 draft), sections "Session Updates" and "Prompt Lifecycle"; for v1 the
"Prompt Turn" page and the `SessionUpdate` schema) is a small unit test:
events in, `SessionState` out. `acp-relay show --transcript` renders the state and
`acp-relay replay` serves `replay_updates(state, version)` back to a client.

Rules in one place (tables below drive most of them):
- chunks append to the entity's list field; whole updates are upserts (omitted = unchanged,
  `null` = clear, value = replace, `[]` clears arrays); v1 `tool_call_update` is two-state.
  Patches iterate the keys present in the payload, so "absent" is never confused with `null`;
- entities are ordered by first sight; later patches never move them;
- terminal bytes: each `terminal_output_chunk` is base64-decoded on its own and appended,
  a `terminal_update.output` snapshot replaces all bytes;
- unknown, `_`-prefixed and malformed updates stay in the timeline with their raw payload.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable
from typing import Any

from . import vocab
from .history import replay_updates, turn_needs_prompt_message, turn_user_message_reported
from .jsonrpc import OPPOSITE, Correlator, get, id_key
from .session_state import MESSAGE_KINDS, STICKY, Entry, Event, SessionState, Turn, elapsed

__all__ = [
    "Event",
    "Entry",
    "Turn",
    "SessionState",
    "Materializer",
    "materialize",
    "replay_updates",
    "turn_needs_prompt_message",
    "turn_user_message_reported",
    "MESSAGE_KINDS",
    "elapsed",
]


# chunk variant -> (entity kind, id field, list field the chunk appends one item to)
CHUNKS: dict[str, tuple[str, str, str]] = {f"{k}_chunk": (k, "messageId", "content") for k in MESSAGE_KINDS}
CHUNKS |= {
    vocab.TOOL_CALL_CONTENT_CHUNK: ("tool_call", "toolCallId", "content"),
    vocab.COMPACTION_SUMMARY_CHUNK: ("compaction", "compactionId", "summary"),
}
# upsert variant -> (entity kind, id fields tried in order)
UPSERTS: dict[str, tuple[str, tuple[str, ...]]] = {k: (k, ("messageId",)) for k in MESSAGE_KINDS}
UPSERTS |= {
    vocab.TOOL_CALL_UPDATE: ("tool_call", ("toolCallId",)),
    vocab.TERMINAL_UPDATE: ("terminal", ("terminalId",)),
    vocab.COMPACTION_UPDATE: ("compaction", ("compactionId",)),
    # the child session's id is the update's own `sessionId` (the outer params.sessionId is the parent)
    vocab.SUBAGENT_UPDATE: ("subagent", ("sessionId", "childSessionId")),
}
# array fields: `null` and `[]` both clear, a concrete array replaces (copied: chunks append to it)
LIST_FIELDS = frozenset({"content", "locations", "summary"})
# discriminators removed in v2: on a v2 connection they are unknown updates (the v2 draft schema's `other` fallback does not exclude them)
V1_ONLY = vocab.V1_ONLY
# responses to these client requests carry session-level state (configOptions, modes)
SESSION_RESULTS = frozenset({vocab.SESSION_NEW, vocab.SESSION_LOAD, vocab.SESSION_RESUME, vocab.SET_CONFIG_OPTION})


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _b64(data: Any) -> bytes | None:
    if not isinstance(data, str):
        return None
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


class Materializer:
    """Feed events in recorded order; read `state` at any time."""

    def __init__(self, protocol_version: int = 1) -> None:
        self.v2 = protocol_version >= 2
        self._s = SessionState(protocol_version=protocol_version)
        self._open: list[Turn] = []  # turns started and not ended, oldest first
        self._idles: list[tuple[int, float, str | None, Any]] = []  # v2 idle state_updates: seq, ts, stopReason, usage
        self._pending: Correlator[tuple[str, dict, Turn | Entry | None]] = Correlator()
        self._last: Entry | None = None  # last touched entity: v1 anonymous chunk grouping
        self._anon = 0
        self._replaying: tuple[str, tuple[str, Any]] | None = None  # the load whose history echo we skip

    @property
    def state(self) -> SessionState:
        return self._s

    # ---- entry point -------------------------------------------------------------------------

    def feed(self, event: Event) -> None:
        """Apply one event; never raises, since a recording may hold anything. An exception (a bug here) is
        recorded in state.errors, where tests see it, and the event is kept as an invalid entry."""
        try:
            self._feed(event)
        except Exception as exc:  # last resort: keep the payload and say what failed
            try:
                self._s.errors.append(f"seq {getattr(event, 'seq', '?')}: {type(exc).__name__}: {exc}")
                self._generic(event, getattr(event, "message", None), "invalid", "materializer error")
            except Exception:
                pass

    def _feed(self, event: Event) -> None:
        msg = event.message
        if not isinstance(msg, dict):
            self._s.problems.append(f"seq {event.seq}: message is not an object")
            return
        method = msg.get("method")
        if isinstance(method, str):
            if "id" in msg:
                self._request(event, method, msg)
            elif method == vocab.UPDATE:
                self._update(event, get(msg.get("params"), "update"))
            elif method == vocab.CANCEL:
                for turn in self._open:
                    if turn.cancel_ts is None:
                        turn.cancel_ts = event.ts
        elif "result" in msg or "error" in msg:
            self._response(event, msg)

    # ---- requests and responses --------------------------------------------------------------

    def _request(self, event: Event, method: str, msg: dict) -> None:
        params = msg.get("params")
        target: Turn | Entry | None = None
        if method == vocab.PROMPT and event.direction == "c2a":
            prompt = get(params, "prompt")
            target = Turn(
                index=len(self._s.turns) + 1,
                prompt=list(prompt) if isinstance(prompt, list) else [],
                start_seq=event.seq,
                start_ts=event.ts,
                request_id=msg.get("id"),
                timeline_pos=len(self._s.entries),
            )
            self._s.turns.append(target)
            self._open.append(target)
            self._last = None
            if not self.v2:  # v1 has no state_update: the pending prompt is the running state
                self._s.run_state, self._s.stop_reason = "running", None
        elif method == vocab.UPDATE:  # a request-shaped update is still an update
            self._update(event, get(params, "update"))
            return
        elif event.direction == "a2c":
            target = self._client_request(event, method, msg)
        elif self._s.entries and (
            method == vocab.SESSION_LOAD
            or (method == vocab.SESSION_RESUME and get(get(params, "replayFrom"), "type") == "start")
        ):
            # The agent is about to restate the whole conversation: what it sends is the history this
            # state already holds, so folding it in again would double every message.
            self._replaying = (event.direction, id_key(msg.get("id")))
        self._pending.request(event.direction, msg.get("id"), (method, msg, target))

    def _client_request(self, event: Event, method: str, msg: dict) -> Entry:
        """Agent->client requests are timeline facts, never replayed: history replay restates the conversation
        through `session/update` notifications only (ACP "Session Setup", loading sessions)."""
        params = msg.get("params")
        kind = "permission" if method == vocab.REQUEST_PERMISSION else "client_request"
        entry = self._new(kind, event, method, replayable=False)
        entry.fields.update(method=method, requestId=msg.get("id"))
        if kind == "client_request":
            entry.fields["params"] = params
            return entry
        subject = get(params, "subject")
        tool_call = get(params, "toolCall") or get(subject, "toolCall")
        tool_call_id = get(tool_call, "toolCallId") or get(subject, "toolCallId")
        for key, value in (
            ("toolCallId", tool_call_id),
            ("title", get(params, "title")),
            ("description", get(params, "description")),
            ("toolCall", tool_call),
            ("subject", subject),
            ("options", get(params, "options")),
        ):
            if value is not None:
                entry.fields[key] = value
        return entry

    def _response(self, event: Event, msg: dict) -> None:
        if self._replaying == (OPPOSITE.get(event.direction), id_key(msg.get("id"))):
            self._replaying = None
        method, request, target = self._pending.answer(event.direction, msg.get("id")) or (None, None, None)
        if isinstance(event.request, dict):
            request = event.request
            method = _str(request.get("method"))
        if target is None and method == vocab.PROMPT:
            rid = id_key(get(request, "id"))
            target = next((t for t in self._open if id_key(t.request_id) == rid), None)
        error, result = msg.get("error"), msg.get("result")
        if isinstance(target, Turn):
            self._prompt_response(event, target, result, error, "error" in msg)
        elif isinstance(target, Entry):
            self._client_response(target, result, error, "error" in msg)
        elif "error" not in msg and isinstance(result, dict) and method in SESSION_RESULTS:
            if isinstance(result.get("configOptions"), list):
                self._s.config_options = list(result["configOptions"])
            modes = result.get("modes")
            current, available = get(modes, "currentModeId"), get(modes, "availableModes")
            if isinstance(current, str):
                self._s.mode = current
            if isinstance(available, list):
                self._s.available_modes = list(available)
        elif "error" not in msg and method == vocab.SET_MODE:
            mode = get(get(request, "params"), "modeId")
            if isinstance(mode, str):
                self._s.mode = mode

    def _prompt_response(self, event: Event, turn: Turn, result: Any, error: Any, is_error: bool) -> None:
        """v1: the response ends the turn. v2: it is acceptance; an error means rejected."""
        if is_error:
            if not turn.ended:
                turn.error = error
                self._end_turn(event, turn, "error", None)
            return
        message_id = get(result, "messageId") or get(result, "userMessageId")  # legacy name
        if isinstance(message_id, str):
            turn.user_message_id = message_id
        if self.v2:
            turn.accepted_ts = event.ts  # updates may even have ended the turn before this
            if not turn.entry_ids:  # entities seen since the prompt belonged to the work already running
                turn.timeline_pos = len(self._s.entries)
            if not turn.ended and isinstance(message_id, str):
                self._ended_before_acceptance(turn, message_id)
        elif not turn.ended:
            self._end_turn(event, turn, _str(get(result, "stopReason")), get(result, "usage"))

    def _ended_before_acceptance(self, turn: Turn, message_id: str) -> None:
        """Updates may come before the acceptance (the seed asks clients to tolerate it): when the user message
        was already reported and an idle followed it, that idle ended this turn's work."""
        entry = self._s.entry(vocab.USER_MESSAGE, message_id)
        if entry is None:
            return
        start = max(entry.first_seq, turn.start_seq)
        idle = next((i for i in self._idles if i[0] > start), None)
        if idle is not None:
            seq, ts, stop_reason, usage = idle
            self._end_turn(Event(seq, ts, "a2c", {}), turn, stop_reason, usage)

    def _current_turn(self) -> Turn | None:
        """The turn whose work is running: on v2 the newest accepted open turn (a prompt still waiting for
        its insertion has no output yet), else the newest open one."""
        if self.v2:
            accepted = [t for t in self._open if t.accepted_ts is not None]
            if accepted:
                return accepted[-1]
        return self._open[-1] if self._open else None

    def _end_turn(self, event: Event, turn: Turn, stop_reason: str | None, usage: Any) -> None:
        turn.end_seq, turn.end_ts, turn.stop_reason = event.seq, event.ts, stop_reason
        if usage is not None:
            turn.usage = usage
        if turn in self._open:
            self._open.remove(turn)
        self._last = None
        if not self.v2:  # v2 session state comes from state_update only
            self._s.stop_reason = stop_reason
            if not self._open:
                self._s.run_state = "idle"

    def _client_response(self, entry: Entry, result: Any, error: Any, is_error: bool) -> None:
        if is_error:
            entry.fields["error"] = error
            return
        if entry.kind == "client_request":
            entry.fields["result"] = result
            return
        outcome = get(result, "outcome")
        entry.fields["outcome"] = get(outcome, "outcome") if isinstance(outcome, dict) else outcome
        option_id = get(outcome, "optionId")
        if option_id is not None:
            entry.fields["optionId"] = option_id
            options = entry.fields.get("options")
            for option in options if isinstance(options, list) else ():
                if get(option, "optionId") == option_id:
                    entry.fields["optionName"] = get(option, "name")
                    entry.fields["optionKind"] = get(option, "kind")
                    break

    # ---- session/update ----------------------------------------------------------------------

    def _update(self, event: Event, update: Any) -> None:
        if self._replaying is not None:
            self._s.replayed_updates += 1
            return
        variant = get(update, "sessionUpdate")
        if not isinstance(variant, str):
            self._generic(event, update, "invalid", "update without a sessionUpdate string")
        elif (self.v2 and variant in V1_ONLY) or (handler := UPDATE_HANDLERS.get(variant)) is None:
            self._generic(event, update, "unknown")  # replayed as it came
        else:
            handler(self, event, update)

    def _chunk(self, event: Event, update: dict, variant: str) -> None:
        kind, id_field, list_field = CHUNKS[variant]
        block, ident = update.get("content"), update.get(id_field)
        if not isinstance(block, dict):
            return self._generic(event, update, "invalid", f"{variant}: content must be an object")
        if ident is None and kind in MESSAGE_KINDS:
            entry = self._anonymous(kind, event, variant)
        elif isinstance(ident, str):
            entry = self._touch(kind, ident, event, variant)
        else:
            return self._generic(event, update, "invalid", f"{variant}: {id_field} must be a string")
        items = entry.fields.get(list_field)
        if not isinstance(items, list):
            items = entry.fields[list_field] = []
        items.append(block)  # chunk _meta is chunk-scoped: it patches nothing
        for key in STICKY.get(kind, ()):
            if update.get(key) is not None:
                entry.fields[key] = update[key]
        if kind == vocab.AGENT_MESSAGE:
            self._first_agent_message(event)

    def _anonymous(self, kind: str, event: Event, variant: str) -> Entry:
        """v1 chunks without messageId: consecutive chunks of one kind form one message."""
        if self._last is not None and self._last.kind == kind:
            return self._touch(kind, self._last.id, event, variant)
        self._anon += 1
        while (kind, f"msg-{self._anon}") in self._s.by_key:
            self._anon += 1
        entry = self._touch(kind, f"msg-{self._anon}", event, variant)
        entry.synthetic_id = True
        return entry

    def _upsert(self, event: Event, update: dict, variant: str) -> None:
        kind, id_fields = UPSERTS[variant]
        id_field = next((f for f in id_fields if f in update), id_fields[0])
        ident = update.get(id_field)
        if not isinstance(ident, str):
            return self._generic(event, update, "invalid", f"{variant}: {id_field} must be a string")
        entry = self._touch(kind, ident, event, variant)
        three_state = self.v2 or variant != vocab.TOOL_CALL_UPDATE  # v1 tool_call_update: null == omitted
        self._patch(entry, update, {"sessionUpdate", id_field}, three_state)
        if kind == vocab.AGENT_MESSAGE and "content" in update:
            self._first_agent_message(event)

    def _patch(self, entry: Entry, update: dict, skip: set[str], three_state: bool) -> None:
        """Omitted: unchanged. null: clear (if three-state). Value: replace. [] clears arrays."""
        sticky = STICKY.get(entry.kind, frozenset())
        for key, value in update.items():
            if key in skip:
                continue
            if entry.kind == "terminal" and key == "output":
                self._terminal_snapshot(entry, value, three_state)
            elif value is None:
                if three_state and key not in sticky:
                    if key in LIST_FIELDS:
                        entry.fields[key] = []
                    else:
                        entry.fields.pop(key, None)
            elif key in LIST_FIELDS and not isinstance(value, list):
                entry.problems.append(f"seq {entry.last_seq}: {key} is not an array; ignored")
            else:
                entry.fields[key] = list(value) if key in LIST_FIELDS else value

    def _tool_call(self, event: Event, update: dict) -> None:
        """v1 `tool_call` creates, or replaces a known id whole (as Zed does)."""
        ident = update.get("toolCallId")
        if not isinstance(ident, str):
            return self._generic(event, update, "invalid", "tool_call: toolCallId must be a string")
        entry = self._touch("tool_call", ident, event, "tool_call")
        entry.fields = {"kind": "other", "status": "pending"}
        self._patch(entry, update, {"sessionUpdate", "toolCallId"}, three_state=False)

    def _terminal_snapshot(self, entry: Entry, value: Any, three_state: bool) -> None:
        """`output` is an authoritative snapshot: never merged with earlier bytes."""
        if value is None:
            if three_state:
                entry.output = None
            return
        data = _b64(get(value, "data"))
        if data is None:
            entry.problems.append(f"seq {entry.last_seq}: output.data is not valid base64; ignored")
        else:
            entry.output = bytearray(data)

    def _terminal_chunk(self, event: Event, update: dict) -> None:
        """Decode each chunk on its own, append bytes (never concatenate base64 text)."""
        ident, data = update.get("terminalId"), _b64(update.get("data"))
        if not isinstance(ident, str) or data is None:
            return self._generic(event, update, "invalid", "terminal_output_chunk: bad terminalId or data")
        entry = self._touch("terminal", ident, event, vocab.TERMINAL_OUTPUT_CHUNK)
        if entry.output is None:
            entry.output = bytearray()
        entry.output += data

    def _plan(self, event: Event, update: dict) -> None:
        """Plans are replaced whole; v1 `plan` is the single plan, planId "main"."""
        variant = update["sessionUpdate"]
        plan: Any
        if variant == vocab.PLAN:
            entries = update.get("entries")
            plan = {"type": "items", "planId": "main", "entries": entries} if isinstance(entries, list) else None
        else:
            plan = update.get("plan")
        if not isinstance(plan, dict) or not isinstance(plan.get("planId"), str):
            return self._generic(event, update, "invalid", f"{variant}: plan without a planId")
        self._new_turn_new_entry("plan", plan["planId"])
        entry = self._touch("plan", plan["planId"], event, variant)
        entry.fields, entry.removed = dict(plan), False
        self._s.plans[plan["planId"]] = entry.fields

    def _plan_removed(self, event: Event, update: dict) -> None:
        ident = update.get("planId")
        if not isinstance(ident, str):
            return self._generic(event, update, "invalid", f"{vocab.PLAN_REMOVED}: planId must be a string")
        self._new_turn_new_entry("plan", ident)
        entry = self._touch("plan", ident, event, vocab.PLAN_REMOVED)
        entry.removed = True
        self._s.plans.pop(ident, None)

    def _live(self, kind: str, event: Event, update: dict) -> None:
        """Live-only updates (notices, quota snapshots): kept for show, dropped by replay."""
        entry = self._new(kind, event, update["sessionUpdate"], live_only=True, replayable=False)
        entry.fields = {k: v for k, v in update.items() if k != "sessionUpdate"}
        entry.raw_update, entry.raw = update, event.raw

    def _state_update(self, event: Event, update: dict) -> None:
        """v2 turns end at idle; v1 turns end at the prompt response, whatever state says."""
        state = update.get("state")
        if not isinstance(state, str):
            return self._generic(event, update, "invalid", f"{vocab.STATE_UPDATE}: state must be a string")
        self._s.run_state = state
        if state in (vocab.RUNNING, vocab.REQUIRES_ACTION):
            self._s.stop_reason = None
        if state != vocab.IDLE:
            return
        stop_reason = _str(update.get("stopReason"))
        self._s.stop_reason = stop_reason
        if self.v2:
            self._idles.append((event.seq, event.ts, stop_reason, update.get("usage")))
            # The idle ends the foreground work of the prompts inserted into it (accepted). A prompt sent while
            # the agent was running and not yet accepted contributes to the work that follows its insertion
            # (seed: acceptance means insertion), so it stays open. Without any acceptance, the idle ends all.
            accepted = [t for t in self._open if t.accepted_ts is not None]
            for turn in accepted or list(self._open):
                self._end_turn(event, turn, stop_reason, update.get("usage"))

    def _set_list(self, event: Event, update: dict, key: str, attr: str) -> None:
        """Full-replacement session lists (commands, config options)."""
        value = update.get(key)
        if not isinstance(value, list):
            return self._generic(event, update, "invalid", f"{update['sessionUpdate']}: {key} must be an array")
        setattr(self._s, attr, list(value))

    def _mode(self, event: Event, update: dict) -> None:
        mode = update.get("currentModeId", update.get("modeId"))  # docs show modeId, schema currentModeId
        if not isinstance(mode, str):
            return self._generic(
                event, update, "invalid", f"{vocab.CURRENT_MODE_UPDATE}: currentModeId must be a string"
            )
        self._s.mode = mode

    def _info(self, event: Event, update: dict) -> None:
        for key, value in update.items():
            if key == "sessionUpdate":
                continue
            if value is None:
                self._s.info.pop(key, None)
            else:
                self._s.info[key] = value

    def _usage(self, event: Event, update: dict) -> None:
        self._s.usage = {k: v for k, v in update.items() if k != "sessionUpdate"}

    # ---- entities ----------------------------------------------------------------------------

    def _generic(self, event: Event, update: Any, kind: str, problem: str | None = None) -> None:
        """Unknown variants are replayed as-is; malformed known ones are kept but not replayed."""
        variant = get(update, "sessionUpdate")
        entry = self._new(kind, event, variant if isinstance(variant, str) else None, replayable=kind == "unknown")
        entry.raw_update, entry.raw = update, event.raw
        if problem:
            entry.problems.append(f"seq {event.seq}: {problem}")

    def _new(self, kind: str, event: Event, variant: str | None, **flags: Any) -> Entry:
        """An entity without a protocol id (notices, requests, unknown updates)."""
        return self._touch(kind, f"#{len(self._s.entries) + 1}", event, variant, **flags)

    def _new_turn_new_entry(self, kind: str, ident: str) -> None:
        """A plan is replaced whole, and each turn's plan is that turn's: an update in a later turn starts a
        new entry there (the transcript showed the plan in turn 1 only, with the last turn's state)."""
        entry = self._s.by_key.get((kind, ident))
        turn = self._current_turn()
        if entry is not None and turn is not None and entry.turn != turn.index:
            del self._s.by_key[(kind, ident)]

    def _touch(self, kind: str, ident: str, event: Event, variant: str | None, **flags: Any) -> Entry:
        """Get or create; creation fixes the timeline position and the owning turn."""
        entry = self._s.by_key.get((kind, ident))
        if entry is None:
            turn = self._current_turn()
            entry = Entry(
                kind=kind,
                id=ident,
                first_seq=event.seq,
                first_ts=event.ts,
                last_seq=event.seq,
                turn=turn.index if turn else None,
                **flags,
            )
            self._s.entries.append(entry)
            self._s.by_key[(kind, ident)] = entry
            if turn is not None:
                turn.entry_ids.append(entry.uid)
        entry.last_seq, entry.variant = event.seq, variant
        self._last = entry
        return entry

    def _first_agent_message(self, event: Event) -> None:
        turn = self._current_turn()
        if turn is not None and turn.first_agent_message_ts is None:
            turn.first_agent_message_ts = event.ts


def _chunk(m: Materializer, event: Event, update: dict) -> None:
    m._chunk(event, update, update["sessionUpdate"])


def _upsert(m: Materializer, event: Event, update: dict) -> None:
    m._upsert(event, update, update["sessionUpdate"])


def _live(kind: str) -> Callable[[Materializer, Event, dict], None]:
    return lambda m, event, update: m._live(kind, event, update)


def _list_setter(key: str, attr: str) -> Callable[[Materializer, Event, dict], None]:
    return lambda m, event, update: m._set_list(event, update, key, attr)


# variant -> how it changes the session state (a variant without a row is kept as an unknown update and
# replayed as it came).
UPDATE_HANDLERS: dict[str, Callable[[Materializer, Event, dict], None] | None] = vocab.variant_table(
    "protocol.materialize: session state",
    {
        **dict.fromkeys(CHUNKS, _chunk),
        **dict.fromkeys(UPSERTS, _upsert),
        vocab.TOOL_CALL: Materializer._tool_call,
        vocab.PLAN: Materializer._plan,
        vocab.PLAN_UPDATE: Materializer._plan,
        vocab.PLAN_REMOVED: Materializer._plan_removed,
        vocab.TERMINAL_OUTPUT_CHUNK: Materializer._terminal_chunk,
        vocab.NOTICE: _live("notice"),
        vocab.QUOTA_UPDATE: _live("quota"),  # an entry of its own: state.usage is the context window only
        vocab.STATE_UPDATE: Materializer._state_update,
        vocab.AVAILABLE_COMMANDS_UPDATE: _list_setter("availableCommands", "commands"),
        vocab.CONFIG_OPTION_UPDATE: _list_setter("configOptions", "config_options"),
        vocab.CURRENT_MODE_UPDATE: Materializer._mode,
        vocab.SESSION_INFO_UPDATE: Materializer._info,
        vocab.USAGE_UPDATE: Materializer._usage,
    },
)


def materialize(events: Iterable[Event], protocol_version: int = 1) -> SessionState:
    """Fold a whole recording at once."""
    m = Materializer(protocol_version)
    for event in events:
        m.feed(event)
    return m.state
