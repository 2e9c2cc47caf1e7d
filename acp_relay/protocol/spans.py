"""A recorded session as OpenTelemetry spans (sans-I/O): events in, plain span records out.

The mapping follows the OpenTelemetry GenAI semantic conventions of semconv v1.41.0 (the last release of
the main semconv repository that defines `gen_ai.*`; every such name there has Development status):
- one trace per session; its root span `session {id}` carries `gen_ai.conversation.id` (every span does);
- one `invoke_agent {agent}` span (kind CLIENT) per prompt turn, from the `session/prompt` request to the
  turn's end (v1: the prompt response; v2: the `idle` state_update), with the stop reason as
  `gen_ai.response.finish_reasons` and the turn's token `Usage` as `gen_ai.usage.*`;
- one `execute_tool {name}` span (INTERNAL) per tool call, under its turn, from its first report to the
  update that made it `completed` or `failed`;
- one span (SERVER: the editor serves it) per agent->client request (`fs/*`, `terminal/*`,
  `session/request_permission`...), from the request to its answer; a permission request sits under the
  tool call it asks about, other requests under the tool call still running in the turn (ACP does not say
  which tool a file read belongs to: the newest unfinished one is the best guess), else the turn;
- one span per editor->agent request answered with an error (session/prompt errors mark the turn instead).
ACP's `usage_update` is a context-window snapshot (tokens in use, window size, cost), not the token count
of an operation, so it becomes `acp.usage.*` attributes and events; `gen_ai.usage.*` come from the turn's
Usage object (v1 PromptResponse.usage, v2 idle usage) when the agent sends one.

Message text (prompts, agent messages, tool arguments and results, titles, paths, commands) stays out unless
`content=True`, as the conventions ask of prompts and completions; whatever goes in has been through the
redaction policy first. Ids are derived from the recording (the session id and its first frame's time), so
exporting a session twice sends the same spans again, which backends deduplicate; a span whose starting
frame carries a W3C `_meta.traceparent` joins that trace under that parent instead.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from . import vocab
from .jsonrpc import A2C, C2A, Correlator, dumps_text, get, id_key
from .materialize import Materializer
from .redact import Policy
from .session_state import Entry, Event, SessionState, Turn
from .usage import context_usage, token_usage

SEMCONV_VERSION = "1.41.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
SCOPE = "acp-relay"
# Tool call statuses that end the call (ACP ToolCallStatus; the rest are pending and in_progress).
_TOOL_DONE = frozenset({"completed", "failed"})
_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
_MAX_INT = 2**63


def to_ns(ts: float) -> int:
    """A frame's wall-clock time (unix seconds, as recorded) in nanoseconds, to the microsecond the clock
    gave: a double near 1.7e9 holds about 0.2 us, so finer digits would be noise. A time that is not a
    number (an imported file may say anything) is 0; OTLP's times are unsigned, so before 1970 is 0 too."""
    try:
        return max(0, round(ts * 1_000_000) * 1000)
    except (ValueError, OverflowError, TypeError):
        return 0


@dataclass
class SpanEvent:
    name: str
    time_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass
class SpanRecord:
    """One span, as plain data: the exporter turns it into the SDK's ReadableSpan or OTLP JSON."""

    name: str
    role: str  # session | turn | tool | request | error
    trace_id: int
    span_id: int
    parent_id: int | None
    kind: str  # internal | client | server
    start_ns: int
    end_ns: int = 0
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[SpanEvent] = field(default_factory=list)
    status: str = "unset"  # unset | error
    status_message: str = ""
    links: list[tuple[int, int]] = field(default_factory=list)  # (trace id, span id)
    remote_parent: bool = False  # the parent came from a frame's traceparent
    frame_id: int | None = None  # the frame that started it
    ended: bool = False

    def event(self, name: str, ts: float, **attributes: Any) -> None:
        self.events.append(SpanEvent(name, to_ns(ts), _attrs(attributes)))

    def fail(self, error_type: str, message: str = "") -> None:
        self.status, self.status_message = "error", message
        self.attributes["error.type"] = error_type


