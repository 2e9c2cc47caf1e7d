"""Rules over what the connection's answers and updates establish: session ids, modes, config options, auth
methods, session lists and deletions, and the keyed upserts of v2 updates (sans-I/O, like lifecycle.py).

The engine calls a hook per relevant message after the schema checks; each hook reports through `emit`.
Values are judged only where the schema cannot: membership (a current value among its options), history
(a list that forgets an option, a cwd that changes), and the open enums v2's schema leaves open.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import vocab
from .rules import Finding, finding

_AUTH_REQUIRED = -32000
_KEY_FIELDS = {
    **dict.fromkeys(vocab.MESSAGE_CHUNKS | vocab.MESSAGE_UPSERTS, "messageId"),
    vocab.TOOL_CALL_UPDATE: "toolCallId",
    vocab.TOOL_CALL_CONTENT_CHUNK: "toolCallId",
    vocab.TERMINAL_UPDATE: "terminalId",
    vocab.TERMINAL_OUTPUT_CHUNK: "terminalId",
}


@dataclass
class _Session:
    config: set[str] | None = None  # option ids last advertised, once any were
    terminal_cwd: dict[str, str] = field(default_factory=dict)
    tool_names: dict[str, str] = field(default_factory=dict)
    tools_seen: set[str] = field(default_factory=set)
    own_state: str | None = None  # the child's last state_update state
    state_frame: int = 0


def _absolute(path: Any) -> bool:
    """POSIX or Windows absolute (drive letter or UNC)."""
    if not isinstance(path, str) or not path:
        return False
    return path.startswith("/") or path.startswith("\\\\") or (len(path) > 2 and path[1] == ":" and path[2] in "/\\")


def _option_ids(options: Any, key: str) -> set[str]:
    if not isinstance(options, list):
        return set()
    return {o[key] for o in options if isinstance(o, dict) and isinstance(o.get(key), str)}


def _select_values(options: Any) -> set[Any] | None:
    """The values a select option offers, flat or grouped; None when the shape is not a list."""
    if not isinstance(options, list):
        return None
    out: set[Any] = set()
    for o in options:
        if isinstance(o, dict) and isinstance(o.get("options"), list):
            out |= {v.get("value") for v in o["options"] if isinstance(v, dict) and _hashable(v.get("value"))}
        elif isinstance(o, dict) and _hashable(o.get("value")):
            out.add(o.get("value"))
    return out


def _hashable(value: Any) -> bool:
    """Scalars only: values from the wire go into sets, and a list or object there would raise."""
    return value is None or isinstance(value, (str, int, float, bool))


class SessionRules:
    """Per-connection state for the rules of this module."""

    def __init__(self, emit: Callable[[Finding], None]) -> None:
        self.emit = emit
        self.version: int | None = None
        self.enums: dict[str, frozenset[str]] = {}  # v2 open enums: site -> defined values
        self.client_caps: Any = None
        self.offered_auth = False
        self.created: dict[str, int] = {}  # session id -> frame of the answer that created it
        self.deleted: set[str] = set()
        self.sessions: dict[str, _Session] = {}
        self.mirrored: dict[str, tuple[str, int]] = {}  # child id -> (state the parent mirrored, frame)

    def _s(self, sid: str) -> _Session:
        s = self.sessions.get(sid)
        if s is None:
            s = self.sessions[sid] = _Session()
        return s

    def _report(self, rule: str, frame: int | None, sid: str | None, message: str, topic: str = "") -> None:
        self.emit(finding(rule, frame, sid, message, topic=topic))

    # -- initialize -----------------------------------------------------------------------------------------
    def initialized(self, frame: int, version: int, client_caps: Any, result: dict[str, Any]) -> None:
        self.version = version
        self.client_caps = client_caps
        if version == 1 and result.get("agentInfo") is None:  # malformed: the schema says what is wrong
            self._report("protocol.agent-info", frame, None, "initialize result has no agentInfo (name and version)")
        methods = result.get("authMethods")
        if not isinstance(methods, list):
            return
        self.offered_auth = bool(methods)
        key = "id" if version == 1 else "methodId"
        seen: set[Any] = set()
        caps = client_caps.get("auth") if isinstance(client_caps, dict) else None
        terminal = caps.get("terminal") if isinstance(caps, dict) else None
        terminal_ok = terminal is True if version == 1 else isinstance(terminal, dict)
        for i, m in enumerate(methods):
            if not isinstance(m, dict):
                continue
            ident = m.get(key)
            if _hashable(ident) and ident in seen:
                self._report("protocol.auth-method-ids", frame, None, f"authMethods[{i}] repeats id {ident!r}")
            if _hashable(ident):
                seen.add(ident)
            kind = m.get("type")
            if kind == "terminal" and not terminal_ok:
                self._report(
                    "protocol.auth-terminal",
                    frame,
                    None,
                    f"authMethods[{i}] ({ident!r}) is a terminal method but the client did not advertise auth.terminal",
                )
            if kind == "terminal" and isinstance(m.get("env"), list):
                names = [e.get("name") for e in m["env"] if isinstance(e, dict)]
                twice = sorted({str(n) for n in names if names.count(n) > 1})
                if twice:
                    self._report(
                        "protocol.auth-terminal",
                        frame,
                        None,
                        f"authMethods[{i}] ({ident!r}) sets env {', '.join(twice)} more than once",
                        "env",
                    )
            elif version == 2 and isinstance(kind, str):
                self._enum(frame, None, f"authMethods[{i}].type", "auth", kind)

    # -- answers --------------------------------------------------------------------------------------------
    def answer(self, frame: int, method: str, params: Any, sid: str | None, result: Any) -> None:
        """A successful answer to `method` (sid: the session the request named)."""
        if not isinstance(result, dict):
            return
        if method in vocab.SESSION_MINTING:
            new = result.get("sessionId")
            if isinstance(new, str):
                if not new:
                    self._report("protocol.session-ids", frame, None, f"{method} answered an empty sessionId", "empty")
                elif new in self.created:
                    self._report(
                        "protocol.session-ids",
                        frame,
                        new,
                        f"{method} answered session {new!r}, already created at frame {self.created[new]}",
                    )
                else:
                    self.created[new] = frame
                sid = new
        if sid is not None and method in vocab.SESSION_ORIGINS:
            self._modes(frame, sid, result.get("modes"))
            if "configOptions" in result:
                self._config(frame, sid, result.get("configOptions"), None)
        elif method == vocab.SET_CONFIG_OPTION and sid is not None:
            self._config(frame, sid, result.get("configOptions"), "the set_config_option answer")
        elif method == vocab.SESSION_LIST:
            self._list(frame, params, result.get("sessions"))
        elif method == vocab.SESSION_DELETE and sid is not None:
            self.deleted.add(sid)

    def error(self, frame: int, method: str, sid: str | None, error: Any) -> None:
        code = error.get("code") if isinstance(error, dict) else None
        if (
            method == vocab.SESSION_NEW
            and code == _AUTH_REQUIRED
            and not self.offered_auth
            and self.version is not None
        ):
            self._report(
                "protocol.auth-required",
                frame,
                None,
                "session/new was refused as needing authentication, but initialize offered no auth method",
            )
        elif method == vocab.SESSION_DELETE and sid is not None and sid in self.deleted:
            self._report(
                "protocol.delete-again",
                frame,
                sid,
                f"deleting session {sid!r} again was answered with an error (code {code})",
            )

    def _modes(self, frame: int, sid: str, modes: Any) -> None:
        if not isinstance(modes, dict):
            return
        current = modes.get("currentModeId")
        available = _option_ids(modes.get("availableModes"), "id")
        if isinstance(current, str) and current not in available:
            self._report(
                "protocol.mode-id",
                frame,
                sid,
                f"currentModeId {current!r} is not one of availableModes {sorted(available)}",
            )

    def _config(self, frame: int, sid: str, options: Any, what: str | None) -> None:
        if not isinstance(options, list):
            return
        key = "id" if self.version == 1 else "configId"
        s = self._s(sid)
        ids = _option_ids(options, key)
        if what is not None and s.config is not None and not s.config <= ids:
            gone = sorted(s.config - ids)
            self._report(
                "protocol.config-complete",
                frame,
                sid,
                f"{what} leaves out config option{'s' if len(gone) > 1 else ''} {', '.join(map(repr, gone))}",
                what,
            )
        s.config = ids
        caps = self.client_caps if self.version == 1 else None
        for o in options:
            if not isinstance(o, dict):
                continue
            if o.get("type") == "select":
                values = _select_values(o.get("options"))
                current = o.get("currentValue")
                if values is not None and _hashable(current) and current not in values:
                    self._report(
                        "protocol.config-value",
                        frame,
                        sid,
                        f"config option {o.get(key)!r}: currentValue {current!r} is not one of its options",
                    )
            elif o.get("type") == "boolean" and self.version == 1:
                gate = caps.get("session") if isinstance(caps, dict) else None
                gate = gate.get("configOptions") if isinstance(gate, dict) else None
                gate = gate.get("boolean") if isinstance(gate, dict) else None
                if gate is None or gate is False:
                    self._report(
                        "protocol.client-capability",
                        frame,
                        sid,
                        f"config option {o.get(key)!r} is boolean but the client did not advertise "
                        "session.configOptions.boolean",
                        "configOptions.boolean",
                    )

    def _list(self, frame: int, params: Any, sessions: Any) -> None:
        if not isinstance(sessions, list):
            return
        want = params.get("cwd") if isinstance(params, dict) else None
        bad_cwd = bad_filter = listed = None
        for entry in sessions:
            if not isinstance(entry, dict):
                continue
            cwd = entry.get("cwd")
            if bad_cwd is None and isinstance(cwd, str) and not _absolute(cwd):
                bad_cwd = cwd
            if bad_filter is None and isinstance(want, str) and isinstance(cwd, str) and cwd != want:
                bad_filter = cwd
            if listed is None and isinstance(entry.get("sessionId"), str) and entry["sessionId"] in self.deleted:
                listed = entry.get("sessionId")
        if bad_cwd is not None:
            self._report(
                "protocol.list-cwd", frame, None, f"session/list entry has a relative cwd {bad_cwd!r}", "relative"
            )
        if bad_filter is not None:
            self._report(
                "protocol.list-cwd",
                frame,
                None,
                f"session/list filtered by cwd {want!r} returned a session in {bad_filter!r}",
            )
        if listed is not None:
            self._report(
                "protocol.deleted-listed", frame, listed, f"session/list still lists deleted session {listed!r}"
            )

    # -- session/update (v2 upserts, config and subagent state) ---------------------------------------------
    def update(self, frame: int, sid: str, tag: str, update: dict[str, Any]) -> None:
        """Keyed ids (v2), then the variant's row of `SESSION_RULES` (v2 only, but for config options)."""
        if self.version != 2 and tag != vocab.CONFIG_OPTION_UPDATE:
            return
        key = _KEY_FIELDS.get(tag)
        if key is not None and update.get(key) == "":
            self._report("patch.ids", frame, sid, f"{tag} has an empty {key}", key)
        rule = SESSION_RULES.get(tag)
        if rule is not None:
            rule(self, frame, sid, update)

    def _config_update(self, frame: int, sid: str, update: dict[str, Any]) -> None:
        self._config(frame, sid, update.get("configOptions"), vocab.CONFIG_OPTION_UPDATE)

    def _plan_update(self, frame: int, sid: str, update: dict[str, Any]) -> None:
        self._plan(frame, sid, update.get("plan"))

    def _state_update(self, frame: int, sid: str, update: dict[str, Any]) -> None:
        self._own_state(frame, sid, update.get("state"))

    def _enum(self, frame: int, sid: str | None, where: str, site: str, value: Any) -> None:
        known = self.enums.get(site)
        if known and isinstance(value, str) and value not in known and not value.startswith("_"):
            self._report(
                "schema.open-enum",
                frame,
                sid,
                f"{where} {value!r} is not a defined value ({', '.join(sorted(known))}); custom ones begin with `_`",
                site,
            )

    def _tool(self, frame: int, sid: str, update: dict[str, Any]) -> None:
        tid = update.get("toolCallId")
        self._enum(frame, sid, "tool_call_update kind", "tool-kind", update.get("kind"))
        self._enum(frame, sid, "tool_call_update status", "tool-status", update.get("status"))
        if not isinstance(tid, str) or not tid:
            return
        s = self._s(sid)
        if tid not in s.tools_seen:
            s.tools_seen.add(tid)
            # judged only where the connection saw the whole session (a resumed one's tools began earlier)
            if sid in self.created and not update.get("title"):
                self._report("patch.tool-title", frame, sid, f"the first update of tool call {tid!r} has no title")
        name = update.get("name")
        if isinstance(name, str):
            before = s.tool_names.setdefault(tid, name)
            if before != name:
                self._report(
                    "patch.tool-title", frame, sid, f"tool call {tid!r} changes its name from {before!r} to {name!r}"
                )

    def _plan(self, frame: int, sid: str, plan: Any) -> None:
        if not isinstance(plan, dict):
            return
        if plan.get("planId") == "":
            self._report("patch.ids", frame, sid, "plan_update has an empty planId", "planId")
        entries = plan.get("entries")
        if isinstance(entries, list):
            for i, e in enumerate(entries):
                if isinstance(e, dict):
                    self._enum(frame, sid, f"plan entry {i} priority", "plan-priority", e.get("priority"))
                    self._enum(frame, sid, f"plan entry {i} status", "plan-status", e.get("status"))

    def _terminal(self, frame: int, sid: str, update: dict[str, Any]) -> None:
        tid = update.get("terminalId")
        cwd = update.get("cwd")
        if isinstance(cwd, str) and isinstance(tid, str):
            before = self._s(sid).terminal_cwd.setdefault(tid, cwd)
            if not _absolute(cwd):
                self._report("patch.terminal-cwd", frame, sid, f"terminal {tid!r} has a relative cwd {cwd!r}")
            elif before != cwd:
                self._report(
                    "patch.terminal-cwd", frame, sid, f"terminal {tid!r} changes its cwd from {before!r} to {cwd!r}"
                )

    # -- subagents: the parent's mirror of a child's state ----------------------------------------------------
    def _own_state(self, frame: int, sid: str, state: Any) -> None:
        if isinstance(state, str):
            s = self._s(sid)
            s.own_state, s.state_frame = state, frame

    def _mirror(self, frame: int, parent: str, update: dict[str, Any]) -> None:
        child = next((update[k] for k in ("childSessionId", "sessionId") if isinstance(update.get(k), str)), None)
        snapshot = update.get("state")
        state = snapshot.get("state") if isinstance(snapshot, dict) else snapshot
        if isinstance(child, str) and child != parent and isinstance(state, str):
            self.mirrored[child] = (state, frame)

    def end(self) -> None:
        """A child whose last own state differs from the parent's last mirror of it (both seen)."""
        for child, (mirrored, frame) in self.mirrored.items():
            s = self.sessions.get(child)
            if s is not None and s.own_state is not None and s.own_state != mirrored:
                last = max(frame, s.state_frame)
                self._report(
                    "lifecycle.subagent-state",
                    last,
                    child,
                    f"child session {child!r} last reported {s.own_state!r} (frame {s.state_frame}) but its parent's "
                    f"subagent_update last mirrored {mirrored!r} (frame {frame})",
                )


