"""Every rule `acp-relay check` applies: id, severity, one line on what it checks, and where it comes from.

Sources: "JSON-RPC 2.0 §N" (the JSON-RPC 2.0 specification's sections), "schema <Definition>" (the official
ACP JSON Schemas shipped in schemas/, @agentclientprotocol/sdk 2.4.0's; v2's messageId is required by the
lifecycle rules, not the schema, so a missing one is reported once), "Prompt
Lifecycle: <heading>" (the v2 draft Prompt Lifecycle page), or "ACP stdio transport" for the line framing.
MUSTs are errors, SHOULDs are warnings, extensions are info.
"""

from __future__ import annotations

from dataclasses import dataclass, field

CROSSING_WINDOW = 0.1  # seconds: see lifecycle.py, which uses it

ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITIES = (INFO, WARNING, ERROR)  # in increasing order
RANK = {s: i for i, s in enumerate(SEVERITIES)}


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    severity: str
    description: str
    spec: str


@dataclass(frozen=True, slots=True)
class Finding:
    """One rule broken (or one extension noted) at one frame; frame None: about the connection as a whole."""

    frame: int | None
    session: str | None
    rule: str
    severity: str
    message: str
    spec: str
    tck: str | None = None  # the one conformance kit requirement this finding breaks (protocol/check/tck.py)
    # What was checked (a method, a variant, a field): tck.requirement picks the kit id by it. Not output.
    topic: str = field(default="", compare=False, repr=False)

    def to_json(self) -> dict[str, object]:
        return {
            "frame": self.frame,
            "session": self.session,
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
            "spec": self.spec,
            "tck": self.tck,
        }


