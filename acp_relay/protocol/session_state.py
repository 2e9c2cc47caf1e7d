"""What the materializer folds a session into: its events in, its entries, turns and session-level state out.

Plain data (no I/O): `materialize.py` builds it, `history.py` turns it back into updates for replay,
`render/transcript.py` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import vocab

# The message entities: an entry kind is its whole-message variant's name.
MESSAGE_KINDS = (vocab.USER_MESSAGE, vocab.AGENT_MESSAGE, vocab.AGENT_THOUGHT, vocab.SESSION_MESSAGE)
# `null` means "not supplied" here and leaves the known value intact (ACP Prompt Lifecycle (v2 draft), section "Session-directed messages")
STICKY: dict[str, frozenset[str]] = {vocab.SESSION_MESSAGE: frozenset({"senderSessionId", "recipientSessionId"})}


@dataclass
class Event:
    """One recorded JSON-RPC message as the recorder stored it."""

    seq: int  # recorded order across both directions
    ts: float  # wall-clock unix seconds
    direction: str  # "c2a" (editor->agent) or "a2c" (agent->editor)
    message: dict  # one parsed JSON-RPC message (a batch is fed as several Events)
    request: dict | None = None  # for a response: the request message it answers
    frame_id: int | None = None
    raw: bytes | None = None  # exact bytes of the frame, if available


@dataclass
class Entry:
    """One timeline entity; `fields` holds its materialized payload fields."""

    kind: str  # user_message, agent_message, agent_thought, session_message, tool_call, terminal,
    #            plan, compaction, subagent, notice, quota, permission, client_request, unknown, invalid
    id: str  # messageId / toolCallId / terminalId / planId / compactionId / child sessionId, or "#n"
    first_seq: int
    first_ts: float
    last_seq: int
    variant: str | None = None  # the last sessionUpdate (or method) applied
    fields: dict[str, Any] = field(default_factory=dict)
    turn: int | None = None  # index of the turn during which it was first seen
    live_only: bool = False  # notices and quota snapshots: shown, never replayed
    replayable: bool = True  # False for requests to the client and malformed updates
    removed: bool = False  # plans after plan_removed
    synthetic_id: bool = False  # v1 chunk message without messageId: id invented here
    output: bytearray | None = None  # terminal bytes (None = unknown/cleared)
    raw_update: Any = None  # unknown/invalid/notice: the original update object
    raw: bytes | None = None  # the frame bytes of raw_update, if given
    problems: list[str] = field(default_factory=list)

    @property
    def uid(self) -> str:
        """Unique across kinds (ids are only unique per kind)."""
        return f"{self.kind}:{self.id}"

    @property
    def content(self) -> list:
        value = self.fields.get("content")
        return value if isinstance(value, list) else []

    @property
    def exited(self) -> bool:
        """A concrete exitStatus object marks a terminal exited, even without a code."""
        return isinstance(self.fields.get("exitStatus"), dict)


@dataclass
class Turn:
    """A prompt turn: from the session/prompt request to its end (v1 response, v2 idle)."""

    index: int  # 1-based, as shown
    prompt: list
    start_seq: int
    start_ts: float
    request_id: Any = None
    timeline_pos: int = 0  # len(entries) when the turn started
    end_seq: int | None = None
    end_ts: float | None = None
    stop_reason: str | None = None  # "error" when the prompt got an error response
    error: Any = None
    usage: Any = None  # v1-unstable PromptResponse.usage or v2 idle state_update.usage
    accepted_ts: float | None = None  # v2: the prompt response (acceptance)
    user_message_id: str | None = None  # v2 PromptResponse.messageId (legacy userMessageId)
    cancel_ts: float | None = None  # first session/cancel during the turn
    first_agent_message_ts: float | None = None
    entry_ids: list[str] = field(default_factory=list)  # Entry.uid of entities first seen in it

    @property
    def ended(self) -> bool:
        return self.end_seq is not None

    @property
    def duration(self) -> float | None:
        return elapsed(self.start_ts, self.end_ts)

    @property
    def time_to_first_message(self) -> float | None:
        return elapsed(self.start_ts, self.first_agent_message_ts)


@dataclass
class SessionState:
    """The folded state of one session."""

    protocol_version: int = 1
    entries: list[Entry] = field(default_factory=list)  # timeline, by first sight
    turns: list[Turn] = field(default_factory=list)
    plans: dict[str, dict] = field(default_factory=dict)  # current plans by planId (v1 plan = "main")
    commands: list | None = None
    mode: str | None = None
    available_modes: list | None = None
    config_options: list | None = None
    info: dict[str, Any] = field(default_factory=dict)  # title, updatedAt, _meta (patched)
    usage: dict | None = None  # last usage_update snapshot
    run_state: str | None = None  # running / idle / requires_action / unknown / other
    stop_reason: str | None = None  # of the last stop
    problems: list[str] = field(default_factory=list)  # what was wrong with the recording
    # Exceptions Materializer.feed's safety net caught: a materializer bug, never the recording's fault (the
    # event is kept as an invalid entry all the same). Tests assert this stays empty.
    errors: list[str] = field(default_factory=list)
    # Updates a session/load (or resume from start) re-sent for history this state already holds.
    replayed_updates: int = 0
    by_key: dict[tuple[str, str], Entry] = field(default_factory=dict, repr=False)

    def entry(self, kind: str, id: str) -> Entry | None:
        return self.by_key.get((kind, id))


def elapsed(start: Any, end: Any) -> float | None:
    """end - start in seconds, None when either is missing or not a number."""
    try:
        return None if end is None else float(end) - float(start)
    except (TypeError, ValueError):
        return None