def traceparent(msg: Any) -> tuple[int, int] | None:
    """(trace id, parent span id) of a W3C traceparent in the message's `_meta` (params, the update, or
    the result), None when there is none or it is malformed (all-zero ids and version ff are invalid)."""
    params = get(msg, "params")
    for meta in (get(params, "_meta"), get(get(params, "update"), "_meta"), get(get(msg, "result"), "_meta")):
        value = get(meta, "traceparent")
        m = _TRACEPARENT.match(value.strip().lower()) if isinstance(value, str) else None
        if m and m.group(1) != "ff" and int(m.group(2), 16) and int(m.group(3), 16):
            return int(m.group(2), 16), int(m.group(3), 16)
    return None


def _attr(value: Any) -> Any:
    """An attribute value OTLP can carry: str, bool, 64-bit int, float, or a list of one of them; anything
    else as its JSON text."""
    if isinstance(value, bool | str | float):
        return value
    if isinstance(value, int):
        return value if -_MAX_INT <= value < _MAX_INT else str(value)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return list(value)
    return dumps_text(value)


def _attrs(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _attr(v) for k, v in values.items() if v is not None}


def _parts(blocks: Any) -> list[dict[str, Any]]:
    """ACP content blocks as the conventions' message parts (text, or the block's type alone)."""
    out: list[dict[str, Any]] = []
    for block in blocks if isinstance(blocks, list) else []:
        kind = get(block, "type")
        if kind == "text" and isinstance(get(block, "text"), str):
            out.append({"type": "text", "content": block["text"]})
        elif isinstance(kind, str):
            uri = get(block, "uri") or get(get(block, "resource"), "uri")
            out.append({"type": kind, **({"uri": uri} if isinstance(uri, str) else {})})
    return out


def _info(value: Any) -> tuple[str | None, str | None]:
    name, version = get(value, "name"), get(value, "version")
    return (name if isinstance(name, str) else None), (version if isinstance(version, str) else None)