_T = "ACP stdio transport"
_RULES = [
    # -- 1. JSON-RPC 2.0 and framing ----------------------------------------------------------------------
    Rule("rpc.not-utf8", ERROR, "a line that is not valid UTF-8", "JSON-RPC 2.0 §1 (JSON text); " + _T),
    Rule(
        "rpc.not-json", ERROR, "a line that is not JSON (the receiver answers -32700 Parse error)", "JSON-RPC 2.0 §5.1"
    ),
    Rule("rpc.blank-line", WARNING, "an empty or whitespace-only line between messages", _T),
    Rule("rpc.cr-line", WARNING, "a line ending in CR LF: messages are delimited by LF alone", _T),
    Rule("rpc.unterminated", WARNING, "the stream ended inside a line (no final LF)", _T),
    Rule("rpc.version", ERROR, 'a message without "jsonrpc": "2.0"', "JSON-RPC 2.0 §4, §5"),
    Rule(
        "rpc.invalid",
        ERROR,
        "a JSON value that is neither a request, a notification nor a response",
        "JSON-RPC 2.0 §4, §5",
    ),
    Rule("rpc.id-type", ERROR, "an id that is not a string, a number or null", "JSON-RPC 2.0 §4"),
    Rule("rpc.id-discouraged", WARNING, "a request id that is null or has a fractional part", "JSON-RPC 2.0 §4"),
    Rule("rpc.params-type", ERROR, "params that are neither an object nor an array", "JSON-RPC 2.0 §4.2"),
    Rule("rpc.result-and-error", ERROR, "a response with both result and error, or neither", "JSON-RPC 2.0 §5"),
    Rule(
        "rpc.error-object", ERROR, "an error member without an integer code and a string message", "JSON-RPC 2.0 §5.1"
    ),
    Rule("rpc.unknown-id", ERROR, "a response whose id no pending request of the other side has", "JSON-RPC 2.0 §5"),
    Rule("rpc.answered-twice", ERROR, "a request answered more than once", "JSON-RPC 2.0 §5"),
    Rule("rpc.id-reused", ERROR, "a request id reused while the first request with it is pending", "JSON-RPC 2.0 §4"),
    Rule(
        "rpc.notification-answered",
        ERROR,
        "a successful response with a null id, as if to a notification",
        "JSON-RPC 2.0 §4.1",
    ),
    Rule(
        "rpc.batch-v1",
        ERROR,
        "a batch array on a v1 connection (only v2 allows batches)",
        "JSON-RPC 2.0 §6; schema (v1 has no batch form)",
    ),
    Rule("rpc.batch-empty", ERROR, "an empty batch array", "JSON-RPC 2.0 §6"),
    Rule(
        "rpc.batch-empty-answer",
        ERROR,
        "an empty batch answered with an array instead of one Invalid Request error object",
        "JSON-RPC 2.0 §6",
    ),
    Rule(
        "rpc.batch-lifecycle",
        WARNING,
        "initialize, auth/login, session/new, session/resume or session/prompt sent inside a batch",
        "ACP v2 transports (batches)",
    ),
    Rule(
        "rpc.batch-reply",
        WARNING,
        "the answers to a batch's requests not sent together in one array",
        "ACP v2 transports (batches)",
    ),
    Rule(
        "rpc.error-message",
        WARNING,
        "an error whose message is empty or more than one line (it should be one short sentence)",
        "JSON-RPC 2.0 §5.1; schema Error.message",
    ),
    # -- 2. schema ----------------------------------------------------------------------------------------
    Rule(
        "schema.params",
        ERROR,
        "params that do not validate against the method's schema definition",
        "schema <Method>Request / <Method>Notification",
    ),
    Rule(
        "schema.result",
        ERROR,
        "a result that does not validate against its request's response definition",
        "schema <Method>Response",
    ),
    Rule(
        "schema.unknown-method",
        WARNING,
        "a method the negotiated version does not define and that does not begin with `_`",
        "schema (x-method); custom methods begin with `_`",
    ),
    Rule(
        "schema.unknown-variant",
        WARNING,
        "a session/update variant or stop reason this version does not define, not `_`-prefixed (reserved for future ACP)",
        "schema SessionUpdate / StopReason",
    ),
    Rule(
        "schema.unknown-field",
        WARNING,
        "valid params or a result with a root-level key its definition does not declare (custom data goes under `_meta`)",
        "ACP extensibility (no custom root fields)",
    ),
    Rule(
        "schema.open-enum",
        ERROR,
        "a tool kind or status, plan entry priority or status, or auth method type that is neither defined nor `_`-prefixed",
        "ACP v2 extensibility (open enums: custom values begin with `_`)",
    ),
    Rule(
        "schema.extension",
        INFO,
        "a `_`-prefixed (custom) method, session/update variant or stop reason: not validated",
        "schema (extensions: `_` prefix)",
    ),
    # -- 3. protocol --------------------------------------------------------------------------------------
    Rule(
        "protocol.initialize-first",
        ERROR,
        "a message other than initialize before the initialize exchange completed",
        "Prompt Lifecycle (introduction); schema InitializeRequest",
    ),
    Rule(
        "protocol.initialize-twice", ERROR, "initialize sent again on the same connection", "schema InitializeRequest"
    ),
    Rule(
        "protocol.version",
        WARNING,
        "the client kept going after the agent answered a newer protocol version than the client asked for",
        "schema InitializeResponse.protocolVersion",
    ),
    Rule(
        "protocol.version-value",
        ERROR,
        "an initialize result whose protocolVersion is missing or not an integer",
        "schema InitializeResponse.protocolVersion; ProtocolVersion",
    ),
    Rule(
        "protocol.unknown-version",
        WARNING,
        "a negotiated protocol version this checker does not know (the rest is judged by the version the messages show)",
        "schema ProtocolVersion",
    ),
    Rule("protocol.wrong-side", ERROR, "a method sent by the side that should receive it", "schema (x-side)"),
    Rule(
        "protocol.wrong-kind",
        ERROR,
        "a request sent as a notification or a notification sent as a request",
        "schema <Method>Request / <Method>Notification",
    ),
    Rule(
        "protocol.client-capability",
        ERROR,
        "an agent call (fs/*, terminal/*) or update variant the client did not advertise",
        "schema ClientCapabilities",
    ),
    Rule(
        "protocol.agent-capability",
        ERROR,
        "session/load, resume, list, close, fork or delete called without the agent's capability",
        "schema AgentCapabilities",
    ),
    Rule(
        "protocol.prompt-content",
        ERROR,
        "prompt content (image, audio, embedded resource) the agent's prompt capabilities exclude",
        "Prompt Lifecycle: 1. User Message; schema PromptCapabilities",
    ),
    Rule(
        "protocol.unknown-session",
        ERROR,
        "a sessionId that no session/new, load, resume, fork or subagent_update in the connection produced",
        "Prompt Lifecycle (introduction); schema SessionId",
    ),
    Rule(
        "protocol.session-ids",
        ERROR,
        "a session/new or fork answer whose sessionId is empty or one the connection already has",
        "ACP session setup (a unique session id)",
    ),
    Rule(
        "protocol.agent-info",
        WARNING,
        "v1: an initialize result without agentInfo (name and version)",
        "ACP initialization (agentInfo SHOULD be sent)",
    ),
    Rule(
        "protocol.capability-keys",
        WARNING,
        "a capabilities object with a key its schema does not define (vendor extensions go under `_meta`)",
        "ACP extensibility (advertising custom capabilities); schema AgentCapabilities / ClientCapabilities",
    ),
    Rule(
        "protocol.mode-id",
        ERROR,
        "a modes state whose currentModeId is not among its availableModes",
        "ACP session modes; schema SessionModeState",
    ),
    Rule(
        "protocol.config-value",
        ERROR,
        "a select config option whose currentValue is not one of its options",
        "ACP session config options; schema SessionConfigSelect",
    ),
    Rule(
        "protocol.config-complete",
        ERROR,
        "a set_config_option answer or config_option_update that leaves out options advertised before",
        "ACP session config options (the complete list)",
    ),
    Rule(
        "protocol.auth-method-ids",
        WARNING,
        "two auth methods with the same id in the initialize result",
        "schema AuthMethod (unique identifier)",
    ),
    Rule(
        "protocol.auth-terminal",
        ERROR,
        "a terminal auth method offered to a client that did not advertise auth.terminal, or setting an env name twice",
        "schema AuthMethodTerminal",
    ),
    Rule(
        "protocol.auth-required",
        WARNING,
        "session/new refused with -32000 (authentication required) when the agent offered no auth method",
        "ACP authentication; schema InitializeResponse.authMethods",
    ),
    Rule(
        "protocol.list-cwd",
        ERROR,
        "a session/list entry whose cwd is relative, or differs from the cwd the list was filtered by",
        "ACP session list; schema SessionInfo.cwd",
    ),
    Rule(
        "protocol.deleted-listed",
        ERROR,
        "a session/list answer that still lists a session deleted earlier on the connection",
        "ACP session delete",
    ),
    Rule(
        "protocol.delete-again",
        WARNING,
        "session/delete of a session already deleted on the connection answered with an error",
        "ACP session delete (deleting again succeeds silently)",
    ),
    Rule("protocol.unanswered", WARNING, "a request still unanswered when the connection ended", "JSON-RPC 2.0 §5"),
    # -- 4. Prompt Lifecycle (v2 draft page) --------------------------------------------------------------
    Rule(
        "lifecycle.accept-message-id",
        ERROR,
        "a v2 session/prompt result without the inserted user message's messageId",
        "Prompt Lifecycle: 2. Prompt Accepted",
    ),
    Rule(
        "lifecycle.user-message",
        ERROR,
        "the agent never reports the accepted user message (user_message or user_message_chunk with the returned messageId)",
        "Prompt Lifecycle: 2. Prompt Accepted",
    ),
    Rule(
        "lifecycle.distinct-message-ids",
        ERROR,
        "two accepted prompts of one session with the same messageId",
        "Prompt Lifecycle: 2. Prompt Accepted",
    ),
    Rule(
        "lifecycle.update-message-id",
        ERROR,
        "a v2 message update or chunk without messageId",
        "Prompt Lifecycle: 3. Agent Reports Output",
    ),
    Rule(
        "lifecycle.running",
        ERROR,
        "foreground work (a prompt turn) ended without a state_update `running` when it started",
        "Prompt Lifecycle: 3. Agent Reports Output",
    ),
    Rule(
        "lifecycle.requires-action",
        WARNING,
        "a permission request answered while the session never reported `requires_action`",
        "Prompt Lifecycle: 5. Tool Invocation and Status Reporting",
    ),
    Rule(
        "lifecycle.resume-running",
        WARNING,
        "tool or message output after a permission answer without `running` first",
        "Prompt Lifecycle: 5. Tool Invocation and Status Reporting",
    ),
    Rule(
        "lifecycle.idle-stop-reason",
        ERROR,
        "an idle state_update that ends a prompt turn without a stopReason",
        "Prompt Lifecycle: 4. Report Completion",
    ),
    Rule(
        "lifecycle.custom-stop-reason",
        ERROR,
        "a stop reason that is neither standard nor `_`-prefixed",
        "Prompt Lifecycle: Stop Reasons",
    ),
    Rule(
        "lifecycle.cancel-idle",
        ERROR,
        "after session/cancel, the turn ends without an idle state_update with stopReason `cancelled`",
        "Prompt Lifecycle: Cancellation",
    ),
    Rule(
        "lifecycle.cancel-response",
        ERROR,
        "v1: after session/cancel, the prompt is answered with an error or a stopReason other than `cancelled`",
        "Prompt Lifecycle: Cancellation (v1: the session/prompt response confirms it)",
    ),
    Rule(
        "lifecycle.cancel-crossed",
        WARNING,
        f"a turn that ends the ordinary way within {int(CROSSING_WINDOW * 1000)} ms after session/cancel (or close): "
        "the two crossed on the wire",
        "Prompt Lifecycle: Cancellation",
    ),
    Rule(
        "lifecycle.turn-open",
        WARNING,
        "v2: a turn still running (or waiting for the user) when the connection ended, with no idle state_update",
        "Prompt Lifecycle: 4. Report Completion",
    ),
    Rule(
        "lifecycle.after-cancel",
        ERROR,
        "content or tool call updates for cancelled work after the idle (v1: the prompt response) that confirmed the cancellation",
        "Prompt Lifecycle: Cancellation",
    ),
    Rule(
        "lifecycle.permission-cancelled",
        ERROR,
        "a permission request pending at session/cancel answered with anything but the `cancelled` outcome",
        "Prompt Lifecycle: Cancellation",
    ),
    Rule(
        "lifecycle.compaction-order",
        ERROR,
        "a compaction_summary_chunk before its compaction_update in_progress, or after its terminal update",
        "Prompt Lifecycle: Session Compaction",
    ),
    Rule(
        "lifecycle.compaction-end",
        ERROR,
        "a compaction that ends (completed, failed, cancelled) more than once",
        "Prompt Lifecycle: Session Compaction",
    ),
    Rule(
        "lifecycle.compaction-reuse",
        ERROR,
        "a compactionId reused for another compaction after it ended",
        "Prompt Lifecycle: Session Compaction",
    ),
    Rule(
        "lifecycle.compaction-fields",
        ERROR,
        "a non-empty summary on a compaction that is not completed, or an error on one that is not failed",
        "Prompt Lifecycle: Session Compaction",
    ),
    Rule(
        "lifecycle.resume-history",
        ERROR,
        "conversation history sent for a session/resume that asked for no replay, before its answer",
        "ACP session setup: resuming sessions",
    ),
    Rule(
        "lifecycle.replay-after-answer",
        ERROR,
        "a history update (a user message) after the session/load or replaying resume answer, before a new prompt",
        "ACP session setup: loading sessions (history is replayed before the answer)",
    ),
    Rule(
        "lifecycle.replay-message-id",
        ERROR,
        "replayed user message whose messageId no prompt of the session returned (for a session created on the connection)",
        "Prompt Lifecycle: 2. Prompt Accepted (a replayed message keeps its ID)",
    ),
    Rule(
        "lifecycle.replay-chunk",
        ERROR,
        "v2: a message chunk during replay before the whole-message update of its messageId",
        "ACP v2 session setup: resuming sessions (replay)",
    ),
    Rule(
        "lifecycle.subagent-state",
        WARNING,
        "a child session's own state differs from the state its parent's subagent_update last mirrored",
        "Prompt Lifecycle: Session States (subagents mirror the same snapshot)",
    ),
    Rule(
        "patch.ids",
        ERROR,
        "an empty messageId, toolCallId, terminalId or planId (the key an update patches)",
        "ACP v2 session updates (keyed upserts)",
    ),
    Rule(
        "patch.terminal-cwd",
        ERROR,
        "a terminal_update cwd that is relative, or changes for the same terminalId",
        "ACP v2 tool calls: terminals",
    ),
    Rule(
        "patch.tool-title",
        WARNING,
        "the first update of a tool call without a title, or a tool call whose name changes",
        "ACP v2 tool calls",
    ),
    Rule(
        "lifecycle.notice-replay",
        WARNING,
        "a live-only notice sent during history replay (session/load, session/resume)",
        "Prompt Lifecycle: Session Notices",
    ),
]

RULES: dict[str, Rule] = {r.id: r for r in _RULES}
assert len(RULES) == len(_RULES), "rule ids are unique"


def finding(
    rule_id: str, frame: int | None, session: str | None, message: str, spec: str | None = None, topic: str = ""
) -> Finding:
    """A finding of a registered rule (its severity and spec reference, or a more precise spec); `topic` says
    what was checked when the rule stands for several kit requirements (tck.requirement)."""
    rule = RULES[rule_id]
    return Finding(frame, session, rule_id, rule.severity, message, spec or rule.spec, topic=topic)
