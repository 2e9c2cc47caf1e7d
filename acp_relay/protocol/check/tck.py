"""What a clean `check` means against the ACP conformance kit (acp-tck): each of its requirement ids, per
protocol version, with the rules that judge it and how far a passive observer can.

The kit drives an agent and names each requirement `ACP-<AREA>-<NNN>` in two registries (v1 and v2); the
same id may carry a different tier per version. `check` only watches traffic, so each id is one of:

  rule          our rules judge every frame the requirement speaks about
  partial       our rules judge part of it; the note says which part they cannot see
  active-only   it needs a probe (a request the kit makes up) or something off the wire
  missing       visible on the wire, but no rule checks it yet (the note says what it would take)
  informational the kit only records behaviour there, it asserts nothing

Ids and tiers are the kit's (facts); the notes are ours. Read from its registries src/tck/v1/requirements.py
and src/tck/v2/requirements.py (repository EugeneTheDev/acp-tck).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache

from .. import vocab

MANDATORY, CAPABILITY, ADVISORY, INFORMATIONAL = "MANDATORY", "CAPABILITY", "ADVISORY", "INFORMATIONAL"
RULE, PARTIAL, ACTIVE, MISSING, INFO = "rule", "partial", "active-only", "missing", "informational"
STATUSES = (RULE, PARTIAL, ACTIVE, MISSING, INFO)


@dataclass(frozen=True, slots=True)
class Requirement:
    id: str
    version: int
    tier: str
    status: str
    rules: tuple[str, ...]
    note: str

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "protocol": self.version,
            "tier": self.tier,
            "status": self.status,
            "rules": list(self.rules),
            "note": self.note,
        }


_M, _C, _A, _I = MANDATORY, CAPABILITY, ADVISORY, INFORMATIONAL
_SUCCESS = "whether the call succeeds is not judged: an error answer may be legitimate (auth, bad input)"
_PROBE = "needs a request the kit makes up"
_CUT_OFF = "a warning: a connection may end (killed, closed) with a request still in flight"
_FRAMING = ("rpc.not-json", "rpc.invalid", "rpc.version")
_SCHEMA = ("schema.params", "schema.result")

# (id, tier, status, rules, note) per version.
_V1: list[tuple[str, str, str, tuple[str, ...], str]] = [
    ("ACP-TRANSPORT-001", _M, RULE, (*_FRAMING, "rpc.batch-v1"), ""),
    ("ACP-TRANSPORT-002", _M, RULE, ("rpc.not-utf8",), ""),
    ("ACP-JSONRPC-001", _M, RULE, ("rpc.unknown-id", "protocol.unanswered"), ""),
    ("ACP-JSONRPC-002", _M, RULE, ("rpc.result-and-error", "rpc.error-object"), ""),
    ("ACP-JSONRPC-003", _M, RULE, ("rpc.notification-answered", "rpc.unknown-id"), ""),
    ("ACP-JSONRPC-004", _A, ACTIVE, (), "whether the receiver knows a method is not visible; " + _PROBE),
    (
        "ACP-JSONRPC-005",
        _A,
        PARTIAL,
        ("protocol.unanswered",),
        "a later request left unanswered is reported; the kit's deliberate bad request is a probe",
    ),
    ("ACP-INIT-001", _M, PARTIAL, ("schema.result", "protocol.version-value"), "the result is validated; " + _SUCCESS),
    (
        "ACP-INIT-002",
        _M,
        PARTIAL,
        ("protocol.version",),
        "an answer other than the requested version is legitimate when the agent lacks it, which traffic cannot show",
    ),
    ("ACP-INIT-003", _M, ACTIVE, (), "an unsupported version request is a probe"),
    ("ACP-INIT-004", _A, RULE, ("protocol.agent-info",), ""),
    ("ACP-SCHEMA-001", _M, RULE, _SCHEMA, ""),
    ("ACP-SESSION-001", _M, PARTIAL, ("schema.result", "protocol.session-ids"), _SUCCESS),
    ("ACP-SESSION-002", _M, RULE, ("protocol.session-ids",), ""),
    ("ACP-PROMPT-001", _M, PARTIAL, ("schema.result",), "the stop reason is validated; " + _SUCCESS),
    ("ACP-PROMPT-002", _M, RULE, ("schema.params", "protocol.unknown-session"), ""),
    ("ACP-PROMPT-003", _A, ACTIVE, (), "acceptance of a resource_link prompt; " + _SUCCESS),
    ("ACP-CANCEL-001", _M, RULE, ("lifecycle.cancel-response", "lifecycle.cancel-crossed"), ""),
    ("ACP-CANCEL-002", _M, RULE, ("lifecycle.after-cancel",), ""),
    ("ACP-LOAD-001", _C, PARTIAL, ("schema.result", "protocol.agent-capability"), _SUCCESS),
    (
        "ACP-LOAD-002",
        _C,
        PARTIAL,
        ("lifecycle.replay-after-answer",),
        "history updates after the answer and before the next prompt are reported; others may be live",
    ),
    ("ACP-LOAD-003", _A, PARTIAL, ("schema.result",), "the schema accepts null for an all-optional result"),
    ("ACP-RESUME-001", _C, PARTIAL, ("schema.result", "protocol.agent-capability"), _SUCCESS),
    ("ACP-RESUME-002", _C, RULE, ("lifecycle.resume-history",), ""),
    ("ACP-LIST-001", _C, PARTIAL, ("schema.result", "protocol.agent-capability"), _SUCCESS),
    (
        "ACP-LIST-002",
        _C,
        PARTIAL,
        ("protocol.list-cwd",),
        "entries with another cwd are reported; knowing no session has that cwd needs a probe",
    ),
    ("ACP-DELETE-001", _C, PARTIAL, ("schema.result", "protocol.agent-capability"), _SUCCESS),
    ("ACP-DELETE-002", _A, RULE, ("protocol.delete-again",), ""),
    ("ACP-CLOSE-001", _C, PARTIAL, ("schema.result", "protocol.agent-capability"), _SUCCESS),
    ("ACP-CLOSE-002", _C, RULE, ("lifecycle.cancel-response", "lifecycle.cancel-crossed"), ""),
    ("ACP-ADDDIRS-001", _C, ACTIVE, (), "acceptance of additionalDirectories; " + _SUCCESS),
    ("ACP-MODES-001", _C, RULE, ("schema.result", "protocol.mode-id"), ""),
    ("ACP-MODES-002", _C, PARTIAL, ("schema.params",), "current_mode_update is validated; " + _SUCCESS),
    ("ACP-CONFIG-001", _C, RULE, ("schema.result", "protocol.config-value"), ""),
    ("ACP-CONFIG-002", _C, RULE, ("protocol.config-complete",), ""),
    ("ACP-CONFIG-003", _M, RULE, ("protocol.client-capability",), ""),
    ("ACP-PROMPTCAP-001", _C, ACTIVE, (), "acceptance of image prompts; " + _SUCCESS),
    ("ACP-PROMPTCAP-002", _C, ACTIVE, (), "acceptance of audio prompts; " + _SUCCESS),
    ("ACP-PROMPTCAP-003", _C, ACTIVE, (), "acceptance of embedded resources; " + _SUCCESS),
    ("ACP-AUTH-001", _A, RULE, ("protocol.auth-method-ids",), ""),
    ("ACP-AUTH-002", _M, RULE, ("protocol.auth-terminal",), ""),
    ("ACP-AUTH-003", _C, ACTIVE, (), "needs credentials the kit is given"),
    ("ACP-AUTH-004", _C, ACTIVE, (), "a logout the kit makes (destructive)"),
    ("ACP-AUTH-005", _A, RULE, ("protocol.auth-required",), ""),
    ("ACP-CLIENTCAP-001", _M, RULE, ("protocol.client-capability",), ""),
    ("ACP-CLIENTCAP-002", _M, RULE, ("protocol.client-capability",), ""),
    ("ACP-CLIENTCAP-003", _M, RULE, ("protocol.client-capability",), ""),
    ("ACP-EXT-001", _M, PARTIAL, ("protocol.unanswered",), _CUT_OFF),
    ("ACP-META-001", _A, ACTIVE, (), "acceptance of a prompt with _meta; " + _SUCCESS),
    ("ACP-ERROR-001", _A, RULE, ("rpc.error-message",), ""),
    ("ACP-SHUTDOWN-001", _A, ACTIVE, (), "the agent's exit after stdin closes is not a frame"),
    ("ACP-SCHEMA-002", _A, RULE, ("schema.unknown-field",), "check judges the editor's messages too"),
    ("ACP-STDERR-001", _I, INFO, (), ""),
    ("ACP-INFO-PARSE-001", _I, INFO, (), ""),
    ("ACP-INFO-INVALIDREQ-001", _I, INFO, (), ""),
    ("ACP-INFO-UNKNOWNSESSION-001", _I, INFO, (), ""),
]

_V2: list[tuple[str, str, str, tuple[str, ...], str]] = [
    ("ACP-INIT-001", _M, PARTIAL, ("schema.result",), _SUCCESS),
    (
        "ACP-INIT-201",
        _M,
        PARTIAL,
        ("protocol.version", "protocol.version-value"),
        "which versions the agent supports is not visible",
    ),
    ("ACP-INIT-003", _M, ACTIVE, (), "an unsupported version request is a probe"),
    ("ACP-INIT-202", _M, ACTIVE, (), "a downgrade request is a probe"),
    ("ACP-INIT-203", _M, RULE, ("schema.result",), ""),
    ("ACP-INIT-204", _M, RULE, ("schema.result",), ""),
    ("ACP-SCHEMA-001", _M, RULE, _SCHEMA, ""),
    ("ACP-SESSION-001", _C, PARTIAL, ("schema.result", "protocol.session-ids"), _SUCCESS),
    ("ACP-SESSION-002", _C, RULE, ("protocol.session-ids",), ""),
    ("ACP-PROMPT-205", _C, RULE, ("schema.params", "protocol.unknown-session"), ""),
    ("ACP-PROMPT-201", _C, RULE, ("lifecycle.accept-message-id", "patch.ids"), ""),
    ("ACP-PROMPT-203", _C, RULE, ("lifecycle.user-message",), ""),
    ("ACP-STATE-201", _C, RULE, ("lifecycle.running",), ""),
    (
        "ACP-STATE-202",
        _C,
        PARTIAL,
        ("lifecycle.turn-open",),
        "a turn still running when the connection ends is reported; the kit's timeout is not a wire fact",
    ),
    ("ACP-STATE-203", _C, RULE, ("lifecycle.idle-stop-reason", "lifecycle.custom-stop-reason"), ""),
    ("ACP-PROMPTCAP-001", _C, ACTIVE, (), "acceptance of image prompts; " + _SUCCESS),
    ("ACP-PROMPTCAP-002", _C, ACTIVE, (), "acceptance of audio prompts; " + _SUCCESS),
    ("ACP-PROMPTCAP-003", _C, ACTIVE, (), "acceptance of embedded resources; " + _SUCCESS),
    ("ACP-PROMPT-003", _A, ACTIVE, (), "acceptance of a resource_link prompt; " + _SUCCESS),
    (
        "ACP-PERM-201",
        _C,
        PARTIAL,
        ("schema.params", "lifecycle.turn-open"),
        "the request is validated and a turn left open is reported; the kit's own answer is a probe",
    ),
    ("ACP-CLIENTCAP-201", _C, RULE, ("protocol.client-capability",), ""),
    (
        "ACP-CLIENTCAP-202",
        _C,
        PARTIAL,
        ("schema.unknown-method",),
        "reported as a warning: a method from a newer draft is not proof of a broken agent",
    ),
    ("ACP-INFO-CONCURRENT-201", _I, INFO, (), ""),
    ("ACP-INFO-UNKNOWNSESSION-001", _I, INFO, (), ""),
    ("ACP-CANCEL-201", _C, RULE, ("lifecycle.cancel-idle", "lifecycle.cancel-crossed"), ""),
    ("ACP-CANCEL-202", _C, RULE, ("lifecycle.after-cancel",), ""),
    ("ACP-CANCEL-203", _C, RULE, ("lifecycle.cancel-idle",), ""),
    ("ACP-CANCEL-204", _I, INFO, (), "how soon work stops is not visible"),
    ("ACP-CANCEL-205", _C, RULE, ("rpc.notification-answered", "rpc.unknown-id"), ""),
    ("ACP-CANCEL-206", _C, PARTIAL, ("schema.params",), "the editor's cancel is validated; acceptance is a probe"),
    ("ACP-CANCEL-207", _C, RULE, ("lifecycle.custom-stop-reason",), ""),
    ("ACP-CANCEL-208", _C, RULE, ("lifecycle.cancel-idle",), ""),
    ("ACP-INFO-CANCEL-201", _I, INFO, (), ""),
    ("ACP-INFO-CANCEL-202", _I, INFO, (), ""),
    ("ACP-TRANSPORT-201", _M, RULE, (*_FRAMING, "rpc.batch-empty"), ""),
    ("ACP-TRANSPORT-002", _M, RULE, ("rpc.not-utf8",), ""),
    ("ACP-TRANSPORT-203", _M, RULE, ("rpc.not-json",), ""),
    ("ACP-JSONRPC-001", _M, RULE, ("rpc.unknown-id", "protocol.unanswered"), ""),
    ("ACP-JSONRPC-002", _M, RULE, ("rpc.result-and-error", "rpc.error-object"), ""),
    ("ACP-JSONRPC-003", _M, RULE, ("rpc.notification-answered", "rpc.unknown-id"), ""),
    ("ACP-JSONRPC-004", _A, ACTIVE, (), "whether the receiver knows a method is not visible; " + _PROBE),
    (
        "ACP-JSONRPC-005",
        _A,
        PARTIAL,
        ("protocol.unanswered",),
        "a later request left unanswered is reported; the kit's deliberate bad request is a probe",
    ),
    ("ACP-BATCH-201", _M, RULE, ("rpc.batch-empty", "rpc.batch-empty-answer"), ""),
    ("ACP-BATCH-202", _M, RULE, ("rpc.batch-empty", "rpc.notification-answered"), ""),
    ("ACP-BATCH-203", _A, ACTIVE, (), "invalid batch entries are reported (rpc.invalid); the answer needs a probe"),
    ("ACP-BATCH-204", _A, RULE, ("rpc.batch-reply",), ""),
    ("ACP-BATCH-205", _A, INFO, (), "answers may come in any order: nothing to report"),
    ("ACP-BATCH-206", _I, INFO, (), ""),
    ("ACP-BATCH-207", _I, INFO, (), ""),
    ("ACP-BATCH-208", _I, RULE, ("rpc.batch-lifecycle",), "the kit only records it; check judges both senders"),
    ("ACP-INFO-BATCH-201", _I, INFO, (), ""),
    ("ACP-INFO-BATCH-202", _I, INFO, (), ""),
    ("ACP-SESSION-203", _C, ACTIVE, (), "the two spellings of no MCP servers; " + _PROBE),
    ("ACP-RESUME-201", _C, PARTIAL, ("schema.result",), _SUCCESS),
    (
        "ACP-RESUME-202",
        _C,
        PARTIAL,
        ("lifecycle.replay-after-answer",),
        "history updates after the answer and before the next prompt are reported; others may be live",
    ),
    ("ACP-RESUME-203", _C, RULE, ("lifecycle.resume-history",), ""),
    ("ACP-RESUME-204", _C, RULE, ("lifecycle.replay-message-id",), "for sessions created on the same connection"),
    ("ACP-RESUME-205", _C, RULE, ("lifecycle.replay-chunk",), ""),
    ("ACP-LIST-201", _C, PARTIAL, ("schema.result",), _SUCCESS),
    (
        "ACP-LIST-202",
        _C,
        PARTIAL,
        ("protocol.list-cwd",),
        "entries with another cwd are reported; knowing no session has that cwd needs a probe",
    ),
    ("ACP-LIST-203", _C, RULE, ("protocol.list-cwd",), ""),
    ("ACP-LIST-204", _C, RULE, ("protocol.list-cwd",), ""),
    ("ACP-CLOSE-201", _C, PARTIAL, ("schema.result",), _SUCCESS),
    ("ACP-CLOSE-202", _C, RULE, ("lifecycle.cancel-idle",), ""),
    ("ACP-DELETE-201", _C, PARTIAL, ("schema.result", "protocol.agent-capability"), _SUCCESS),
    ("ACP-DELETE-202", _C, RULE, ("protocol.deleted-listed",), ""),
    ("ACP-DELETE-203", _A, RULE, ("protocol.delete-again",), ""),
    ("ACP-ADDDIRS-201", _C, ACTIVE, (), "acceptance of additionalDirectories; " + _SUCCESS),
    ("ACP-ADDDIRS-202", _C, ACTIVE, (), "acceptance of additionalDirectories on resume; " + _SUCCESS),
    ("ACP-MCP-201", _I, INFO, (), ""),
    ("ACP-MCP-202", _I, INFO, (), ""),
    ("ACP-CONFIG-201", _C, RULE, ("schema.result", "protocol.config-value"), ""),
    ("ACP-CONFIG-202", _C, RULE, ("protocol.config-complete",), ""),
    ("ACP-CONFIG-203", _C, RULE, ("schema.result", "protocol.config-value"), ""),
    ("ACP-CONFIG-204", _C, RULE, ("protocol.config-value",), ""),
    ("ACP-CONFIG-206", _C, RULE, ("protocol.config-complete",), ""),
    ("ACP-AUTH-201", _A, RULE, ("protocol.auth-method-ids",), ""),
    ("ACP-AUTH-202", _M, RULE, ("protocol.auth-terminal",), ""),
    ("ACP-AUTH-203", _C, ACTIVE, (), "a logout the kit makes (destructive)"),
    ("ACP-AUTH-204", _C, ACTIVE, (), "needs credentials the kit is given"),
    ("ACP-AUTH-205", _A, RULE, ("protocol.auth-required",), ""),
    ("ACP-AUTH-206", _M, RULE, ("schema.open-enum",), ""),
    ("ACP-AUTH-207", _M, RULE, ("schema.result", "protocol.auth-terminal"), ""),
    ("ACP-PATCH-201", _C, RULE, ("lifecycle.update-message-id", "patch.ids"), ""),
    ("ACP-PATCH-203", _C, RULE, ("lifecycle.distinct-message-ids",), ""),
    ("ACP-PATCH-204", _C, RULE, ("schema.params", "patch.ids"), ""),
    ("ACP-PATCH-205", _C, RULE, ("schema.params", "patch.ids"), ""),
    ("ACP-PATCH-206", _C, RULE, ("patch.terminal-cwd",), ""),
    ("ACP-PATCH-207", _C, RULE, ("schema.params",), "the schemas mark the data base64 (contentEncoding)"),
    ("ACP-PATCH-208", _A, RULE, ("patch.tool-title",), ""),
    ("ACP-PATCH-209", _A, RULE, ("lifecycle.requires-action", "lifecycle.resume-running"), ""),
    ("ACP-ENUM-201", _C, RULE, ("schema.open-enum",), ""),
    ("ACP-ENUM-202", _A, RULE, ("schema.unknown-variant",), ""),
    ("ACP-ENUM-203", _A, ACTIVE, (), "the agent's tolerance of a custom outcome is a probe"),
    ("ACP-EXT-001", _M, PARTIAL, ("protocol.unanswered",), _CUT_OFF),
    ("ACP-META-001", _A, ACTIVE, (), "acceptance of a prompt with _meta; " + _SUCCESS),
    ("ACP-META-201", _A, RULE, _SCHEMA, ""),
    ("ACP-EXT-201", _A, RULE, ("rpc.notification-answered",), ""),
    ("ACP-EXT-202", _A, RULE, ("protocol.capability-keys",), "check judges the editor's capabilities too"),
    ("ACP-EXT-203", _I, INFO, (), "check ignores unknown `$/` notifications, as the receiver may"),
    ("ACP-ERROR-001", _A, RULE, ("rpc.error-message",), ""),
    ("ACP-SHUTDOWN-001", _A, ACTIVE, (), "the agent's exit after stdin closes is not a frame"),
    ("ACP-SCHEMA-002", _A, RULE, ("schema.unknown-field",), "check judges the editor's messages too"),
    ("ACP-STDERR-001", _I, INFO, (), ""),
    ("ACP-INFO-PARSE-001", _I, INFO, (), ""),
    ("ACP-INFO-INVALIDREQ-001", _I, INFO, (), ""),
]

REQUIREMENTS: tuple[Requirement, ...] = tuple(
    Requirement(rid, version, tier, status, rules, note)
    for version, table in ((1, _V1), (2, _V2))
    for rid, tier, status, rules, note in table
)


@cache
def _by_rule() -> dict[tuple[str, int], tuple[str, ...]]:
    out: dict[tuple[str, int], list[str]] = {}
    for r in REQUIREMENTS:
        if r.status in (RULE, PARTIAL):
            for rule in r.rules:
                out.setdefault((rule, r.version), []).append(r.id)
    return {k: tuple(v) for k, v in out.items()}


@cache
def tck_ids(rule: str, version: int | None) -> tuple[str, ...]:
    """The kit's requirement ids `rule` implements for `version` (both versions' when it is unknown)."""
    table = _by_rule()
    if version in (1, 2):
        return table.get((rule, version), ())
    return tuple(dict.fromkeys((*table.get((rule, 1), ()), *table.get((rule, 2), ()))))


# -- the one requirement a finding breaks ---------------------------------------------------------------------
# A rule may stand for several of the kit's requirements (schema.result for every method's answer); a finding
# names the one its check was about, by its topic (the method, variant or field the rule's site names; see
# rules.finding) and, for the schema rules, the path its message names. No id: the kit has no requirement
# about that case (a v1 plan update the client did not allow, an empty terminalId).


def _names(message: str, *fields: str) -> bool:
    """The schema error in `message` is about one of `fields`: a path segment `.f` or a missing field `f`."""
    return any(re.search(rf"(?:\.|`){re.escape(f)}(?:`|\b)", message) for f in fields)


_RESULT = {
    1: {
        vocab.INITIALIZE: "ACP-INIT-001",
        vocab.SESSION_NEW: "ACP-SESSION-001",
        vocab.PROMPT: "ACP-PROMPT-001",
        vocab.SESSION_LOAD: "ACP-LOAD-001",
        vocab.SESSION_RESUME: "ACP-RESUME-001",
        vocab.SESSION_LIST: "ACP-LIST-001",
        vocab.SESSION_DELETE: "ACP-DELETE-001",
        vocab.SESSION_CLOSE: "ACP-CLOSE-001",
    },
    2: {
        vocab.SESSION_NEW: "ACP-SESSION-001",
        vocab.SESSION_RESUME: "ACP-RESUME-201",
        vocab.SESSION_LIST: "ACP-LIST-201",
        vocab.SESSION_CLOSE: "ACP-CLOSE-201",
        vocab.SESSION_DELETE: "ACP-DELETE-201",
    },
}
_CONFIG_CARRIERS = {(1, vocab.SESSION_NEW): "ACP-CONFIG-001", (2, vocab.SESSION_NEW): "ACP-CONFIG-201"}
_CONFIG_CARRIERS[(2, vocab.SESSION_RESUME)] = "ACP-CONFIG-203"


def _schema_result(version: int, topic: str, message: str) -> str | None:
    """A result that fails its schema: the kit's requirement about that method's answer (or that part of it).
    The message names the method first (`session/new: result...`)."""
    method = topic or message.partition(":")[0]
    if version == 2 and _names(message, "_meta"):
        return "ACP-META-201"
    if _names(message, "configOptions") and (version, method) in _CONFIG_CARRIERS:
        return _CONFIG_CARRIERS[(version, method)]
    if version == 1 and method == vocab.SESSION_NEW and _names(message, "modes"):
        return "ACP-MODES-001"
    if version == 2 and method == vocab.INITIALIZE:
        if _names(message, "authMethods") and _names(message, "env", "args"):
            return "ACP-AUTH-207"
        if _names(message, "info"):
            return "ACP-INIT-203"
        return "ACP-INIT-204" if _names(message, "capabilities") else "ACP-SCHEMA-001"
    return _RESULT[version].get(method, "ACP-SCHEMA-001")


_PATCHED = {  # v2 variant -> (the fields a requirement of its own is about, that requirement)
    vocab.TOOL_CALL_UPDATE: (("toolCallId",), "ACP-PATCH-204"),
    vocab.TOOL_CALL_CONTENT_CHUNK: (("toolCallId", "content"), "ACP-PATCH-204"),
    vocab.PLAN_UPDATE: (("planId",), "ACP-PATCH-205"),
    vocab.TERMINAL_UPDATE: (("data",), "ACP-PATCH-207"),
    vocab.TERMINAL_OUTPUT_CHUNK: (("data",), "ACP-PATCH-207"),
}


def _schema_params(version: int, topic: str, message: str) -> str | None:
    """Params that fail their schema; the topic is the method, or a session/update's variant."""
    update = topic == vocab.UPDATE or topic in vocab.VARIANTS
    if version == 1:
        if topic == vocab.CURRENT_MODE_UPDATE:
            return "ACP-MODES-002"
        return "ACP-PROMPT-002" if update else "ACP-SCHEMA-001"
    if _names(message, "_meta"):
        return "ACP-META-201"
    fields, own = _PATCHED.get(topic, ((), ""))
    if fields and _names(message, *fields):
        return own
    if update:
        return "ACP-PROMPT-205"
    return {vocab.REQUEST_PERMISSION: "ACP-PERM-201", vocab.CANCEL: "ACP-CANCEL-206"}.get(topic, "ACP-SCHEMA-001")


