"""The ACP vocabulary, named once: methods by side and version, the session/update variants by family, and
the tables that dispatch on them.

Every other module imports these names instead of spelling the strings; tests/test_vocab.py checks the sets
against the JSON Schemas shipped in check/schemas/ (each version's schema.unstable.json), and walks every
table registered here so that a variant a table lacks fails the suite with the table's name. Supporting a new
variant: add it to `VARIANTS`, then give every table the failing test names a row (or an explicit None).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

V1, V2 = 1, 2
BOTH = frozenset({V1, V2})
ONLY_V1 = frozenset({V1})
ONLY_V2 = frozenset({V2})
NO_SCHEMA: frozenset[int] = frozenset()  # seen on the wire, in no shipped schema

# The shipped schemas: @agentclientprotocol/sdk 2.4.0's schema/v1 and schema/v2 (check/schemas/NOTICE). The
# ones it replaced (the spec repository at b7f0005, v1 schema 1.21.0, v2 2.0.0-alpha.3) defined methods 2.4.0
# dropped; recordings made against them still carry those, so they stay named here with `former` versions.

# -- methods ----------------------------------------------------------------------------------------------
INITIALIZE = "initialize"
AUTHENTICATE = "authenticate"
LOGOUT = "logout"
AUTH_LOGIN = "auth/login"
AUTH_LOGOUT = "auth/logout"
AUTH_STATUS = "auth/status"
AUTH_STATUS_UPDATE = "auth/status_update"
PROXY_INITIALIZE = "proxy/initialize"
PROXY_SUCCESSOR = "proxy/successor"
PROVIDERS_LIST = "providers/list"
PROVIDERS_SET = "providers/set"
PROVIDERS_DISABLE = "providers/disable"
SESSION_NEW = "session/new"
SESSION_LOAD = "session/load"
SESSION_RESUME = "session/resume"
SESSION_FORK = "session/fork"
SESSION_LIST = "session/list"
SESSION_DELETE = "session/delete"
SESSION_CLOSE = "session/close"
SESSION_ARCHIVE = "session/archive"
SESSION_UNARCHIVE = "session/unarchive"
SESSION_SET_TITLE = "session/set_title"
SESSION_STATUS = "session/status"
SET_MODE = "session/set_mode"
SET_MODEL = "session/set_model"
SET_CONFIG_OPTION = "session/set_config_option"
PROMPT = "session/prompt"
CANCEL = "session/cancel"
UPDATE = "session/update"
REQUEST_PERMISSION = "session/request_permission"
FS_READ = "fs/read_text_file"
FS_WRITE = "fs/write_text_file"
TERMINAL_CREATE = "terminal/create"
TERMINAL_OUTPUT = "terminal/output"
TERMINAL_RELEASE = "terminal/release"
TERMINAL_WAIT = "terminal/wait_for_exit"
TERMINAL_KILL = "terminal/kill"
TERMINAL_CANCEL = "terminal/cancel"
TOOL_CALL_CANCEL = "tool_call/cancel"
MCP_CONNECT = "mcp/connect"
MCP_MESSAGE = "mcp/message"
MCP_DISCONNECT = "mcp/disconnect"
ELICITATION_CREATE = "elicitation/create"
ELICITATION_COMPLETE = "elicitation/complete"
NES_START = "nes/start"
NES_SUGGEST = "nes/suggest"
NES_ACCEPT = "nes/accept"
NES_REJECT = "nes/reject"
NES_CLOSE = "nes/close"
DOC_OPEN = "document/didOpen"
DOC_CHANGE = "document/didChange"
DOC_CLOSE = "document/didClose"
DOC_SAVE = "document/didSave"
DOC_FOCUS = "document/didFocus"
CANCEL_REQUEST = "$/cancel_request"
# The _meta key under which an agent's auth method names the command a user runs to log in in a terminal
# (command, args, label, env): a command line, not a credential, though its name ends in "auth".
META_TERMINAL_AUTH = "terminal-auth"


class Side(StrEnum):
    """Who handles a method (the schemas' `x-side`)."""

    AGENT = "agent"  # the client calls it
    CLIENT = "client"  # the agent calls it
    BOTH = "both"  # either side, or (mcp/message) one kind each side's
    PROTOCOL = "protocol"
    PROXY = "proxy"  # between a conductor and a proxy of a chain (proxy/initialize, proxy/successor)


@dataclass(frozen=True, slots=True)
class Method:
    name: str
    side: Side
    notification: bool
    versions: frozenset[int]  # the shipped schemas that define it
    former: frozenset[int] = NO_SCHEMA  # the replaced schemas that defined it, where the shipped ones do not


def _m(
    name: str, side: Side, versions: frozenset[int], notification: bool = False, former: frozenset[int] = NO_SCHEMA
) -> Method:
    return Method(name, side, notification, versions, former)


A, C = Side.AGENT, Side.CLIENT
METHODS: Mapping[str, Method] = {
    m.name: m
    for m in (
        _m(INITIALIZE, A, BOTH),
        _m(AUTHENTICATE, A, ONLY_V1),
        _m(LOGOUT, A, ONLY_V1),
        _m(AUTH_LOGIN, A, ONLY_V2),
        _m(AUTH_LOGOUT, A, ONLY_V2),
        _m(AUTH_STATUS, A, BOTH),
        _m(AUTH_STATUS_UPDATE, C, BOTH, notification=True),
        _m(PROXY_INITIALIZE, Side.PROXY, BOTH),
        _m(PROXY_SUCCESSOR, Side.PROXY, BOTH),  # a request, or a notification
        _m(PROVIDERS_LIST, A, BOTH),
        _m(PROVIDERS_SET, A, BOTH),
        _m(PROVIDERS_DISABLE, A, BOTH),
        _m(SESSION_NEW, A, BOTH),
        _m(SESSION_LOAD, A, ONLY_V1),
        _m(SESSION_RESUME, A, BOTH),
        _m(SESSION_FORK, A, BOTH),
        _m(SESSION_LIST, A, BOTH),
        _m(SESSION_DELETE, A, BOTH),
        _m(SESSION_CLOSE, A, BOTH),
        _m(SESSION_ARCHIVE, A, BOTH),
        _m(SESSION_UNARCHIVE, A, BOTH),
        _m(SESSION_SET_TITLE, A, BOTH),
        _m(SESSION_STATUS, A, BOTH),
        _m(SET_MODE, A, ONLY_V1),
        _m(SET_MODEL, A, NO_SCHEMA),  # the unstable model selector some agents still answer
        _m(SET_CONFIG_OPTION, A, BOTH),
        _m(PROMPT, A, BOTH),
        _m(CANCEL, A, BOTH, notification=True),
        _m(NES_START, A, NO_SCHEMA, former=BOTH),
        _m(NES_SUGGEST, A, NO_SCHEMA, former=BOTH),
        _m(NES_ACCEPT, A, NO_SCHEMA, notification=True, former=BOTH),
        _m(NES_REJECT, A, NO_SCHEMA, notification=True, former=BOTH),
        _m(NES_CLOSE, A, NO_SCHEMA, former=BOTH),
        _m(DOC_OPEN, A, NO_SCHEMA, notification=True, former=BOTH),
        _m(DOC_CHANGE, A, NO_SCHEMA, notification=True, former=BOTH),
        _m(DOC_CLOSE, A, NO_SCHEMA, notification=True, former=BOTH),
        _m(DOC_SAVE, A, NO_SCHEMA, notification=True, former=BOTH),
        _m(DOC_FOCUS, A, NO_SCHEMA, notification=True, former=BOTH),
        _m(UPDATE, C, BOTH, notification=True),
        _m(REQUEST_PERMISSION, C, BOTH),
        _m(FS_READ, C, ONLY_V1),
        _m(FS_WRITE, C, ONLY_V1),
        _m(TERMINAL_CREATE, C, ONLY_V1),
        _m(TERMINAL_OUTPUT, C, ONLY_V1),
        _m(TERMINAL_RELEASE, C, ONLY_V1),
        _m(TERMINAL_WAIT, C, ONLY_V1),
        _m(TERMINAL_KILL, C, ONLY_V1),
        _m(TERMINAL_CANCEL, A, ONLY_V2),
        _m(TOOL_CALL_CANCEL, A, ONLY_V2),
        _m(MCP_CONNECT, C, NO_SCHEMA, former=BOTH),
        _m(MCP_DISCONNECT, C, NO_SCHEMA, former=BOTH),
        _m(ELICITATION_CREATE, C, BOTH),
        _m(ELICITATION_COMPLETE, C, BOTH, notification=True),
        _m(MCP_MESSAGE, Side.BOTH, BOTH),  # the request is the client's to handle, the notification the agent's
        _m(CANCEL_REQUEST, Side.PROTOCOL, BOTH, notification=True),
    )
}


def methods(version: int, side: Side | None = None) -> frozenset[str]:
    """The methods a schema version defines, optionally only those one side handles."""
    return frozenset(m.name for m in METHODS.values() if version in m.versions and (side is None or m.side is side))


# The requests that open a session (their answer, or their params, name it and carry its state).
SESSION_ORIGINS = frozenset({SESSION_NEW, SESSION_LOAD, SESSION_RESUME, SESSION_FORK})
# The requests that mint a new session id (in their result), as opposed to naming one in their params.
SESSION_MINTING = frozenset({SESSION_NEW, SESSION_FORK})
# The requests whose *result* names the session (the new one, for fork and nes/start).
SESSION_IN_RESULT = SESSION_MINTING | {NES_START}
# The requests that change a session's settings between prompts.
SETTERS = (SET_MODE, SET_MODEL, SET_CONFIG_OPTION)


# -- session/update variants ----------------------------------------------------------------------------
USER_MESSAGE_CHUNK = "user_message_chunk"
AGENT_MESSAGE_CHUNK = "agent_message_chunk"
AGENT_THOUGHT_CHUNK = "agent_thought_chunk"
USER_MESSAGE = "user_message"
AGENT_MESSAGE = "agent_message"
AGENT_THOUGHT = "agent_thought"
TOOL_CALL = "tool_call"
TOOL_CALL_UPDATE = "tool_call_update"
TOOL_CALL_CONTENT_CHUNK = "tool_call_content_chunk"
PLAN = "plan"
PLAN_UPDATE = "plan_update"
PLAN_REMOVED = "plan_removed"
TERMINAL_UPDATE = "terminal_update"
TERMINAL_OUTPUT_CHUNK = "terminal_output_chunk"
STATE_UPDATE = "state_update"
CURRENT_MODE_UPDATE = "current_mode_update"
CONFIG_OPTION_UPDATE = "config_option_update"
AVAILABLE_COMMANDS_UPDATE = "available_commands_update"
SESSION_INFO_UPDATE = "session_info_update"
USAGE_UPDATE = "usage_update"
QUOTA_UPDATE = "quota_update"  # the Quotas and Limits RFD: account quota, apart from the context window
NOTICE = "notice"
COMPACTION_UPDATE = "compaction_update"
COMPACTION_SUMMARY_CHUNK = "compaction_summary_chunk"
SUBAGENT_UPDATE = "subagent_update"
SESSION_MESSAGE = "session_message"
SESSION_MESSAGE_CHUNK = "session_message_chunk"

# state_update's states (v2).
IDLE, RUNNING, REQUIRES_ACTION, UNKNOWN_STATE = "idle", "running", "requires_action", "unknown"


class Family(StrEnum):
    """What a variant is about; tables that treat a family alike key on it, the rest on the variant."""

    CHUNK = "chunk"  # a piece of a message (user, agent, thought)
    MESSAGE = "message"  # a whole-message upsert (v2)
    TOOL = "tool"
    PLAN = "plan"
    TERMINAL = "terminal"
    STATE = "state"  # session state: run state, mode, config options, commands, session info
    USAGE = "usage"  # context window and cost; quota
    COMPACTION = "compaction"
    SUBAGENT = "subagent"  # subagents and messages between sessions
    LIVE = "live"  # live-only: never part of a session's history


@dataclass(frozen=True, slots=True)
class Variant:
    name: str
    family: Family
    versions: frozenset[int]
    live_only: bool = False  # never replayed (the spec: clients need not retain it)


def _v(name: str, family: Family, versions: frozenset[int], live_only: bool = False) -> Variant:
    return Variant(name, family, versions, live_only)


VARIANTS: Mapping[str, Variant] = {
    v.name: v
    for v in (
        _v(USER_MESSAGE_CHUNK, Family.CHUNK, BOTH),
        _v(AGENT_MESSAGE_CHUNK, Family.CHUNK, BOTH),
        _v(AGENT_THOUGHT_CHUNK, Family.CHUNK, BOTH),
        _v(USER_MESSAGE, Family.MESSAGE, ONLY_V2),
        _v(AGENT_MESSAGE, Family.MESSAGE, ONLY_V2),
        _v(AGENT_THOUGHT, Family.MESSAGE, ONLY_V2),
        _v(TOOL_CALL, Family.TOOL, ONLY_V1),
        _v(TOOL_CALL_UPDATE, Family.TOOL, BOTH),
        _v(TOOL_CALL_CONTENT_CHUNK, Family.TOOL, ONLY_V2),
        _v(PLAN, Family.PLAN, ONLY_V1),
        _v(PLAN_UPDATE, Family.PLAN, BOTH),
        _v(PLAN_REMOVED, Family.PLAN, BOTH),
        _v(TERMINAL_UPDATE, Family.TERMINAL, ONLY_V2),
        _v(TERMINAL_OUTPUT_CHUNK, Family.TERMINAL, ONLY_V2),
        _v(STATE_UPDATE, Family.STATE, ONLY_V2),
        _v(CURRENT_MODE_UPDATE, Family.STATE, ONLY_V1),
        _v(CONFIG_OPTION_UPDATE, Family.STATE, BOTH),
        _v(AVAILABLE_COMMANDS_UPDATE, Family.STATE, BOTH),
        _v(SESSION_INFO_UPDATE, Family.STATE, BOTH),
        _v(USAGE_UPDATE, Family.USAGE, BOTH),
        _v(QUOTA_UPDATE, Family.USAGE, NO_SCHEMA, live_only=True),  # the RFD: live state, never replayed
        _v(NOTICE, Family.LIVE, BOTH, live_only=True),
        _v(COMPACTION_UPDATE, Family.COMPACTION, BOTH),
        _v(COMPACTION_SUMMARY_CHUNK, Family.COMPACTION, BOTH),
        _v(SUBAGENT_UPDATE, Family.SUBAGENT, BOTH),
        _v(SESSION_MESSAGE, Family.SUBAGENT, BOTH),
        _v(SESSION_MESSAGE_CHUNK, Family.SUBAGENT, BOTH),
    )
}


def variants(version: int) -> frozenset[str]:
    """The session/update variants a schema version defines."""
    return frozenset(v.name for v in VARIANTS.values() if version in v.versions)


def family(name: str) -> frozenset[str]:
    """The variants of one family (by its value, e.g. "chunk")."""
    return frozenset(v.name for v in VARIANTS.values() if v.family == name)


MESSAGE_CHUNKS = family(Family.CHUNK)
MESSAGE_UPSERTS = family(Family.MESSAGE)
TOOL_VARIANTS = family(Family.TOOL)
LIVE_ONLY = frozenset(v.name for v in VARIANTS.values() if v.live_only)
V1_ONLY = variants(V1) - variants(V2)  # v2 treats these as unknown (custom or future) variants
V2_ONLY = variants(V2) - variants(V1)

# -- tables -------------------------------------------------------------------------------------------------
T = TypeVar("T")
TABLES: dict[str, Mapping[str, object]] = {}


def variant_table(name: str, rows: dict[str, T]) -> dict[str, T]:
    """Register a table keyed by variant (a row's value None: deliberately ignored), so the vocabulary's test
    can name the tables a new variant is missing from. Returns the rows unchanged."""
    TABLES[name] = rows
    return rows
