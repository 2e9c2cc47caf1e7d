"""The checker: fed one connection's frames in recorded order, it reports every rule they break (sans-I/O).

    checker = Checker()
    for frame in frames:
        findings += checker.feed(frame_id, direction, raw, unterminated=..., mono=...)
    findings += checker.end(connection_ended=True)

`mono` (the recorder's monotonic clock, seconds) is optional: with it, a turn that ends the ordinary way just
after the editor's session/cancel is told apart as a crossing (lifecycle.CROSSING_WINDOW).

Two layers: rpc.RpcChecks applies JSON-RPC's rules and pairs each answer with its request (per direction:
each side numbers its own requests); Checker, built on it, applies ACP's, so a response is validated
against the method of the request it answers. Until `initialize` has been answered only the JSON-RPC
checks run; an answer that is no version this checker knows is reported, and the rest is judged by the
version the initialize messages show (schema.shown_version). The frames' order: order.causal_order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import partial
from typing import Any

from .. import vocab
from ..jsonrpc import A2C, C2A, Correlator, short_json
from .lifecycle import Lifecycle
from .order import causal_order
from .rpc import MISSING, Pending, RpcChecks
from .rules import Finding, finding
from .schema import KNOWN_VERSIONS, TAG_KEYS, Extension, SchemaSet, methods_of_other_versions, schema_set, shown_version
from .sessions import SessionRules
from .tck import requirement

_short = partial(short_json, limit=40)  # values in rpc.* messages: shorter than schema ones

_TERMINAL_CALLS = (
    vocab.TERMINAL_CREATE,
    vocab.TERMINAL_OUTPUT,
    vocab.TERMINAL_WAIT,
    vocab.TERMINAL_KILL,
    vocab.TERMINAL_RELEASE,
)
# Methods whose sessionId must name a session the connection produced (the others may name stored ones).
_SESSION_SCOPED = frozenset(
    {
        vocab.PROMPT,
        vocab.CANCEL,
        vocab.SET_MODE,
        vocab.SET_CONFIG_OPTION,
        vocab.UPDATE,
        vocab.REQUEST_PERMISSION,
        vocab.FS_READ,
        vocab.FS_WRITE,
        *_TERMINAL_CALLS,
    }
)
# The session-opening requests that name a stored session in their params (the rest mint one).
_REOPENING = vocab.SESSION_ORIGINS - vocab.SESSION_MINTING
_CHILD_FIELDS = ("childSessionId", "sessionId", "subagentSessionId")
# v1 client capabilities an agent call needs: method -> path in clientCapabilities.
_CLIENT_CAPS = {
    vocab.FS_READ: ("fs", "readTextFile"),
    vocab.FS_WRITE: ("fs", "writeTextFile"),
    **dict.fromkeys(_TERMINAL_CALLS, ("terminal",)),
}
# Agent capabilities a client call needs, per version: method -> path in the capabilities object.
_AGENT_CAPS = {
    1: {
        vocab.SESSION_LOAD: ("loadSession",),
        vocab.SESSION_RESUME: ("sessionCapabilities", "resume"),
        vocab.SESSION_LIST: ("sessionCapabilities", "list"),
        vocab.SESSION_CLOSE: ("sessionCapabilities", "close"),
        vocab.SESSION_FORK: ("sessionCapabilities", "fork"),
        vocab.SESSION_DELETE: ("sessionCapabilities", "delete"),
    },
    2: {
        vocab.SESSION_RESUME: ("session",),
        vocab.SESSION_LIST: ("session",),
        vocab.SESSION_CLOSE: ("session",),
        vocab.SESSION_FORK: ("session", "fork"),
        vocab.SESSION_DELETE: ("session", "delete"),
    },
}
_PROMPT_CAPS = {"image": "image", "audio": "audio", "resource": "embeddedContext"}


def _path(obj: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _advertised(value: Any) -> bool:
    """v1 booleans are true; object markers ({}) are present and not null."""
    return value is True or isinstance(value, dict)


class Checker(RpcChecks):
    """All rules over one connection (or one session view of it), frame by frame."""

    def __init__(self, version_hint: int | None = None) -> None:
        super().__init__()
        self.version_hint = version_hint
        self.schemas: SchemaSet | None = None
        self.init_state = "none"  # none | sent | done | assumed (no initialize seen: the stored version)
        self.init_requested: Any = None
        self.init_answered: Any = None  # the protocolVersion the agent answered, as it was
        self.judged_as = ""  # why the version judged is not the one answered (schema.shown_version)
        self.version_warned = False
        self.newer_version = False  # the agent answered a newer version than the client asked for
        self.client_caps: Any = None
        self.agent_caps: Any = None
        self.caps_known = False
        self.sessions: set[str] = set()
        self.extensions_seen: set[str] = set()
        self.unknown_seen: set[str] = set()
        self.unknown_seen_fields: set[tuple[str, str, str]] = set()
        # root keys per kind and method (schema.root_keys, looked up once per method: the hot path)
        self.roots: dict[str, dict[str, Any]] = {"request": {}, "notification": {}, "response": {}}
        self.lifecycle = Lifecycle(self.out.append)
        self.more = SessionRules(self.out.append)
        self.frames = 0
        # unknown-session findings of agent messages sent while a session/new or fork was pending: the answer
        # may still name that session (agents may stream updates before it), so they wait for it.
        self.early: dict[str, Finding] = {}

    # -- input ----------------------------------------------------------------------------------------------
    def feed(
        self, frame: int, direction: str, raw: bytes, *, unterminated: bool = False, mono: float | None = None
    ) -> list[Finding]:
        """Check one frame (its bytes without the LF); returns the findings it completed, in order."""
        start = len(self.out)
        self.frames += 1
        self.lifecycle.now = mono
        try:
            self._frame(frame, direction, bytes(raw), unterminated)
        except RecursionError:
            self._add("rpc.not-json", frame, None, "message nested too deeply to check")
        return self._tagged(start) if len(self.out) > start else []

    def _tagged(self, start: int) -> list[Finding]:
        """The findings from `start` on, each with the one kit requirement it breaks under the version judged
        (before initialize: the one the recorder stored)."""
        out = self.out
        version = self.version if self.version is not None else self.version_hint
        for i in range(start, len(out)):
            if (rid := requirement(out[i].rule, version, out[i].topic, out[i].message)) is not None:
                out[i] = replace(out[i], tck=rid)
        return out[start:]

    def end(self, connection_ended: bool = True) -> list[Finding]:
        """The recording is over: what only the whole of it shows (unanswered requests, unreported messages)."""
        start = len(self.out)
        if connection_ended:
            self._flush_early()  # a live connection's pending answer may still name those sessions
            self._unanswered()
        if self.schemas is not None and connection_ended:  # a live connection's turn may still complete
            self.lifecycle.end()
            self.more.end()
        return self._tagged(start)

    def _flush_early(self) -> None:
        """No session/new or fork is pending any more: the deferred unknown-session findings stand."""
        if self.early:
            self.out += sorted(self.early.values(), key=lambda f: f.frame or 0)
            self.early.clear()

    def _creating_pending(self) -> bool:
        return any(p.method in vocab.SESSION_MINTING for p in self.requests.pending.values())

    # -- what a message means -------------------------------------------------------------------------------
    def _on_request(
        self, frame: int, direction: str, m: dict[str, Any], method: str, params: Any, sid: str | None, valid_id: bool
    ) -> None:
        self._protocol(frame, direction, method, "request", params, sid)
        rule = _SENT.get(method)
        if rule is not None and sid is not None and self.schemas is not None:
            rule(self, frame, direction, m, sid, valid_id)

    def _on_notification(self, frame: int, direction: str, method: str, params: Any) -> None:
        sid = params.get("sessionId") if type(params) is dict else None
        sid = sid if type(sid) is str else None
        self._protocol(frame, direction, method, "notification", params, sid)
        if self.schemas is None or method not in (vocab.UPDATE, vocab.CANCEL):
            return
        update = params.get("update") if type(params) is dict else None
        tag = update.get("sessionUpdate") if type(update) is dict else None
        if method == vocab.UPDATE and sid is not None and type(tag) is str:
            self._update(frame, sid, tag, params)
        elif method == vocab.UPDATE:
            self._validate_params(frame, vocab.UPDATE, "notification", params, sid)
        elif sid is not None:
            self.lifecycle.cancel(frame, sid)

    def _on_answer(self, frame: int, direction: str, m: dict[str, Any], p: Pending, is_error: bool) -> None:
        result = m.get("result")
        sid = p.session
        if p.method == vocab.INITIALIZE:
            self._initialized(frame, p, result, is_error)
            return
        rule = _ANSWERED.get(p.method)
        if is_error and self.schemas is not None:
            self.more.error(frame, p.method, sid, m.get("error"))
        if is_error or self.schemas is None:
            if self.early and not self._creating_pending():
                self._flush_early()
            if rule is not None and sid is not None:
                rule(self, frame, direction, m, p, sid, False)
            return
        if p.method in vocab.SESSION_MINTING and isinstance(result, dict) and isinstance(result.get("sessionId"), str):
            sid = result["sessionId"]
            self.sessions.add(sid)
            self.early.pop(sid, None)  # its early updates were fine
        if self.early and not self._creating_pending():
            self._flush_early()
        self._validate_result(frame, p, result, sid)
        self.more.answer(frame, p.method, p.params, p.session, result)
        if p.method == vocab.SESSION_NEW and sid is not None:
            self.lifecycle.created.add(sid)
        if p.session is not None and rule is not None:
            rule(self, frame, direction, m, p, p.session, True)

    # -- what a request and its answer mean for the session's lifecycle (the tables _SENT and _ANSWERED) ------
    def _prompt_sent(self, frame: int, direction: str, m: dict[str, Any], sid: str, valid_id: bool) -> None:
        self.lifecycle.prompt_request(frame, sid)

    def _close_sent(self, frame: int, direction: str, m: dict[str, Any], sid: str, valid_id: bool) -> None:
        self.lifecycle.cancel(frame, sid, vocab.SESSION_CLOSE)

    def _permission_sent(self, frame: int, direction: str, m: dict[str, Any], sid: str, valid_id: bool) -> None:
        if valid_id:
            self.lifecycle.permission_request(frame, sid, Correlator.key(direction, m.get("id")))

    def _reopen_sent(self, frame: int, direction: str, m: dict[str, Any], sid: str, valid_id: bool) -> None:
        if _replays(m.get("method"), m.get("params")):
            self.lifecycle.replay(sid, +1)
        else:
            self.lifecycle.quiet_resume(sid, +1)

    def _prompt_answered(self, frame: int, direction: str, m: dict[str, Any], p: Pending, sid: str, ok: bool) -> None:
        if self.schemas is not None:  # (an error answer may come while the schemas are unknown)
            self.lifecycle.prompt_answer(frame, sid, m.get("result") if ok else None, not ok)

    def _permission_answered(
        self, frame: int, direction: str, m: dict[str, Any], p: Pending, sid: str, ok: bool
    ) -> None:
        if self.schemas is not None:
            self.lifecycle.permission_answer(frame, sid, Correlator.answer_key(direction, m.get("id")), m)

    def _reopen_answered(self, frame: int, direction: str, m: dict[str, Any], p: Pending, sid: str, ok: bool) -> None:
        """Counted down whether the schemas are known or not (an error answer)."""
        if _replays(p.method, p.params):
            self.lifecycle.replay(sid, -1, answered=ok)
        else:
            self.lifecycle.quiet_resume(sid, -1)

    def _validate_result(self, frame: int, p: Pending, result: Any, sid: str | None) -> None:
        schemas = self.schemas
        if schemas is None or p.method.startswith("_") or schemas.def_name(p.method, "response") is None:
            return
        if p.method == vocab.PROMPT and isinstance(result, dict):
            reason = result.get("stopReason")
            if isinstance(reason, str) and reason.startswith("_"):
                self._extension(frame, sid, f"stop reason {reason}")
                result = {**result, "stopReason": "end_turn"}
        err = schemas.validate(p.method, "response", result, "result")
        if isinstance(err, Extension):
            self._extension(frame, sid, err)
        elif err is not None:
            name = schemas.def_name(p.method, "response")
            self._add("schema.result", frame, sid, f"{p.method}: {err}", f"schema {name}")
        elif type(result) is dict:
            self._root_fields(frame, p.method, "response", result, sid, "result")

    def _initialized(self, frame: int, p: Pending, result: Any, is_error: bool) -> None:
        if is_error:
            return
        self.init_state = "done"
        version = result.get("protocolVersion", MISSING) if isinstance(result, dict) else None
        self.init_answered = version
        if not isinstance(result, dict):
            self.version_warned = True  # the schema reports a result that is not an object, its version with it
        self._use_version(version, frame, *shown_version(p.params, result, version, self.version_hint))
        if self.schemas is not None:
            if isinstance(result, dict) and type(version) is not int:  # reported: judged as the version shown
                result = {**result, "protocolVersion": self.version}
            err = self.schemas.validate(vocab.INITIALIZE, "response", result, "result")
            if err is not None:
                self._add("schema.result", frame, None, f"initialize: {err}", "schema InitializeResponse")
            self.agent_caps = _path(result, ("agentCapabilities",) if self.version == 1 else ("capabilities",))
            self.caps_known = True
            params = p.params if isinstance(p.params, dict) else {}
            self.client_caps = params.get("clientCapabilities" if self.version == 1 else "capabilities")
            if isinstance(result, dict) and self.version is not None:
                self.more.enums = self.schemas.open_enums()
                self.more.initialized(frame, self.version, self.client_caps, result)
                self._capability_keys(p.frame, "the client's", self.client_caps, "ClientCapabilities")
                self._capability_keys(frame, "the agent's", self.agent_caps, "AgentCapabilities")
        requested = self.init_requested
        if self.schemas is not None and type(requested) is int and type(version) is int and version > requested:
            self.newer_version = True

    def _capability_keys(self, frame: int, whose: str, caps: Any, name: str) -> None:
        assert self.schemas is not None
        known = self.schemas.properties(name)
        if not isinstance(caps, dict) or not known:
            return
        extra = sorted(k for k in caps if k not in known and k != "_meta")
        if extra:
            self._add(
                "protocol.capability-keys",
                frame,
                None,
                f"{whose} capabilities have {', '.join(map(repr, extra))}, which the schema does not define "
                "(custom capabilities go under _meta)",
            )

    def _use_version(self, version: Any, frame: int | None, judged: int | None = None, why: str = "") -> None:
        """The rules of `judged`, the version the messages show (`why`: how), else of `version`; a version this
        checker does not know, or none, is reported once (no version shown: the JSON-RPC rules alone)."""
        if type(version) is int and version in KNOWN_VERSIONS:
            judged, self.judged_as = (version, "") if judged is None else (judged, why)  # (said by protocol.version)
        elif not self.version_warned:
            self.version_warned = True
            rest = f"the rest is judged as v{judged} ({why})" if judged is not None else "JSON-RPC checks only"
            if type(version) is int:
                self._add("protocol.unknown-version", frame, None, f"protocol version {version} is not 1 or 2: {rest}")
            else:
                what = " has no protocolVersion" if version is MISSING else f"'s protocolVersion is {_short(version)}"
                self._add("protocol.version-value", frame, None, f"the initialize result{what}, not an integer: {rest}")
        self.version = judged
        self.schemas = schema_set(judged) if judged is not None else None
        self.lifecycle.v2 = judged == 2

    # -- protocol -------------------------------------------------------------------------------------------
    def _protocol(self, frame: int, direction: str, method: str, kind: str, params: Any, sid: str | None) -> None:
        if method == vocab.INITIALIZE:
            self._initialize_sent(frame, direction, kind, params)
            return
        if (self.init_state != "done" or self.newer_version) and not self._after_initialize(
            frame, direction, method, sid
        ):
            return  # (the call only when there is something to say: this runs for every message)
        schemas = self.schemas
        if schemas is None:
            return
        info = schemas.methods.get(method)
        if info is None:
            if kind == "notification" and method.startswith("$/"):
                return  # a protocol-level notification the receiver may ignore (schema: `$/` methods)
            self._unknown_method(frame, method, sid)
            return
        if (info.side == "agent" and direction != C2A) or (info.side == "client" and direction != A2C):
            sender = "agent" if direction == A2C else "editor"
            self._add("protocol.wrong-side", frame, sid, f"{method} sent by the {sender}")
        if kind not in info.defs:
            other = "notification" if kind == "request" else "request"
            if other in info.defs:
                self._add("protocol.wrong-kind", frame, sid, f"{method} is a {other}, sent as a {kind}")
            return
        self._capabilities(frame, direction, method, params, sid)
        if sid is not None:
            self._session_named(frame, direction, method, sid)
        if method != vocab.UPDATE:
            self._validate_params(frame, method, kind, params, sid)

    def _after_initialize(self, frame: int, direction: str, method: str, sid: str | None) -> bool:
        """The rules of a message's place after initialize; false: nothing more to check (a cancellation
        before the exchange completed is not an error). Each message before it is one finding, also once the
        stored version is assumed ("assumed" judges by that version, it does not complete the exchange)."""
        if self.init_state != "done":
            if method == vocab.CANCEL_REQUEST:
                return False
            self._add("protocol.initialize-first", frame, sid, f"{method} before the initialize exchange completed")
            if self.version is None and self.version_hint is not None and not self.version_warned:
                self._use_version(self.version_hint, None)
                self.init_state = "assumed"  # the version the recorder stored; capabilities stay unknown
        elif self.newer_version and direction == C2A:
            self.newer_version = False
            self._add(
                "protocol.version",
                frame,
                sid,
                f"client asked for v{self.init_requested} but goes on with v{self.init_answered}, the agent's answer"
                + (f" (judged as v{self.version}, {self.judged_as})" if self.judged_as else ""),
            )
        return True

    def _session_named(self, frame: int, direction: str, method: str, sid: str) -> None:
        """A session-scoped message must name a session this connection created, loaded or resumed."""
        if method in _REOPENING:
            self.sessions.add(sid)
        elif method in _SESSION_SCOPED and sid not in self.sessions:
            found = finding(
                "protocol.unknown-session",
                frame,
                sid,
                f"{method} names session {sid!r}, which this connection never created",
            )
            if direction == A2C and self._creating_pending():
                self.early.setdefault(sid, found)  # the pending answer may still name it
            else:
                self.out.append(found)
            self.sessions.add(sid)  # once per session

    def _initialize_sent(self, frame: int, direction: str, kind: str, params: Any) -> None:
        """An initialize message: once per connection, from the editor, its params valid for the version it asks."""
        if self.init_state not in ("none", "assumed"):
            self._add("protocol.initialize-twice", frame, None, "initialize sent again")
            return
        self.init_state = "sent"
        self.init_requested = params.get("protocolVersion") if isinstance(params, dict) else None
        requested = self.init_requested
        if direction == C2A and kind == "request" and type(requested) is int and requested in KNOWN_VERSIONS:
            err = schema_set(requested).validate(
                vocab.INITIALIZE, "request", params if params is not MISSING else {}, "params"
            )
            if err is not None:
                self._add("schema.params", frame, None, f"initialize: {err}", "schema InitializeRequest")
        if direction != C2A:
            self._add("protocol.wrong-side", frame, None, "initialize sent by the agent")

    def _validate_params(self, frame: int, method: str, kind: str, params: Any, sid: str | None) -> None:
        schemas = self.schemas
        assert schemas is not None
        err = schemas.validate(method, kind, params if params is not MISSING else {}, "params")
        if isinstance(err, Extension):
            self._extension(frame, sid, err)
        elif err is not None:
            tag = _path(params, ("update", "sessionUpdate")) if method == vocab.UPDATE else None
            topic = tag if type(tag) is str else method  # the variant says which kit requirement it is
            self._add(
                "schema.params", frame, sid, f"{method}: {err}", f"schema {schemas.def_name(method, kind)}", topic
            )
        elif type(params) is dict:
            allowed = self.roots[kind].get(method, MISSING)
            if allowed is MISSING:
                allowed = self.roots[kind][method] = schemas.root_keys(method, kind)
            if allowed is not None and not params.keys() <= allowed:
                self._root_fields(frame, method, kind, params, sid, "params")

    def _root_fields(self, frame: int, method: str, kind: str, obj: dict[str, Any], sid: str | None, what: str) -> None:
        """Keys at the root of valid params or a result that the definition does not declare (once per key)."""
        assert self.schemas is not None
        allowed = self.schemas.root_keys(method, kind)
        if allowed is None:
            return
        for key in obj:
            if key not in allowed and (method, kind, key) not in self.unknown_seen_fields:
                if any(isinstance(obj.get(t), str) and obj[t].startswith("_") for t in TAG_KEYS):
                    return  # a custom variant: its fields are its own
                self.unknown_seen_fields.add((method, kind, key))
                self._add(
                    "schema.unknown-field",
                    frame,
                    sid,
                    f"{method}: {what} has {key!r}, which its definition does not declare (custom data goes under _meta)",
                )

    def _unknown_method(self, frame: int, method: str, sid: str | None) -> None:
        if method.startswith("_"):
            self._extension(frame, sid, f"method {method}")
        elif method not in self.unknown_seen:
            self.unknown_seen.add(method)
            other = (
                " (a method of another protocol version)"
                if method in methods_of_other_versions(self.version or 0)
                else ""
            )
            self._add("schema.unknown-method", frame, sid, f"{method} is not a v{self.version} method{other}")

    def _extension(self, frame: int, sid: str | None, what: str) -> None:
        if what not in self.extensions_seen:
            self.extensions_seen.add(what)
            self._add("schema.extension", frame, sid, f"extension {what} (not validated; reported once)")

    def _capabilities(self, frame: int, direction: str, method: str, params: Any, sid: str | None) -> None:
        if not self.caps_known:
            return  # no initialize exchange seen: the capabilities are unknown, not absent
        if direction == A2C and method == vocab.ELICITATION_CREATE:
            modes = _path(self.client_caps, ("elicitation",))
            if not (_advertised(_path(modes, ("form",))) or _advertised(_path(modes, ("url",)))):
                self._add(
                    "protocol.client-capability",
                    frame,
                    sid,
                    "elicitation/create but the client advertised no elicitation mode (form or url)",
                    topic=method,
                )
        elif direction == A2C and self.version == 1 and method in _CLIENT_CAPS:
            path = _CLIENT_CAPS[method]
            if not _advertised(_path(self.client_caps, path)):
                self._add(
                    "protocol.client-capability",
                    frame,
                    sid,
                    f"{method} but the client did not advertise {'.'.join(path)}",
                    topic=method,
                )
        elif direction == C2A and self.version is not None:
            need = _AGENT_CAPS[self.version].get(method)
            if need is not None and not _advertised(_path(self.agent_caps, need)):
                self._add(
                    "protocol.agent-capability",
                    frame,
                    sid,
                    f"{method} but the agent did not advertise {'.'.join(need)}",
                    topic=method,
                )
            elif method == vocab.PROMPT and isinstance(params, dict) and isinstance(params.get("prompt"), list):
                self._prompt_content(frame, params["prompt"], sid)

    def _prompt_content(self, frame: int, blocks: list[Any], sid: str | None) -> None:
        caps = _path(self.agent_caps, ("promptCapabilities",) if self.version == 1 else ("session", "prompt"))
        for i, block in enumerate(blocks):
            kind = block.get("type") if isinstance(block, dict) else None
            need = _PROMPT_CAPS.get(kind) if isinstance(kind, str) else None
            if need is not None and not _advertised(_path(caps, (need,))):
                self._add(
                    "protocol.prompt-content",
                    frame,
                    sid,
                    f"prompt[{i}] is {kind} content but the agent did not advertise {need}",
                )

    # -- session/update -------------------------------------------------------------------------------------
    def _update(self, frame: int, sid: str, tag: str, params: dict[str, Any]) -> None:
        update = params["update"]
        schemas = self.schemas
        assert schemas is not None
        if tag.startswith("_"):
            self._extension(frame, sid, f"session/update variant {tag}")
        elif not schemas.is_variant(tag) and self.version != 1 and tag not in self.unknown_seen:
            self.unknown_seen.add(tag)
            self._add(
                "schema.unknown-variant",
                frame,
                sid,
                f"session/update variant {tag!r} is not defined in v{self.version}",
            )
        rule = UPDATE_RULES.get(tag)
        if rule is not None:
            rule(self, frame, sid, tag, update)
        self._validate_params(frame, vocab.UPDATE, "notification", params, sid)
        self.lifecycle.update(frame, sid, tag, update)
        self.more.update(frame, sid, tag, update)

    def _subagent(self, frame: int, sid: str, tag: str, update: dict[str, Any]) -> None:
        """A subagent's update names its child session: the connection produced it."""
        for key in _CHILD_FIELDS:
            child = update.get(key)
            if isinstance(child, str) and child != sid:
                self.sessions.add(child)
                break

    def _state_update(self, frame: int, sid: str, tag: str, update: dict[str, Any]) -> None:
        reason = update.get("stopReason")
        if isinstance(reason, str) and reason.startswith("_"):
            self._extension(frame, sid, f"stop reason {reason}")


