"""The Prompt Lifecycle page's MUSTs and SHOULDs that traffic can show, per session (sans-I/O).

The engine calls one hook per relevant message, in recorded order; each hook returns nothing and reports
through `emit`. v2 rules (states, messageIds, turns) run only on v2 connections; the cancellation answer
to permission requests, compaction and notice rules hold for v1 as well, and v1 confirms a cancellation
in the prompt's response (stopReason `cancelled`) where v2 sends an idle state_update.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import vocab
from .rules import CROSSING_WINDOW, Finding, finding

STOP_REASONS = frozenset({"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"})
MESSAGE_VARIANTS = vocab.MESSAGE_CHUNKS | vocab.MESSAGE_UPSERTS | {vocab.SESSION_MESSAGE, vocab.SESSION_MESSAGE_CHUNK}
_USER = frozenset({vocab.USER_MESSAGE, vocab.USER_MESSAGE_CHUNK})
_HISTORY = MESSAGE_VARIANTS - {vocab.SESSION_MESSAGE, vocab.SESSION_MESSAGE_CHUNK}
_CHUNK_OF = {
    vocab.USER_MESSAGE_CHUNK: vocab.USER_MESSAGE,
    vocab.AGENT_MESSAGE_CHUNK: vocab.AGENT_MESSAGE,
    vocab.AGENT_THOUGHT_CHUNK: vocab.AGENT_THOUGHT,
    vocab.SESSION_MESSAGE_CHUNK: vocab.SESSION_MESSAGE,
}
# Output of foreground work, keyed by the id it updates (for "no content updates after the cancelled idle").
_OUTPUT_IDS = {
    vocab.AGENT_MESSAGE: "messageId",
    vocab.AGENT_MESSAGE_CHUNK: "messageId",
    vocab.AGENT_THOUGHT: "messageId",
    vocab.AGENT_THOUGHT_CHUNK: "messageId",
    vocab.TOOL_CALL_UPDATE: "toolCallId",
    vocab.TOOL_CALL_CONTENT_CHUNK: "toolCallId",
    vocab.TOOL_CALL: "toolCallId",
    vocab.TERMINAL_UPDATE: "terminalId",
    vocab.TERMINAL_OUTPUT_CHUNK: "terminalId",
}
_TOOL = vocab.TOOL_VARIANTS
# CROSSING_WINDOW (rules.py): a turn that ends the ordinary way this soon (seconds, recorder clock) after the
# editor's session/cancel crossed it on the wire: the agent had finished before the cancel reached it. A
# warning, not an error. 100 ms covers a round trip through the relay's pipes on a loaded machine.
_TERMINAL = frozenset({"completed", "failed", "cancelled"})


@dataclass(slots=True)
class _Permission:
    frame: int
    requires_seen: bool
    must_cancel: bool = False


@dataclass
class _Session:
    state: str | None = None
    turn_open: bool = False
    turn_frame: int = 0
    saw_running: bool = False
    cancel_frame: int | None = None  # session/cancel sent during the open turn, not yet confirmed
    cancel_time: float | None = None
    cancel_by: str = vocab.CANCEL  # or session/close (closing cancels the session's work)
    turn_ids: set[str] = field(default_factory=set)  # output ids of the open turn
    cancelled_ids: set[str] = field(default_factory=set)  # output ids of the cancelled turn, watched after
    after_cancel_reported: bool = False
    awaiting_resume: bool = False  # a permission was answered while requires_action
    accepted: dict[str, int] = field(default_factory=dict)  # messageId -> acceptance frame
    reported: set[str] = field(default_factory=set)  # user messageIds the agent reported
    permissions: dict[Any, _Permission] = field(default_factory=dict)
    compactions: dict[str, str] = field(default_factory=dict)  # id -> open | ended
    replaying: int = 0
    quiet: int = 0  # session/resume without replay, unanswered
    after_replay: bool = False  # the replay's answer came; no prompt since
    after_replay_reported: bool = False
    replay_whole: set[str] = field(default_factory=set)  # messageIds of whole-message updates in this replay
    replay_id_reported: bool = False


class Lifecycle:
    """Per-session Prompt Lifecycle state of one connection."""

    def __init__(self, emit: Callable[[Finding], None]) -> None:
        self.emit = emit
        self.v2 = False
        self.sessions: dict[str, _Session] = {}
        self.now: float | None = None  # the current frame's recorder time, when known
        self.created: set[str] = set()  # sessions session/new created on this connection (their whole history)

    def _s(self, sid: str) -> _Session:
        s = self.sessions.get(sid)
        if s is None:
            s = self.sessions[sid] = _Session()
        return s

    def _report(self, rule: str, frame: int | None, sid: str | None, message: str, topic: str = "") -> None:
        self.emit(finding(rule, frame, sid, message, topic=topic))

    # -- prompts --------------------------------------------------------------------------------------------
    def prompt_request(self, frame: int, sid: str) -> None:
        s = self._s(sid)
        s.after_replay = False
        if not self.v2:  # v1: the turn lasts until the prompt's response
            s.turn_open = True
            s.cancelled_ids = set()
            return
        if not s.turn_open:
            s.turn_open = True
            s.turn_frame = frame
            s.saw_running = s.state in (vocab.RUNNING, vocab.REQUIRES_ACTION)
            s.turn_ids = set()
        s.cancelled_ids = set()
        s.after_cancel_reported = False

    def prompt_answer(self, frame: int, sid: str, result: Any, is_error: bool) -> None:
        s = self._s(sid)
        if not self.v2:
            self._v1_turn_end(frame, sid, s, result, is_error)
            return
        if is_error:
            if s.turn_open and not s.saw_running:
                s.turn_open = False  # rejected before insertion: no foreground work started
            return
        mid = result.get("messageId") if isinstance(result, dict) else None
        if mid is None:
            if not isinstance(result, dict) or "messageId" not in result:
                self._report("lifecycle.accept-message-id", frame, sid, "session/prompt result has no messageId")
            return
        if not isinstance(mid, str):
            return  # the schema reports the type
        if not mid:
            self._report("patch.ids", frame, sid, "session/prompt result has an empty messageId", vocab.PROMPT)
        if mid in s.accepted:
            self._report(
                "lifecycle.distinct-message-ids",
                frame,
                sid,
                f"messageId {mid!r} was already returned for the prompt accepted at frame {s.accepted[mid]}",
            )
        else:
            s.accepted[mid] = frame

    def _v1_turn_end(self, frame: int, sid: str, s: _Session, result: Any, is_error: bool) -> None:
        """v1: the response ends the turn; after session/cancel it carries stopReason `cancelled`."""
        s.cancelled_ids = set()
        if s.cancel_frame is not None:
            reason = result.get("stopReason") if isinstance(result, dict) else None
            if is_error or reason != "cancelled":
                got = "an error response" if is_error else f"stopReason {reason!r}"
                if not is_error and self._crossed(frame, sid, s, got):
                    pass
                else:
                    self._report(
                        "lifecycle.cancel-response",
                        frame,
                        sid,
                        f"turn cancelled by {s.cancel_by} at frame {s.cancel_frame} is answered with {got}, "
                        "not stopReason `cancelled`",
                        s.cancel_by,
                    )
            else:
                s.cancelled_ids = {"*"}  # v1 output has no ids: any content update for the session is late
                s.after_cancel_reported = False
        s.turn_open = False
        s.cancel_frame = None

    def _crossed(self, frame: int, sid: str, s: _Session, got: str) -> bool:
        """The turn ended (not cancelled) within CROSSING_WINDOW of the cancel: report a crossing, not an error."""
        if self.now is None or s.cancel_time is None or self.now - s.cancel_time > CROSSING_WINDOW + 1e-9:
            return False
        gap = (self.now - s.cancel_time) * 1000
        self._report(
            "lifecycle.cancel-crossed",
            frame,
            sid,
            f"the turn ended with {got} {gap:.1f} ms after {s.cancel_by} (frame {s.cancel_frame}): "
            "the two crossed on the wire",
            s.cancel_by,
        )
        return True

    def cancel(self, frame: int, sid: str, by: str = vocab.CANCEL) -> None:
        """session/cancel, or session/close (which cancels the session's work as if cancelled first)."""
        s = self._s(sid)
        for p in s.permissions.values():
            p.must_cancel = True
        if s.turn_open and s.cancel_frame is None:
            s.cancel_frame = frame
            s.cancel_time = self.now
            s.cancel_by = by

    # -- permissions ----------------------------------------------------------------------------------------
    def permission_request(self, frame: int, sid: str, key: Any) -> None:
        s = self._s(sid)
        s.permissions[key] = _Permission(frame, s.state == "requires_action")

    def permission_answer(self, frame: int, sid: str, key: Any, message: dict[str, Any]) -> None:
        s = self._s(sid)
        p = s.permissions.pop(key, None)
        if p is None:
            return
        if p.must_cancel:
            result = message.get("result")
            outcome = result.get("outcome") if isinstance(result, dict) else None
            kind = outcome.get("outcome") if isinstance(outcome, dict) else None
            if kind != "cancelled":
                got = "an error response" if "error" in message else f"outcome {kind!r}"
                self._report(
                    "lifecycle.permission-cancelled",
                    frame,
                    sid,
                    f"permission request of frame {p.frame} was pending at session/cancel but got {got}, not `cancelled`",
                )
        if self.v2 and not p.requires_seen and s.cancel_frame is None:
            self._report(
                "lifecycle.requires-action",
                frame,
                sid,
                f"permission request of frame {p.frame} was pending without a state_update `requires_action`",
            )
        if s.state == "requires_action":
            s.awaiting_resume = True

    # -- replay ---------------------------------------------------------------------------------------------
    def replay(self, sid: str, delta: int, *, answered: bool = False) -> None:
        """A session/load or replaying session/resume sent (+1) or answered (-1; `answered`: successfully)."""
        s = self._s(sid)
        if delta > 0 and not s.replaying:
            s.replay_whole = set()
        s.replaying = max(0, s.replaying + delta)
        if answered and not s.replaying:
            s.after_replay = True
            s.after_replay_reported = False

    def quiet_resume(self, sid: str, delta: int) -> None:
        s = self._s(sid)
        s.quiet = max(0, s.quiet + delta)

    def _history(self, frame: int, sid: str, s: _Session, tag: str, update: dict[str, Any]) -> None:
        """History rules: none before a quiet resume's answer, none after a replay's, ids kept, chunks after
        their whole message."""
        if s.quiet and not s.replaying:
            s.quiet = 0  # once per resume
            self._report(
                "lifecycle.resume-history",
                frame,
                sid,
                f"{tag} before the answer to a session/resume that asked for no replay",
            )
        elif s.after_replay and tag in _USER and not s.after_replay_reported:
            s.after_replay_reported = True
            self._report(
                "lifecycle.replay-after-answer",
                frame,
                sid,
                f"{tag} after the answer that ended the history replay (replay comes before the answer)",
            )
        if not (s.replaying and self.v2):
            return
        mid = update.get("messageId")
        if not isinstance(mid, str):
            return
        whole = _CHUNK_OF.get(tag)
        if whole is None:
            s.replay_whole.add(mid)
        elif mid not in s.replay_whole:
            self._report(
                "lifecycle.replay-chunk",
                frame,
                sid,
                f"{tag} for {mid!r} during replay before its whole {whole} update",
            )
            s.replay_whole.add(mid)  # once per message
        if tag in _USER and sid in self.created and mid not in s.accepted and not s.replay_id_reported:
            s.replay_id_reported = True
            self._report(
                "lifecycle.replay-message-id",
                frame,
                sid,
                f"replayed {tag} {mid!r} is not a messageId any prompt of this session returned",
            )

    # -- session/update -------------------------------------------------------------------------------------
    def update(self, frame: int, sid: str, tag: str, update: dict[str, Any]) -> None:
        """The rules of one update: history rules for messages, then its variant's row of `UPDATE_RULES`."""
        s = self._s(sid)
        if tag in _HISTORY and (s.quiet or s.after_replay or s.replaying):
            self._history(frame, sid, s, tag, update)
        rule = UPDATE_RULES.get(tag)
        if rule is not None:
            rule(self, frame, sid, s, tag, update)

    def _notice(self, frame: int, sid: str, s: _Session, tag: str, update: dict[str, Any]) -> None:
        if s.replaying:
            self._report("lifecycle.notice-replay", frame, sid, "notice sent while the session's history is replayed")

    def _state_update(self, frame: int, sid: str, s: _Session, tag: str, update: dict[str, Any]) -> None:
        if self.v2:  # v1 has no states; its turns end at the prompt's answer
            self._state(frame, sid, s, update)

    def _output(self, frame: int, sid: str, s: _Session, tag: str, update: dict[str, Any]) -> None:
        """Output of foreground work: messageIds (v2), and nothing of a cancelled turn after its end."""
        if not self.v2:
            if s.cancelled_ids and not (s.turn_open or s.replaying or s.after_cancel_reported) and tag in _OUTPUT_IDS:
                s.after_cancel_reported = True
                self._report(
                    "lifecycle.after-cancel",
                    frame,
                    sid,
                    f"{tag} after the response that confirmed the cancellation (v1 sends pending updates first)",
                )
            return
        if tag in MESSAGE_VARIANTS:
            mid = update.get("messageId")
            if mid is None:
                self._report("lifecycle.update-message-id", frame, sid, f"{tag} has no messageId")
            elif tag in _USER and isinstance(mid, str):
                s.reported.add(mid)
        id_field = _OUTPUT_IDS.get(tag)
        if id_field is not None:
            self._output_id(frame, sid, s, tag, update.get(id_field))

    def _output_id(self, frame: int, sid: str, s: _Session, tag: str, ident: Any) -> None:
        if isinstance(ident, str):
            if s.turn_open:
                s.turn_ids.add(ident)
            elif ident in s.cancelled_ids and not s.after_cancel_reported:
                s.after_cancel_reported = True
                self._report(
                    "lifecycle.after-cancel",
                    frame,
                    sid,
                    f"{tag} for {ident!r} of the cancelled turn after the idle that confirmed the cancellation",
                )
        if s.awaiting_resume and s.state == vocab.REQUIRES_ACTION and tag in _TOOL:
            s.awaiting_resume = False
            self._report(
                "lifecycle.resume-running",
                frame,
                sid,
                f"{tag} after the permission answer while the session still reports `requires_action`",
            )

    def _state(self, frame: int, sid: str, s: _Session, update: dict[str, Any]) -> None:
        state = update.get("state")
        if state == vocab.RUNNING:
            s.saw_running = True
            s.awaiting_resume = False
        elif state == vocab.REQUIRES_ACTION:
            for p in s.permissions.values():
                p.requires_seen = True
        elif state == vocab.IDLE:
            self._idle(frame, sid, s, update.get("stopReason"))
        s.state = state if isinstance(state, str) else None

    def _idle(self, frame: int, sid: str, s: _Session, reason: Any) -> None:
        if isinstance(reason, str) and reason not in STOP_REASONS and not reason.startswith("_"):
            self._report(
                "lifecycle.custom-stop-reason",
                frame,
                sid,
                f"stop reason {reason!r} is not standard; custom ones begin with `_`",
                "cancelled" if s.cancel_frame is not None else "",
            )
        if not s.turn_open:
            return
        if not s.saw_running:
            self._report("lifecycle.running", frame, sid, "the turn ends but never reported state `running`")
        if reason is None:
            self._report("lifecycle.idle-stop-reason", frame, sid, "idle ends the prompt turn without a stopReason")
        if s.cancel_frame is not None:
            if reason != "cancelled":
                if not self._crossed(frame, sid, s, f"stopReason {reason!r}"):
                    self._report(
                        "lifecycle.cancel-idle",
                        frame,
                        sid,
                        f"turn cancelled by {s.cancel_by} at frame {s.cancel_frame} ends with stopReason "
                        f"{reason!r}, not `cancelled`",
                        s.cancel_by if s.cancel_by == vocab.SESSION_CLOSE else "other-reason",
                    )
            else:
                s.cancelled_ids = s.turn_ids
                s.after_cancel_reported = False
        s.turn_open = False
        s.cancel_frame = None
        s.awaiting_resume = False

    def _compaction(self, frame: int, sid: str, s: _Session, tag: str, update: dict[str, Any]) -> None:
        cid = update.get("compactionId")
        if not isinstance(cid, str):
            return  # the schema reports it
        seen = s.compactions.get(cid)
        if tag == vocab.COMPACTION_SUMMARY_CHUNK:
            if seen is None:
                self._report(
                    "lifecycle.compaction-order", frame, sid, f"summary chunk for {cid!r} before its compaction_update"
                )
            elif seen == "ended":
                self._report(
                    "lifecycle.compaction-order", frame, sid, f"summary chunk for {cid!r} after its terminal update"
                )
            return
        status = update.get("status")
        status = status if isinstance(status, str) else None  # the schema reports another type
        summary = update.get("summary")
        if isinstance(summary, list) and summary and status != "completed":
            self._report(
                "lifecycle.compaction-fields",
                frame,
                sid,
                f"compaction {cid!r} carries a summary with status {status!r}",
            )
        if update.get("error") is not None and status != "failed":
            self._report(
                "lifecycle.compaction-fields", frame, sid, f"compaction {cid!r} carries an error with status {status!r}"
            )
        if s.replaying:  # replay sends materialized entries: terminal first, possibly again
            s.compactions[cid] = "ended" if status in _TERMINAL else "open"
            return
        if status == "in_progress":
            if seen == "ended":
                self._report(
                    "lifecycle.compaction-reuse", frame, sid, f"compactionId {cid!r} reused after its compaction ended"
                )
            s.compactions[cid] = "open"
        elif status in _TERMINAL:
            if seen == "ended":
                self._report(
                    "lifecycle.compaction-end", frame, sid, f"compaction {cid!r} ends a second time ({status})"
                )
            s.compactions[cid] = "ended"

    # -- the end of the recording ---------------------------------------------------------------------------
    def end(self) -> None:
        for sid, s in self.sessions.items():
            for mid, frame in s.accepted.items():
                if mid not in s.reported:
                    self._report(
                        "lifecycle.user-message",
                        frame,
                        sid,
                        f"accepted user message {mid!r} is never reported by a user_message or user_message_chunk",
                    )
            if s.cancel_frame is not None and self.v2:
                self._report(
                    "lifecycle.cancel-idle",
                    s.cancel_frame,
                    sid,
                    f"{s.cancel_by} is never confirmed by an idle state_update with stopReason `cancelled`",
                    s.cancel_by,
                )
            elif self.v2 and s.turn_open and s.saw_running and s.state in (vocab.RUNNING, vocab.REQUIRES_ACTION):
                self._report(
                    "lifecycle.turn-open",
                    s.turn_frame,
                    sid,
                    f"the turn begun at frame {s.turn_frame} is still {s.state} when the connection ends "
                    "(no idle state_update)",
                    s.state,
                )


_Rule = Callable[[Lifecycle, int, str, _Session, str, dict[str, Any]], None]
_OUTPUT: _Rule = Lifecycle._output
# variant -> its lifecycle rules (None: the page sets none for it).
UPDATE_RULES: dict[str, _Rule | None] = vocab.variant_table(
    "check.lifecycle: prompt lifecycle rules",
    {
        **dict.fromkeys(MESSAGE_VARIANTS, _OUTPUT),
        **dict.fromkeys(_OUTPUT_IDS, _OUTPUT),
        vocab.NOTICE: Lifecycle._notice,
        vocab.COMPACTION_UPDATE: Lifecycle._compaction,
        vocab.COMPACTION_SUMMARY_CHUNK: Lifecycle._compaction,
        vocab.STATE_UPDATE: Lifecycle._state_update,
        vocab.PLAN: None,
        vocab.PLAN_UPDATE: None,
        vocab.PLAN_REMOVED: None,
        vocab.CURRENT_MODE_UPDATE: None,
        vocab.CONFIG_OPTION_UPDATE: None,
        vocab.AVAILABLE_COMMANDS_UPDATE: None,
        vocab.SESSION_INFO_UPDATE: None,
        vocab.USAGE_UPDATE: None,
        vocab.QUOTA_UPDATE: None,
        vocab.SUBAGENT_UPDATE: None,
    },
)