class SpanBuilder:
    """Feed a session's events in recorded order: `feed` returns the spans each one finished, `finish` the
    rest and the session's root span last. The same builder serves a whole export and a live relay."""

    def __init__(
        self,
        session_id: str,
        protocol_version: int = 1,
        *,
        content: bool = False,
        policy: Policy | None = None,
        findings: dict[int, list[tuple[str, str, str]]] | None = None,
        key: str | None = None,
        session_attributes: dict[str, Any] | None = None,
    ) -> None:
        self.session_id = session_id
        self.content = content
        self.policy = policy if policy is not None else Policy()
        self.findings = findings or {}  # frame id -> (rule, severity, message)
        self.key = key  # what the ids derive from; None: the session id and its first frame's time
        self._m = Materializer(protocol_version)
        self._turn_list = self._m.state.turns  # the materializer appends to this list, never replaces it
        self.agent: tuple[str | None, str | None] = (None, None)
        self.client: tuple[str | None, str | None] = (None, None)
        self.root: SpanRecord | None = None
        self._session_attributes = session_attributes or {}
        self._turns: dict[int, SpanRecord] = {}  # open turn spans by Turn.index
        self._turn_of: dict[int, Turn] = {}
        self._tools: dict[str, SpanRecord] = {}  # tool call spans by toolCallId (open or not)
        self._open_tools: dict[str, SpanRecord] = {}  # those still open, oldest first (a handful at a time)
        self._requests: Correlator[SpanRecord] = Correlator()  # agent->client requests waiting
        self._c2a: Correlator[tuple[str, float, int, Any, int | None]] = Correlator()
        self._last_started: SpanRecord | None = None
        self._out: list[SpanRecord] = []
        self._last_ts = 0.0
        self._usage: dict[str, Any] = {}
        self.spans = 0

    # ---- ids ---------------------------------------------------------------------------------------
    def _id(self, nbytes: int, *parts: Any) -> int:
        digest = hashlib.blake2b("\x1f".join(map(str, (self.key, *parts))).encode(), digest_size=nbytes).digest()
        return int.from_bytes(digest, "big") or 1

    @property
    def trace_id(self) -> int:
        return self._id(16, "trace")

    def _span(self, name: str, role: str, event: Event, parent: SpanRecord | None, kind: str, ident: Any) -> SpanRecord:
        """A new span started by `event`, under `parent` unless the frame carries a traceparent."""
        joined = traceparent(event.message)
        base = parent or self.root
        trace_id = base.trace_id if base is not None else self.trace_id
        parent_id = base.span_id if base is not None else None
        span = SpanRecord(name, role, trace_id, self._id(8, role, event.seq, ident), parent_id, kind, to_ns(event.ts))
        span.frame_id = event.frame_id
        if joined is not None:
            if parent_id is not None:
                span.links.append((trace_id, parent_id))
            span.trace_id, span.parent_id, span.remote_parent = joined[0], joined[1], True
        span.attributes["gen_ai.conversation.id"] = self.session_id
        self.spans += 1
        self._last_started = span
        return span

    def _close(self, span: SpanRecord, ts: float) -> None:
        span.end_ns = max(to_ns(ts), span.start_ns)
        span.ended = True
        span.events.sort(key=lambda e: e.time_ns)  # stable: same-time events keep their order
        if span.role == "tool":
            self._open_tools.pop(span.attributes["gen_ai.tool.call.id"], None)
        self._out.append(span)

    # ---- feeding -----------------------------------------------------------------------------------
    def feed(self, event: Event, answers: str | None = None) -> list[SpanRecord]:
        """Apply one event (its message redacted first); the spans it ended, children before parents.
        `answers`: for a response, the method of the request it answers (else taken from event.request),
        which the redaction rules need (an authenticate result is all secrets)."""
        msg = event.message
        if isinstance(msg, dict) and self.policy.enabled:
            method = msg.get("method")
            if answers is None and "method" not in msg:
                answers = get(event.request, "method")
            answered = answers if isinstance(answers, str) else None
            watched = method if isinstance(method, str) else answered or ""
            if self.policy.might_apply_one(event.raw or b"", watched, msg):
                new, changed = self.policy.apply(msg, answered)
                if changed:
                    event = Event(event.seq, event.ts, event.direction, new, event.request, event.frame_id, None)
        if self.key is None:
            self.key = f"{self.session_id}\x1f{event.ts!r}"
        if event.ts > self._last_ts:
            self._last_ts = event.ts
        turns = self._turn_list
        turns_before = len(turns)
        self._m.feed(event)
        if isinstance(event.message, dict):
            self._observe(event, event.message, turns_before)
        if self.findings and event.frame_id in self.findings:
            self._findings(event)
        if not self._out:
            return []
        out, self._out = self._out, []
        return out

    def _observe(self, event: Event, msg: dict, turns_before: int) -> None:
        method = msg.get("method")
        if method == vocab.UPDATE and self.root is not None:
            # the flood (message chunks, plans, commands...) only feeds the state: leave at once
            params = msg.get("params")
            update = params.get("update") if isinstance(params, dict) else None
            variant = update.get("sessionUpdate") if isinstance(update, dict) else None
            if not isinstance(variant, str) or SPAN_UPDATES.get(variant) is None:
                return
        state = self._m.state
        if method == vocab.INITIALIZE or (method is None and self._answers_initialize(event, msg)):
            self._initialize(event, msg)
            return
        if self.root is None:
            self._start_root(event)
        for turn in state.turns[turns_before:]:
            self._start_turn(event, turn)
        if method == vocab.UPDATE:
            update = get(get(msg, "params"), "update")
            self._update(event, update)
            if get(update, "sessionUpdate") != vocab.STATE_UPDATE:
                return  # of the updates only a v2 idle ends turns
        elif method == vocab.CANCEL:
            for span in self._turns.values():
                span.event("acp.cancel_requested", event.ts)
        elif isinstance(method, str) and "id" in msg:
            if event.direction == A2C:
                self._client_request(event, method, msg)
            elif method != vocab.PROMPT:
                self._c2a.request(C2A, msg.get("id"), (method, event.ts, event.seq, msg.get("id"), event.frame_id))
            return
        elif method is None and ("result" in msg or "error" in msg):
            self._response(event, msg)
        self._end_turns(event)

    def _answers_initialize(self, event: Event, msg: dict) -> bool:
        pending = self._c2a.pending.get((C2A, id_key(msg.get("id")))) if event.direction == A2C else None
        return pending is not None and pending[0] == vocab.INITIALIZE

    def _initialize(self, event: Event, msg: dict) -> None:
        """The connection's handshake: who the client and the agent are (v1 clientInfo/agentInfo, v2 info)."""
        if "method" in msg:
            params = get(msg, "params")
            self.client = _info(get(params, "clientInfo") or get(params, "info"))
            self._c2a.request(
                C2A, msg.get("id"), (vocab.INITIALIZE, event.ts, event.seq, msg.get("id"), event.frame_id)
            )
            return
        self._c2a.answer(A2C, msg.get("id"))
        result = get(msg, "result")
        self.agent = _info(get(result, "agentInfo") or get(result, "info"))

    def _start_root(self, event: Event) -> None:
        root = self._span(f"session {self.session_id}", "session", event, None, "internal", "root")
        # not from the starting frame: a live relay may see the session's first frame before the request
        # that created it is known to be the session's (the recorder fills that in with the answer)
        root.span_id = self._id(8, "session")
        root.attributes.update(
            _attrs(
                {
                    "acp.session.id": self.session_id,
                    "acp.protocol.version": self._m.state.protocol_version,
                    **self._session_attributes,
                }
            )
        )
        self.root = root

    # ---- turns -------------------------------------------------------------------------------------
    def _start_turn(self, event: Event, turn: Turn) -> None:
        agent = self.agent[0]
        span = self._span(f"invoke_agent {agent}" if agent else "invoke_agent", "turn", event, None, "client", 0)
        span.attributes.update(
            _attrs(
                {
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.provider.name": agent or "acp",
                    "gen_ai.agent.name": agent,
                    "gen_ai.agent.version": self.agent[1],
                    "acp.turn.index": turn.index,
                    "acp.request.id": turn.request_id if not isinstance(turn.request_id, dict | list) else None,
                }
            )
        )
        if self.content:
            span.attributes["gen_ai.input.messages"] = dumps_text([{"role": "user", "parts": _parts(turn.prompt)}])
        self._turns[turn.index] = span
        self._turn_of[turn.index] = turn

    def _end_turns(self, event: Event) -> None:
        for index in [i for i, t in self._turn_of.items() if t.ended]:
            self._end_turn(self._turn_of.pop(index), self._turns.pop(index))

    def _end_turn(self, turn: Turn, span: SpanRecord) -> None:
        end = turn.end_ts if turn.end_ts is not None else self._last_ts
        if turn.accepted_ts is not None and self._m.state.protocol_version >= 2:
            span.event("acp.prompt_accepted", turn.accepted_ts)
        if turn.first_agent_message_ts is not None:
            span.event("acp.first_agent_message", turn.first_agent_message_ts)
        if turn.stop_reason is not None:
            span.attributes["gen_ai.response.finish_reasons"] = [turn.stop_reason]
            span.attributes["acp.stop_reason"] = turn.stop_reason
        span.attributes.update(_attrs(token_usage(turn.usage)))
        if turn.error is not None:
            code = get(turn.error, "code")
            span.fail(str(code) if isinstance(code, int) else "_OTHER", _message(turn.error))
        if not turn.ended:
            span.attributes["acp.turn.ended"] = False
        if self.content:
            span.attributes["gen_ai.output.messages"] = dumps_text(self._output(turn))
        for tool in list(self._open_tools.values()):
            if tool.parent_id == span.span_id:
                tool.attributes["acp.tool_call.finished"] = False
                self._close(tool, end)
        self._close(span, end)

    def _output(self, turn: Turn) -> list[dict[str, Any]]:
        """The agent's messages and thoughts first seen in the turn, as one assistant message's parts (the
        text of consecutive chunks joined)."""
        parts: list[dict[str, Any]] = []
        state: SessionState = self._m.state
        for uid in turn.entry_ids:
            kind, _, ident = uid.partition(":")
            entry = state.entry(kind, ident)
            if entry is None or kind not in (vocab.AGENT_MESSAGE, vocab.AGENT_THOUGHT):
                continue
            for part in _parts(entry.content):
                if kind == vocab.AGENT_THOUGHT and part["type"] == "text":
                    part = {"type": "reasoning", "content": part["content"]}
                if parts and part["type"] in ("text", "reasoning") and parts[-1]["type"] == part["type"]:
                    parts[-1] = {**parts[-1], "content": parts[-1]["content"] + part["content"]}
                else:
                    parts.append(part)
        return [{"role": "assistant", "parts": parts, "finish_reason": turn.stop_reason or ""}]

    def _current_turn(self) -> SpanRecord | None:
        return self._turns[max(self._turns)] if self._turns else None

    # ---- updates -----------------------------------------------------------------------------------
    def _update(self, event: Event, update: Any) -> None:
        """An update's mark on the spans, by its variant's row of `SPAN_UPDATES` (None: state only)."""
        variant = get(update, "sessionUpdate")
        mark = SPAN_UPDATES.get(variant) if isinstance(variant, str) else None
        if mark is not None:
            mark(self, event, update)

    def _tool_update(self, event: Event, update: Any) -> None:
        ident = get(update, "toolCallId")
        entry = self._m.state.entry("tool_call", ident) if isinstance(ident, str) else None
        if entry is not None:
            self._tool(event, entry)

    def _noted(self, event: Event, name: str, **attributes: Any) -> None:
        """An event on the current turn's span, or the session's before any turn."""
        target = self._current_turn() or self.root
        if target is not None:
            target.event(name, event.ts, **attributes)

    def _usage_update(self, event: Event, update: Any) -> None:
        usage = _attrs(context_usage(update))
        target = self._current_turn() or self.root
        if target is not None:
            self._usage = usage
            target.attributes.update(usage)
            target.event("acp.usage_update", event.ts, **usage)

    def _notice(self, event: Event, update: Any) -> None:
        self._noted(event, "acp.notice", **{"acp.notice.severity": get(update, "severity")})

    def _compaction(self, event: Event, update: Any) -> None:
        self._noted(event, "acp.compaction", **{"acp.compaction.status": get(update, "status")})

    def _subagent(self, event: Event, update: Any) -> None:
        child = get(update, "sessionId") or get(update, "childSessionId")
        self._noted(event, "acp.subagent", **{"acp.subagent.session_id": child})

    def _state_update(self, event: Event, update: Any) -> None:
        """Nothing to mark: a v2 idle ends turns, which _observe does after every watched update."""

    def _tool(self, event: Event, entry: Entry) -> None:
        span = self._tools.get(entry.id)
        fields = entry.fields
        if span is None:
            turn = self._turns.get(entry.turn) if entry.turn is not None else None
            name = fields.get("name") if isinstance(fields.get("name"), str) else fields.get("kind")
            name = name if isinstance(name, str) and name else "tool"
            span = self._span(f"execute_tool {name}", "tool", event, turn, "internal", entry.id)
            span.attributes.update(
                {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": entry.id}
            )
            self._tools[entry.id] = self._open_tools[entry.id] = span
        if span.ended:
            return
        status, kind = fields.get("status"), fields.get("kind")
        if isinstance(kind, str):
            span.attributes["acp.tool_call.kind"] = kind
        if isinstance(status, str) and status != span.attributes.get("acp.tool_call.status"):
            span.attributes["acp.tool_call.status"] = status
            span.event("acp.tool_call.status", event.ts, **{"acp.tool_call.status": status})
        if self.content:
            self._tool_content(span, fields)
        if isinstance(status, str) and status in _TOOL_DONE:
            if status == "failed":
                span.fail("tool_call_failed")
            self._close(span, event.ts)

    def _tool_content(self, span: SpanRecord, fields: dict[str, Any]) -> None:
        for key, attr in (("title", "acp.tool_call.title"), ("rawInput", "gen_ai.tool.call.arguments")):
            if fields.get(key) is not None:
                span.attributes[attr] = _attr(fields[key])
        result = fields.get("rawOutput")
        if result is None and fields.get("content"):
            result = fields["content"]
        if result is not None:
            span.attributes["gen_ai.tool.call.result"] = _attr(result)

    # ---- requests ----------------------------------------------------------------------------------
    def _client_request(self, event: Event, method: str, msg: dict) -> None:
        params = get(msg, "params")
        parent = self._current_turn()
        tool_id = get(get(params, "toolCall"), "toolCallId") or get(params, "toolCallId")
        if method == vocab.REQUEST_PERMISSION and isinstance(tool_id, str) and tool_id in self._tools:
            parent = self._tools[tool_id] if not self._tools[tool_id].ended else parent
        elif parent is not None:
            running = [t for t in self._open_tools.values() if t.parent_id == parent.span_id]
            parent = running[-1] if running else parent
        span = self._span(method, "request", event, parent, "server", dumps_text(msg.get("id")))
        span.attributes.update(_attrs(_rpc(method, msg.get("id"))))
        if isinstance(tool_id, str):
            span.attributes["gen_ai.tool.call.id"] = tool_id
        if self.content:
            for key in ("path", "command", "title"):
                if get(params, key) is not None:
                    span.attributes[f"acp.{key}"] = _attr(params[key])
        self._requests.request(A2C, msg.get("id"), span)

    def _response(self, event: Event, msg: dict) -> None:
        error = msg.get("error") if "error" in msg else None
        span = self._requests.answer(event.direction, msg.get("id")) if event.direction == C2A else None
        if span is not None:
            outcome = get(get(msg, "result"), "outcome")
            if isinstance(outcome, dict):
                span.attributes.update(
                    _attrs(
                        {
                            "acp.permission.outcome": get(outcome, "outcome"),
                            "acp.permission.option_id": get(outcome, "optionId"),
                        }
                    )
                )
            if "error" in msg:
                self._error(span, error)
            self._close(span, event.ts)
            return
        pending = self._c2a.answer(event.direction, msg.get("id"))
        if pending is not None and "error" in msg:
            method, ts, seq, rpc_id, frame_id = pending
            start = Event(seq, ts, C2A, {}, frame_id=frame_id)
            span = self._span(method, "error", start, self._current_turn(), "client", dumps_text(rpc_id))
            span.attributes.update(_attrs(_rpc(method, rpc_id)))
            self._error(span, error)
            self._close(span, event.ts)

    def _error(self, span: SpanRecord, error: Any) -> None:
        code = get(error, "code")
        span.attributes.update(_attrs({"rpc.jsonrpc.error_code": code, "rpc.jsonrpc.error_message": _message(error)}))
        span.fail(str(code) if isinstance(code, int) and not isinstance(code, bool) else "_OTHER", _message(error))

    def _findings(self, event: Event) -> None:
        """check's findings at this frame, as events of the span the frame started, else the innermost open."""
        target = next((s for s in self._out if s.frame_id == event.frame_id), None)
        if target is None and self._last_started is not None and self._last_started.frame_id == event.frame_id:
            target = self._last_started
        if target is None:
            open_tools = list(self._open_tools.values())
            target = open_tools[-1] if open_tools else self._current_turn() or self.root
        if target is None:
            return
        for rule, severity, message in self.findings.get(event.frame_id or 0, ()):
            target.event(
                "acp.check.finding",
                event.ts,
                **{"acp.check.rule": rule, "acp.check.severity": severity, "acp.check.message": message},
            )

    # ---- the end -----------------------------------------------------------------------------------
    def finish(self, end_ts: float | None = None) -> list[SpanRecord]:
        """Close what is still open (turns not ended, requests never answered) and the root, last."""
        end = end_ts if end_ts is not None else self._last_ts
        for index in list(self._turn_of):
            self._end_turn(self._turn_of.pop(index), self._turns.pop(index))
        for span in list(self._requests.pending.values()):
            span.fail("unanswered", "never answered")
            self._close(span, end)
        self._requests.pending.clear()
        for span in list(self._open_tools.values()):
            span.attributes["acp.tool_call.finished"] = False
            self._close(span, end)
        if self.root is not None:
            self.root.attributes.update(self._usage)
            self.root.attributes["acp.session.turns"] = len(self._m.state.turns)
            if self.content and isinstance(self._m.state.info.get("title"), str):
                self.root.attributes["acp.session.title"] = self._m.state.info["title"]
            self._close(self.root, end)
        out, self._out = self._out, []
        return out

    def resource(self) -> dict[str, Any]:
        """Resource attributes: who spoke (the agent as the service, and the client)."""
        return _attrs(
            {
                "service.name": self.agent[0] or "acp-agent",
                "service.version": self.agent[1],
                "acp.agent.name": self.agent[0],
                "acp.agent.version": self.agent[1],
                "acp.client.name": self.client[0],
                "acp.client.version": self.client[1],
            }
        )


_Mark = Callable[[SpanBuilder, Event, Any], None]
# variant -> its mark on the spans; None: it only feeds the materialized state (the flood leaves at once).
SPAN_UPDATES: dict[str, _Mark | None] = vocab.variant_table(
    "protocol.spans: span events",
    {
        **dict.fromkeys(vocab.TOOL_VARIANTS, SpanBuilder._tool_update),
        **dict.fromkeys(vocab.MESSAGE_CHUNKS | vocab.MESSAGE_UPSERTS, None),
        **dict.fromkeys(
            (vocab.PLAN, vocab.PLAN_UPDATE, vocab.PLAN_REMOVED, vocab.TERMINAL_UPDATE, vocab.TERMINAL_OUTPUT_CHUNK),
            None,
        ),
        **dict.fromkeys(
            (vocab.CURRENT_MODE_UPDATE, vocab.CONFIG_OPTION_UPDATE, vocab.AVAILABLE_COMMANDS_UPDATE),
            None,
        ),
        **dict.fromkeys((vocab.SESSION_INFO_UPDATE, vocab.COMPACTION_SUMMARY_CHUNK, vocab.QUOTA_UPDATE), None),
        **dict.fromkeys((vocab.SESSION_MESSAGE, vocab.SESSION_MESSAGE_CHUNK), None),
        vocab.USAGE_UPDATE: SpanBuilder._usage_update,
        vocab.NOTICE: SpanBuilder._notice,
        vocab.COMPACTION_UPDATE: SpanBuilder._compaction,
        vocab.SUBAGENT_UPDATE: SpanBuilder._subagent,
        vocab.STATE_UPDATE: SpanBuilder._state_update,
    },
)


def _message(error: Any) -> str:
    message = get(error, "message")
    return message if isinstance(message, str) else ""


def _rpc(method: str, rpc_id: Any) -> dict[str, Any]:
    """The rpc semconv attributes of a JSON-RPC call."""
    rid = rpc_id if isinstance(rpc_id, str) or (isinstance(rpc_id, int) and not isinstance(rpc_id, bool)) else None
    return {
        "rpc.system": "jsonrpc",
        "rpc.method": method,
        "rpc.jsonrpc.version": "2.0",
        "rpc.jsonrpc.request_id": str(rid) if rid is not None else None,
    }


def session_spans(
    events: Iterable[Event], session_id: str, protocol_version: int = 1, **options: Any
) -> tuple[list[SpanRecord], dict[str, Any]]:
    """A whole recorded session at once: its spans (root last) and the resource attributes."""
    builder = SpanBuilder(session_id, protocol_version, **options)
    spans: list[SpanRecord] = []
    for event in events:
        spans += builder.feed(event)
    spans += builder.finish()
    return spans, builder.resource()