def _replays(method: Any, params: Any) -> bool:
    """A session/load replays the history; a session/resume only when it asks to (`replayFrom`)."""
    return method == vocab.SESSION_LOAD or (isinstance(params, dict) and bool(params.get("replayFrom")))


def _gated(*path: str) -> _UpdateRule:
    """A v1-unstable variant the agent may send only if the client advertised `path` in its capabilities."""

    def rule(checker: Checker, frame: int, sid: str, tag: str, update: dict[str, Any]) -> None:
        if checker.version == 1 and checker.caps_known and not _advertised(_path(checker.client_caps, path)):
            checker._add(
                "protocol.client-capability", frame, sid, f"{tag} but the client did not advertise {'.'.join(path)}"
            )

    return rule


_Sent = Callable[[Checker, int, str, dict[str, Any], str, bool], None]
_Answered = Callable[[Checker, int, str, dict[str, Any], Pending, str, bool], None]
_UpdateRule = Callable[[Checker, int, str, str, dict[str, Any]], None]
# request method -> what sending it means for its session (run once the schemas are known and it names one).
_SENT: dict[str, _Sent] = {
    vocab.PROMPT: Checker._prompt_sent,
    vocab.SESSION_CLOSE: Checker._close_sent,
    vocab.REQUEST_PERMISSION: Checker._permission_sent,
    **dict.fromkeys(_REOPENING, Checker._reopen_sent),
}
# request method -> what its answer (ok: not an error) means for the session the request named.
_ANSWERED: dict[str, _Answered] = {
    vocab.PROMPT: Checker._prompt_answered,
    vocab.REQUEST_PERMISSION: Checker._permission_answered,
    **dict.fromkeys(_REOPENING, Checker._reopen_answered),
}
# variant -> the checker's own rule for it (a capability it needs, a session it names); None: none here
# (lifecycle.py and sessions.py have theirs).
UPDATE_RULES: dict[str, _UpdateRule | None] = vocab.variant_table(
    "check.engine: update rules",
    {
        vocab.PLAN_UPDATE: _gated("plan"),
        vocab.PLAN_REMOVED: _gated("plan"),
        vocab.COMPACTION_UPDATE: _gated("session", "compaction"),
        vocab.COMPACTION_SUMMARY_CHUNK: _gated("session", "compaction"),
        vocab.SUBAGENT_UPDATE: Checker._subagent,
        vocab.STATE_UPDATE: Checker._state_update,
        **dict.fromkeys(vocab.MESSAGE_CHUNKS | vocab.MESSAGE_UPSERTS, None),
        vocab.TOOL_CALL: None,
        vocab.TOOL_CALL_UPDATE: None,
        vocab.TOOL_CALL_CONTENT_CHUNK: None,
        vocab.PLAN: None,
        vocab.TERMINAL_UPDATE: None,
        vocab.TERMINAL_OUTPUT_CHUNK: None,
        vocab.CURRENT_MODE_UPDATE: None,
        vocab.CONFIG_OPTION_UPDATE: None,
        vocab.AVAILABLE_COMMANDS_UPDATE: None,
        vocab.SESSION_INFO_UPDATE: None,
        vocab.USAGE_UPDATE: None,
        vocab.QUOTA_UPDATE: None,
        vocab.NOTICE: None,
        vocab.SESSION_MESSAGE: None,
        vocab.SESSION_MESSAGE_CHUNK: None,
    },
)


def check_frames(
    frames: Iterable[tuple[Any, ...]],
    version_hint: int | None = None,
    ended: bool = True,
    known_sessions: Iterable[str] = (),
) -> tuple[list[Finding], int]:
    """Check a view's frames, given as (frame id, direction, raw, unterminated, recorded session id[, mono]);
    returns the findings ordered by frame (connection-wide ones last) and the number of frames checked. A
    finding without a session of its own takes the one the recorder indexed its frame under. `known_sessions`:
    sessions created outside the frames given (a subagent's child session, announced in its parent's)."""
    checker = Checker(version_hint)
    checker.sessions.update(known_sessions)
    out: list[Finding] = []
    for row in causal_order(frames):
        frame, direction, raw, unterminated, session = row[:5]
        found = checker.feed(frame, direction, raw, unterminated=unterminated, mono=row[5] if len(row) > 5 else None)
        del row, raw  # not held while the next frame is read (a session of big frames costs one at a time)
        if found:
            out += [replace(f, session=session) if f.session is None and f.frame == frame else f for f in found]
    out += checker.end(ended)
    out.sort(key=lambda f: (f.frame is None, f.frame or 0))
    return out, checker.frames