_Rule = Callable[[SessionRules, int, str, dict[str, Any]], None]
# variant -> what its update establishes and must agree with; None: nothing here (lifecycle.py may judge it).
SESSION_RULES: dict[str, _Rule | None] = vocab.variant_table(
    "check.sessions: session state rules",
    {
        vocab.CONFIG_OPTION_UPDATE: SessionRules._config_update,
        vocab.TOOL_CALL_UPDATE: SessionRules._tool,
        vocab.PLAN_UPDATE: SessionRules._plan_update,
        vocab.TERMINAL_UPDATE: SessionRules._terminal,
        vocab.STATE_UPDATE: SessionRules._state_update,
        vocab.SUBAGENT_UPDATE: SessionRules._mirror,
        **dict.fromkeys(vocab.MESSAGE_CHUNKS | vocab.MESSAGE_UPSERTS, None),
        vocab.TOOL_CALL: None,
        vocab.TOOL_CALL_CONTENT_CHUNK: None,
        vocab.PLAN: None,
        vocab.PLAN_REMOVED: None,
        vocab.TERMINAL_OUTPUT_CHUNK: None,
        vocab.CURRENT_MODE_UPDATE: None,
        vocab.AVAILABLE_COMMANDS_UPDATE: None,
        vocab.SESSION_INFO_UPDATE: None,
        vocab.USAGE_UPDATE: None,
        vocab.QUOTA_UPDATE: None,
        vocab.NOTICE: None,
        vocab.COMPACTION_UPDATE: None,
        vocab.COMPACTION_SUMMARY_CHUNK: None,
        vocab.SESSION_MESSAGE: None,
        vocab.SESSION_MESSAGE_CHUNK: None,
    },
)
