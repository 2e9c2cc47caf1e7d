"""The checker's JSON-RPC layer: framing, message shape, ids, batches, and pairing answers with requests.

engine.Checker builds the ACP rules on this class: it is handed each request, notification and answer (with
the request it answers) through the `_on_*` hooks, after the rules of JSON-RPC itself have been applied.
Requests and answers are paired by `jsonrpc.Correlator`, per direction (each side numbers its own requests);
the checker computes each message's key once (Correlator.key, answer_key) and uses the Correlator's map
with it, since it also marks the requests answered (a second answer is a finding).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from .. import vocab
from ..jsonrpc import A2C, C2A, OPPOSITE, Correlator, loads, short_json
from ..words import counted
from .rules import Finding, finding

_short = partial(short_json, limit=40)  # values in rpc.* messages: shorter than schema ones

MISSING: Any = object()  # params absent (not null)
# Messages that set up or move the conversation: a sender should not batch them (v2 transports).
_UNBATCHED = frozenset({vocab.INITIALIZE, vocab.AUTH_LOGIN, vocab.SESSION_NEW, vocab.SESSION_RESUME, vocab.PROMPT})


@dataclass(slots=True)
class Pending:
    """A request waiting for its answer."""

    frame: int
    method: str
    session: str | None
    params: Any
    batch: int | None = None  # the frame of the batch it came in


class RpcChecks:
    """The JSON-RPC rules over one connection's frames; the `_on_*` hooks are the ACP layer's."""

    def __init__(self) -> None:
        self.out: list[Finding] = []
        self.version: int | None = None  # the negotiated ACP version (the engine sets it; batches are v2's)
        self.requests: Correlator[Pending] = Correlator()
        self.answered: set[tuple[str, Any]] = set()  # Correlator keys of answered requests
        self.batch_frame: int | None = None  # the batch array being read, if any
        self.empty_batch: dict[str, int] = {}  # direction owing the answer to an empty batch -> its frame
        self.batch_replies: dict[int, int] = {}  # batch frame -> frame of the array answering it (-1 reported)
        # Which kit requirement a finding breaks (tck.requirement): each side's last notification, and the
        # frame of each side's first error answer.
        self.notified: dict[str, str] = {}
        self.first_error: dict[str, int] = {}

    # -- hooks: what the messages mean --------------------------------------------------------------------
    def _on_request(
        self, frame: int, direction: str, m: dict[str, Any], method: str, params: Any, sid: str | None, valid_id: bool
    ) -> None:
        raise NotImplementedError

    def _on_notification(self, frame: int, direction: str, method: str, params: Any) -> None:
        raise NotImplementedError

    def _on_answer(self, frame: int, direction: str, m: dict[str, Any], p: Pending, is_error: bool) -> None:
        raise NotImplementedError

    # -- framing and JSON-RPC -----------------------------------------------------------------------------
    def _add(
        self, rule: str, frame: int | None, session: str | None, message: str, spec: str | None = None, topic: str = ""
    ) -> None:
        self.out.append(finding(rule, frame, session, message, spec, topic))

    def _frame(self, frame: int, direction: str, raw: bytes, unterminated: bool) -> None:
        if unterminated:
            self._add("rpc.unterminated", frame, None, "the stream ended inside this line (no final LF)")
        body = raw
        if body.endswith(b"\r"):
            body = body[:-1]
            if not _blank(body):
                self._add("rpc.cr-line", frame, None, "line ends in CR LF")
        if _blank(body):
            self._add(
                "rpc.blank-line",
                frame,
                None,
                "blank line" if not raw else f"line of whitespace only ({counted(len(raw), 'byte')})",
            )
            return
        try:
            msg = loads(body)
        except UnicodeDecodeError as exc:
            self._add("rpc.not-utf8", frame, None, f"invalid UTF-8 at byte {exc.start}")
            return
        except (ValueError, TypeError, OverflowError) as exc:
            self._add("rpc.not-json", frame, None, f"not JSON ({str(exc)[:60]}): {_preview(body)}")
            return
        if isinstance(msg, list):
            if not msg:
                self._add("rpc.batch-empty", frame, None, "empty batch array")
                self.empty_batch[OPPOSITE.get(direction, A2C)] = frame  # its answer: one error object
                return
            sent = self.empty_batch.pop(direction, None)
            if sent is not None and all(type(m) is dict and "method" not in m for m in msg):
                self._add(
                    "rpc.batch-empty-answer",
                    frame,
                    None,
                    f"the empty batch of frame {sent} is answered with an array, not one Invalid Request error",
                )
            if self.version == 1:
                self._add("rpc.batch-v1", frame, None, f"batch of {counted(len(msg), 'message')} on a v1 connection")
            held = sorted(
                {
                    m["method"]
                    for m in msg
                    if type(m) is dict and type(m.get("method")) is str and m["method"] in _UNBATCHED
                }
            )
            if held:
                self._add("rpc.batch-lifecycle", frame, None, f"{', '.join(held)} sent inside a batch")
            self.batch_frame = frame
            for member in msg:
                self._message(frame, direction, member)
            self.batch_frame = None
        else:
            if self.empty_batch and type(msg) is dict and msg.get("id", 0) is None:
                self.empty_batch.pop(direction, None)  # the single error object that answers it
            self._message(frame, direction, msg)

    def _id_ok(self, frame: int, m: dict[str, Any], request: bool) -> bool:
        rpc_id = m.get("id")
        if rpc_id is None or type(rpc_id) is str or type(rpc_id) is int:
            if rpc_id is None and request:
                self._add("rpc.id-discouraged", frame, None, "request id is null")
            return True
        if type(rpc_id) is float:
            if request and not rpc_id.is_integer():
                self._add("rpc.id-discouraged", frame, None, f"request id {rpc_id!r} has a fractional part")
            return True
        self._add("rpc.id-type", frame, None, f"id {_short(rpc_id)} is a {_json_type(rpc_id)}, not a string or number")
        return False

    def _message(self, frame: int, direction: str, m: Any) -> None:
        if type(m) is not dict:
            self._add("rpc.invalid", frame, None, f"a JSON {_json_type(m)} is not a JSON-RPC message")
            return
        if m.get("jsonrpc") != "2.0":
            got = f"jsonrpc {_short(m['jsonrpc'])}" if "jsonrpc" in m else "no jsonrpc member"
            self._add("rpc.version", frame, None, f'{got}; must be "2.0"')
        if "method" in m:
            method = m["method"]
            if type(method) is not str:
                self._add("rpc.invalid", frame, None, f"method {_short(method)} is not a string")
                return
            params = m.get("params", MISSING)
            if params is not MISSING and type(params) is not dict and type(params) is not list:
                self._add("rpc.params-type", frame, None, f"params is a {_json_type(params)}")
            if "id" in m:
                self._request(frame, direction, m, method, params)
            else:
                self.notified[direction] = method
                self._on_notification(frame, direction, method, params)
        elif "result" in m or "error" in m:
            self._response(frame, direction, m)
        else:
            self._add("rpc.invalid", frame, None, "an object with neither method nor result/error")

    def _request(self, frame: int, direction: str, m: dict[str, Any], method: str, params: Any) -> None:
        valid_id = self._id_ok(frame, m, True)
        sid = params.get("sessionId") if type(params) is dict else None
        sid = sid if type(sid) is str else None
        if valid_id:
            rpc_id = m.get("id")
            key = Correlator.key(direction, rpc_id)  # once: the request's map, its answered mark
            first = self.requests.pending.get(key)
            if first is not None:
                self._add(
                    "rpc.id-reused",
                    frame,
                    sid,
                    f"id {_short(rpc_id)} is still pending for {first.method} (frame {first.frame})",
                )
            self.requests.pending[key] = Pending(frame, method, sid, params, self.batch_frame)
            self.answered.discard(key)
        self._on_request(frame, direction, m, method, params, sid, valid_id)

    def _response(self, frame: int, direction: str, m: dict[str, Any]) -> None:
        has_result, has_error = "result" in m, "error" in m
        if has_result and has_error:
            self._add("rpc.result-and-error", frame, None, "response has both result and error")
        if "id" not in m:
            self._add("rpc.invalid", frame, None, "response without an id")
            return
        if has_error:
            err = m["error"]
            if type(err) is not dict or type(err.get("code")) is not int or type(err.get("message")) is not str:
                self._add(
                    "rpc.error-object", frame, None, f"error {_short(err)} needs an integer code and a string message"
                )
            elif not err["message"].strip() or "\n" in err["message"].strip():
                how = "empty" if not err["message"].strip() else "more than one line"
                self._add("rpc.error-message", frame, None, f"error {err['code']}: the message is {how}")
        if not self._id_ok(frame, m, False):
            return
        rpc_id = m.get("id")
        key = Correlator.answer_key(direction, rpc_id)
        p = self.requests.pending.pop(key, None)  # Correlator.answer, its key kept for the answered mark
        if p is None:
            if key in self.answered:
                self._add("rpc.answered-twice", frame, None, f"request {_short(rpc_id)} was already answered")
            elif rpc_id is None:
                if not has_error:
                    topic = "batch" if self.batch_frame is not None else self.notified.get(OPPOSITE[direction], "")
                    self._add(
                        "rpc.notification-answered",
                        frame,
                        None,
                        "a result with id null answers no request",
                        topic=topic,
                    )
            else:
                self._add(
                    "rpc.unknown-id", frame, None, f"no pending request of the other side has id {_short(rpc_id)}"
                )
            return
        self.answered.add(key)
        if has_error:
            self.first_error.setdefault(direction, frame)
        if p.batch is not None:
            self._batch_answer(frame, p)
        self._on_answer(frame, direction, m, p, has_error)

    def _batch_answer(self, frame: int, p: Pending) -> None:
        """Answers to one batch's requests come together in one array (SHOULD): once per batch."""
        assert p.batch is not None
        replied = self.batch_replies.get(p.batch)
        if self.batch_frame is None or (replied is not None and replied != frame):
            if replied != -1:
                self.batch_replies[p.batch] = -1  # reported
                how = "alone" if self.batch_frame is None else "in a second array"
                self._add(
                    "rpc.batch-reply",
                    frame,
                    None,
                    f"the answer to {p.method} of the batch at frame {p.batch} comes {how}, not with the others",
                )
        elif replied is None:
            self.batch_replies[p.batch] = frame

    def _unanswered(self) -> None:
        """The recording is over: every request still pending was never answered."""
        for (direction, _), p in sorted(self.requests.pending.items(), key=lambda kv: kv[1].frame):
            side = "editor" if direction == C2A else "agent"
            erred = self.first_error.get(OPPOSITE[direction], p.frame) < p.frame
            topic = p.method if p.method.startswith("_") or not erred else "after-error"
            self._add(
                "protocol.unanswered", p.frame, p.session, f"{p.method} from the {side} was never answered", topic=topic
            )


def _blank(body: bytes) -> bool:
    """Empty or whitespace only, without copying a long line (a message starts with `{` or `[`)."""
    return not body or (body[:1].isspace() and not body.strip())


def _preview(body: bytes, limit: int = 40) -> str:
    """The start of a line that is not JSON, as a JSON string (render/ escapes it for the terminal)."""
    text = body[:limit].decode("utf-8", "replace")
    return short_json(text + ("..." if len(body) > limit else ""), limit + 8)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    names: dict[type, str] = {str: "string", list: "array", dict: "object"}
    return names.get(type(value), type(value).__name__)