def _answered_notification(version: int, topic: str, message: str) -> str | None:
    """A response to no request; the topic is the notification the other side sent last ("batch": in one)."""
    if version == 2 and topic == "batch":
        return "ACP-BATCH-202"
    if version == 2 and topic == vocab.CANCEL:
        return "ACP-CANCEL-205"
    if version == 2 and topic.startswith("_"):
        return "ACP-EXT-201"
    return "ACP-JSONRPC-003"


def _unanswered(version: int, topic: str, message: str) -> str | None:
    """A request never answered; the topic is its method, or "after-error" (the other side had answered one
    request with an error before this one was sent)."""
    if topic.startswith("_"):
        return "ACP-EXT-001"
    return "ACP-JSONRPC-005" if topic == "after-error" else "ACP-JSONRPC-001"


_Picker = Callable[[int, str, str], str | None]
_PICKERS: dict[str, _Picker] = {
    "schema.result": _schema_result,
    "schema.params": _schema_params,
    "rpc.notification-answered": _answered_notification,
    "protocol.unanswered": _unanswered,
}
_TERMINAL_CALLS = (
    vocab.TERMINAL_CREATE,
    vocab.TERMINAL_OUTPUT,
    vocab.TERMINAL_WAIT,
    vocab.TERMINAL_KILL,
    vocab.TERMINAL_RELEASE,
)
_CANCELLED_BY = {vocab.SESSION_CLOSE: "ACP-CLOSE-002", "": "ACP-CANCEL-001"}
# rule -> version -> topic -> the requirement ("" is any other topic; None: the kit has no requirement there).
_TOPICS: dict[str, Mapping[int, Mapping[str, str | None]]] = {
    "rpc.not-json": {2: {"": "ACP-TRANSPORT-201"}},  # TRANSPORT-203 (one message per line) looks the same
    "rpc.unknown-id": {1: {"": "ACP-JSONRPC-001"}, 2: {"": "ACP-JSONRPC-001"}},
    "rpc.batch-empty": {2: {"": "ACP-TRANSPORT-201"}},
    "schema.open-enum": {2: {"auth": "ACP-AUTH-206", "": "ACP-ENUM-201"}},
    "protocol.client-capability": {
        1: {
            vocab.FS_READ: "ACP-CLIENTCAP-001",
            vocab.FS_WRITE: "ACP-CLIENTCAP-001",
            **dict.fromkeys(_TERMINAL_CALLS, "ACP-CLIENTCAP-002"),
            vocab.ELICITATION_CREATE: "ACP-CLIENTCAP-003",
            "configOptions.boolean": "ACP-CONFIG-003",
            "": None,
        },
        2: {vocab.ELICITATION_CREATE: "ACP-CLIENTCAP-201", "": None},
    },
    "protocol.agent-capability": {
        1: {
            vocab.SESSION_LOAD: "ACP-LOAD-001",
            vocab.SESSION_RESUME: "ACP-RESUME-001",
            vocab.SESSION_LIST: "ACP-LIST-001",
            vocab.SESSION_DELETE: "ACP-DELETE-001",
            vocab.SESSION_CLOSE: "ACP-CLOSE-001",
            "": None,
        },
        2: {vocab.SESSION_DELETE: "ACP-DELETE-201", "": None},
    },
    "protocol.session-ids": {v: {"empty": "ACP-SESSION-001", "": "ACP-SESSION-002"} for v in (1, 2)},
    "protocol.config-value": {2: {"": "ACP-CONFIG-204"}},
    "protocol.config-complete": {2: {vocab.CONFIG_OPTION_UPDATE: "ACP-CONFIG-206", "": "ACP-CONFIG-202"}},
    "protocol.auth-terminal": {2: {"env": "ACP-AUTH-207", "": "ACP-AUTH-202"}},
    "protocol.list-cwd": {
        1: {"relative": None, "": "ACP-LIST-002"},
        2: {"relative": "ACP-LIST-204", "": "ACP-LIST-203"},
    },
    "lifecycle.custom-stop-reason": {2: {"cancelled": "ACP-CANCEL-207", "": "ACP-STATE-203"}},
    "lifecycle.cancel-idle": {
        2: {vocab.SESSION_CLOSE: "ACP-CANCEL-208", "other-reason": "ACP-CANCEL-203", "": "ACP-CANCEL-201"}
    },
    "lifecycle.cancel-response": {1: _CANCELLED_BY},
    "lifecycle.cancel-crossed": {1: _CANCELLED_BY, 2: {"": "ACP-CANCEL-201"}},
    "lifecycle.turn-open": {2: {vocab.REQUIRES_ACTION: "ACP-PERM-201", "": "ACP-STATE-202"}},
    "patch.ids": {
        2: {
            vocab.PROMPT: "ACP-PROMPT-201",
            "messageId": "ACP-PATCH-201",
            "toolCallId": "ACP-PATCH-204",
            "planId": "ACP-PATCH-205",
            "": None,
        }
    },
}


def picks_for(rule: str, version: int) -> bool:
    """Whether `requirement` has a way to choose among the rule's several ids for `version`."""
    return rule in _PICKERS or version in _TOPICS.get(rule, {})


def requirement(rule: str, version: int | None, topic: str = "", message: str = "") -> str | None:
    """The one kit requirement a finding of `rule` breaks under `version`, by what it checked (see above). With
    the version unknown: the one both versions would name, else none."""
    if version not in (1, 2):
        picked = {requirement(rule, v, topic, message) for v in (1, 2)}
        return picked.pop() if len(picked) == 1 else None
    ids = tck_ids(rule, version)
    if not ids:
        return None
    pick = _PICKERS.get(rule)
    table = _TOPICS.get(rule, {}).get(version)
    if pick is not None:
        rid = pick(version, topic, message)
    elif table is not None:
        rid = table.get(topic, table.get(""))
    else:
        rid = ids[0] if len(ids) == 1 else None
    return rid if rid in ids else None


def requirements(version: int | None = None) -> list[Requirement]:
    return [r for r in REQUIREMENTS if version is None or r.version == version]
