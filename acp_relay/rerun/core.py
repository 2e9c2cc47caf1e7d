"""`acp-relay rerun`, the core: sans-I/O. It plays the recorded editor against a live agent.

Lines from the agent go in with the current time; frames to write come out, plus the time it next wants to
be woken (`next_deadline`). It sends `initialize` and `session/new` as recorded (cwd from --cwd), then each
recorded prompt once the previous turn has ended (v1: the prompt's response; v2: an idle `state_update`
with a stop reason), a recorded `session/cancel` at the same point of its turn, and answers every agent
request from the recording or by policy. The live session id replaces the recorded one; ids are fresh.
File access goes through the `read_file`/`write_file` callables the shell passes (the core does no I/O).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..protocol import vocab
from ..protocol.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    NOT_FOUND,
    dumps,
    get,
    id_key,
    loads,
)
from ..protocol.redact import redact_text
from ..protocol.words import counted
from ..render.text import clean
from .script import EditorScript, RecordedPermission, ScriptTurn, ToolCalls, command_key

# What rerun did and why: INFO, so a library caller hears nothing unless it configures logging (the CLI's
# handler prints it as `acp-relay: rerun: ...`).
log = logging.getLogger(__name__)

DONE, TIMEOUT, REFUSED = "done", "timeout", "refused"
# How a permission request found its recorded answer, in the order tried: the same tool kind at the same
# place among that kind's requests in the turn (stable when titles hold paths or times), then the same
# title, else none (the --answer policy answers).
KIND_PLACE, TITLE, NO_MATCH = "kind+place", "title", "none"
SETUP_TIMEOUT = 30.0  # initialize and session/new: agents take time to start; --timeout bounds turns


@dataclass
class Options:
    cwd: str | None = None  # --cwd: replaces the recorded cwd; --fs real reads and writes under it
    timeout: float = 120.0
    answer: str = "recorded"
    fs: str = "recorded"


class RerunCore:
    """Decides every frame rerun sends. `start`, then `receive` each agent line and `poll` at deadlines."""

    def __init__(
        self,
        script: EditorScript,
        options: Options,
        *,
        read_file: Callable[[str], str] | None = None,
        write_file: Callable[[str, str], None] | None = None,
    ) -> None:
        self.script, self.opt = script, options
        self.read_file, self.write_file = read_file, write_file
        self.live_session: str | None = None
        self.outcome: str | None = None  # DONE, TIMEOUT or REFUSED once finished
        self.message = ""
        self.completed = 0
        self.phase = vocab.INITIALIZE  # initialize | session/new | turn N | done
        self.turn: ScriptTurn | None = None
        self.deadline: float | None = None
        self._next_id = 0
        self._pending: dict[tuple[str, Any], str] = {}  # our request id -> what it is
        self._out: list[bytes] = []
        self._updates = 0  # agent updates in the current turn
        self._prompt_at = 0.0
        self._cancelled = False
        self._ended = False
        self._prompted = False  # the current turn's prompt went out (its setters may still be in flight)
        self._kinds_seen: dict[str | None, int] = {}  # permission requests of each tool kind in the current turn
        self._permission_n = 0  # permission requests in the current turn
        self.permissions: list[dict[str, Any]] = []  # each permission answered and the rule that matched it
        self._tools = ToolCalls()  # what the live session's updates said of each tool call
        self._used: set[int] = set()  # id() of recorded permissions already answered
        self._cursor: dict[Any, int] = {}  # how many recorded answers of a key were used
        self._terminals: set[str] = set()  # terminal ids handed out from the recording
        self._steps: list[tuple[str, dict]] = []  # recorded requests to send, one at a time, before going on
        self._then: Callable[[float], None] = lambda now: None
        self._batch: list[bytes] | None = None  # answers to the members of the batch being handled

    @property
    def cwd(self) -> str | None:
        return self.opt.cwd or self.script.cwd

    # -- sending --------------------------------------------------------------------------------------------
    def _request(self, method: str, params: Any, what: str) -> None:
        rid = self._next_id
        self._next_id += 1
        self._pending[id_key(rid)] = what
        self._out.append(dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))

    def _reply(self, rid: Any, answer: dict) -> None:
        frame = dumps({"jsonrpc": "2.0", "id": rid, **answer})
        (self._batch if self._batch is not None else self._out).append(frame)

    def _flush(self) -> list[bytes]:
        out, self._out = self._out, []
        return out

    def start(self, now: float) -> list[bytes]:
        """The first frame: initialize with the recorded params."""
        self.deadline = now + max(self.opt.timeout, SETUP_TIMEOUT)
        self._request(vocab.INITIALIZE, self.script.init_params, vocab.INITIALIZE)
        return self._flush()

    # -- input ----------------------------------------------------------------------------------------------
    def receive(self, line: bytes, now: float) -> list[bytes]:
        """One line from the agent; returns the frames to write now."""
        body = line[:-1] if line.endswith(b"\r") else line
        if body.strip():
            try:
                value = loads(body)
            except (ValueError, TypeError, UnicodeDecodeError, RecursionError):
                log.info(f"the agent wrote a line that is not JSON ({counted(len(line), 'byte')}): ignored")
                value = None
            self._batch = [] if isinstance(value, list) else None  # a batch's answers go back as one batch
            for msg in value if isinstance(value, list) else [value]:
                if isinstance(msg, dict) and self.outcome is None:
                    try:
                        self._message(msg, now)
                    except Exception as exc:  # a recording or an agent may hold anything: log, carry on
                        log.info(f"could not handle an agent message: {type(exc).__name__}: {exc}")
            if self._batch:
                self._out.insert(0, b"[" + b",".join(self._batch) + b"]")
            self._batch = None
        return self.poll(now)

    def _message(self, msg: dict, now: float) -> None:
        method = msg.get("method")
        if isinstance(method, str) and "id" in msg:
            self._reply(msg["id"], self._answer(method, msg.get("params")))
        elif isinstance(method, str):
            if method == vocab.UPDATE:
                self._update(msg.get("params"), now)
        elif "result" in msg or "error" in msg:
            what = self._pending.pop(id_key(msg.get("id")), None)
            if what is not None:
                self._response(what, msg, now)

    def _response(self, what: str, msg: dict, now: float) -> None:
        error = msg.get("error")
        if what in (vocab.INITIALIZE, "session") and error is not None:
            self._finish(REFUSED, f"the agent answered {what} with an error: {dumps(error).decode()[:300]}")
            return
        if what == vocab.INITIALIZE:
            version = get(msg.get("result"), "protocolVersion")
            if version != self.script.protocol_version:
                log.info(f"initialize: the agent speaks v{version}; the recording is v{self.script.protocol_version}")
            self._run_steps(list(self.script.auth), self._new_session, now)
        elif what == "step":
            if error is not None:
                log.info(f"the agent answered a recorded request with an error: {dumps(error).decode()[:200]}")
            self._run_steps(self._steps, self._then, now)
        elif what == "session":
            sid = get(msg.get("result"), "sessionId")
            if not isinstance(sid, str):
                self._finish(REFUSED, "the agent's session/new result has no sessionId")
                return
            self.live_session = sid
            log.info(f"live session {sid} plays recorded session {self.script.session_id}")
            self._next_turn(now)
        elif self.turn is not None and what == f"prompt {self.turn.index}":
            if error is not None:
                log.info(f"turn {self.turn.index}: the prompt got an error: {dumps(error).decode()[:200]}")
                self._end_turn("error", now)
            elif not self.script.v2:
                self._end_turn(get(msg.get("result"), "stopReason"), now)

    def _update(self, params: Any, now: float) -> None:
        if self.turn is None or not self._prompted or get(params, "sessionId") != self.live_session:
            return
        self._updates += 1
        self._tools.note(params)
        update = get(params, "update")
        if (
            self.script.v2
            and get(update, "sessionUpdate") == vocab.STATE_UPDATE
            and get(update, "state") == vocab.IDLE
            and get(update, "stopReason") is not None
        ):
            self._end_turn(get(update, "stopReason"), now)
            return
        turn = self.turn
        if turn.cancel_after and not self._cancelled and self._updates >= turn.cancel_after:
            self._cancel(f"after {self._updates} agent update{'s' if self._updates != 1 else ''}, as recorded")

    # -- steps and turns -----------------------------------------------------------------------------------
    def _run_steps(self, steps: list[tuple[str, dict]], then: Callable[[float], None], now: float) -> None:
        """Send recorded requests one at a time (each waits for its answer), then go on with `then`."""
        self._steps, self._then = steps, then
        if not steps:
            then(now)
            return
        method, params = steps.pop(0)
        if "sessionId" in params:
            params = {**params, "sessionId": self.live_session}
        log.info(f"{method}: sent as recorded")
        self._request(method, params, "step")

    def _new_session(self, now: float) -> None:
        params = dict(self.script.origin_params)
        if self.opt.cwd:
            params["cwd"] = self.opt.cwd
        params.pop("sessionId", None)
        if self.script.origin_method != vocab.SESSION_NEW:
            log.info(f"the recorded session began with {self.script.origin_method}: rerun starts it with session/new")
            keep = ("cwd", "mcpServers", "additionalDirectories", "_meta")
            params = {k: v for k, v in params.items() if k in keep}
            params.setdefault("mcpServers", [])
        self.phase = vocab.SESSION_NEW
        self.deadline = now + max(self.opt.timeout, SETUP_TIMEOUT)
        self._request(vocab.SESSION_NEW, params, "session")

    def _next_turn(self, now: float) -> None:
        done = self.turn.index if self.turn else 0
        if done >= len(self.script.turns):
            self._finish(DONE, f"{self.completed} of {counted(len(self.script.turns), 'turn')} completed")
            return
        self.turn = self.script.turns[done]
        self.phase = f"turn {self.turn.index}"
        self._updates, self._prompt_at, self._cancelled, self._ended = 0, now, False, False
        self._kinds_seen, self._permission_n, self._prompted = {}, 0, False
        self.deadline = now + self.opt.timeout
        self._run_steps(list(self.turn.before), self._prompt, now)

    def _prompt(self, now: float) -> None:
        assert self.turn is not None
        self._updates, self._prompt_at, self._prompted = 0, now, True
        params = dict(self.turn.params)
        params["sessionId"] = self.live_session
        self._request(vocab.PROMPT, params, f"prompt {self.turn.index}")

    def _end_turn(self, stop: Any, now: float) -> None:
        if self.turn is None or self._ended:
            return
        self._ended = True
        self.completed += 1
        recorded = self.turn.stop_reason
        note = "" if stop == recorded else f" (recorded: {recorded})"
        log.info(f"turn {self.turn.index} ended: {stop}{note}")
        self._next_turn(now)

    def _cancel(self, why: str) -> None:
        self._cancelled = True
        assert self.turn is not None
        log.info(f"turn {self.turn.index}: session/cancel {why}")
        self._out.append(dumps({"jsonrpc": "2.0", "method": vocab.CANCEL, "params": {"sessionId": self.live_session}}))

    def _finish(self, outcome: str, message: str) -> None:
        if self.outcome is None:
            self.outcome, self.message, self.phase = outcome, message, "done"
            self.deadline = None

    # -- time -----------------------------------------------------------------------------------------------
    def _cancel_due(self) -> float | None:
        t = self.turn
        if t is None or not self._prompted or self._cancelled or self._ended or t.cancel_after != 0:
            return None
        return self._prompt_at + (t.cancel_delay or 0.0)

    def next_deadline(self) -> float | None:
        """When `poll` must run even if the agent says nothing (None: finished)."""
        if self.outcome is not None:
            return None
        times = [t for t in (self.deadline, self._cancel_due()) if t is not None]
        return min(times, default=None)

    def poll(self, now: float) -> list[bytes]:
        """Send what is due (a cancel by delay); finish with TIMEOUT when the phase ran out of time."""
        if self.outcome is None:
            due = self._cancel_due()
            if due is not None and now >= due:
                self._cancel(f"{now - self._prompt_at:.2f}s after the prompt, as recorded")
            if self.deadline is not None and now >= self.deadline:
                if self.phase.startswith("turn") and self.turn:
                    self._finish(TIMEOUT, f"turn {self.turn.index} did not end within {self.opt.timeout:g}s")
                else:
                    limit = max(self.opt.timeout, SETUP_TIMEOUT)
                    self._finish(TIMEOUT, f"the agent did not answer {self.phase} within {limit:g}s")
        return self._flush()

    # -- answering the agent --------------------------------------------------------------------------------
    def _answer(self, method: str, params: Any) -> dict:
        handlers: dict[str, Callable[[Any], dict]] = {
            vocab.REQUEST_PERMISSION: self._permission,
            vocab.FS_READ: self._read,
            vocab.FS_WRITE: self._write,
        }
        if method in handlers:
            return handlers[method](params)
        if method.startswith("terminal/"):
            return self._terminal(method, params)
        log.info(f"the agent asked {method}: answered -32601")
        return _error(METHOD_NOT_FOUND, f"Method not found: {method} (acp-relay rerun does not serve it)", method)

    def _permission(self, params: Any) -> dict:
        title, kind = self._tools.title_kind(params)
        options = get(params, "options")
        options = options if isinstance(options, list) else []
        kind = kind if isinstance(kind, str) else None  # no kind (or a bad one) is a kind of its own
        place = self._kinds_seen.get(kind, 0)
        self._kinds_seen[kind] = place + 1
        self._permission_n += 1
        rec, rule = self._match_permission(place, title, kind)
        answer = None
        if rec is not None:
            self._used.add(id(rec))
            answer = self._recorded_choice(rec, options)
        policy = None
        if answer is None:
            policy = "deny" if self.opt.answer == "recorded" else self.opt.answer
            answer = _choose(options, policy)
        self._report(title, kind, rule, policy, answer)
        return answer

    def _match_permission(self, place: int, title: Any, kind: str | None) -> tuple[RecordedPermission | None, str]:
        """The recorded request this one stands for, and by which rule (KIND_PLACE, TITLE, NO_MATCH)."""
        recorded = self.turn.permissions if self.turn else []
        same_kind = [p for p in recorded if (p.kind if isinstance(p.kind, str) else None) == kind]
        if place < len(same_kind) and id(same_kind[place]) not in self._used:
            return same_kind[place], KIND_PLACE
        if isinstance(title, str) and title:
            free = [p for p in recorded if id(p) not in self._used and p.title == title]
            rec = next((p for p in free if p.kind == kind), free[0] if free else None)
            if rec is not None:
                return rec, TITLE
        return None, NO_MATCH

    def _report(self, title: Any, kind: Any, rule: str, policy: str | None, answer: dict) -> None:
        """Say which rule answered a permission request: in the log, and in `permissions` for the report."""
        outcome = get(get(answer.get("result"), "outcome"), "outcome")
        chosen = "error" if "error" in answer else get(get(answer.get("result"), "outcome"), "optionId") or outcome
        entry = {
            "turn": self.turn.index if self.turn else None,
            "n": self._permission_n,
            "kind": kind if isinstance(kind, str) else None,
            "title": redact_text(title)[0] if isinstance(title, str) else None,  # a title may hold a command line
            "rule": rule,
            "answered_by": "recording" if policy is None else f"--answer {policy}",
            "answer": chosen if isinstance(chosen, str) else None,
        }
        self.permissions.append(entry)
        how = {KIND_PLACE: "matched by kind and place", TITLE: "matched by title", NO_MATCH: "no recorded match"}[rule]
        if policy is not None and rule != NO_MATCH:
            how += ", but its option is not offered"
        log.info(
            f"turn {entry['turn']}: permission {entry['n']} ({clean(str(entry['kind']))}) {clean(repr(entry['title']), 120)}:"
            f" {how}; answered {clean(str(entry['answer']))} ({entry['answered_by']})"
        )

    def _recorded_choice(self, rec: RecordedPermission, options: list) -> dict | None:
        if "error" in rec.answer:
            return rec.answer
        outcome = get(get(rec.answer.get("result"), "outcome"), "outcome")
        if outcome == "cancelled":
            return {"result": {"outcome": {"outcome": "cancelled"}}}
        chosen = get(get(rec.answer.get("result"), "outcome"), "optionId")
        ids = [get(o, "optionId") for o in options]
        if chosen in ids:
            return {"result": {"outcome": {"outcome": "selected", "optionId": chosen}}}
        kind = next((get(o, "kind") for o in rec.options if get(o, "optionId") == chosen), None)
        same_kind = next((get(o, "optionId") for o in options if kind is not None and get(o, "kind") == kind), None)
        if same_kind is not None:
            return {"result": {"outcome": {"outcome": "selected", "optionId": same_kind}}}
        return None

    def _recorded(self, table: dict, key: Any) -> dict | None:
        """The next recorded answer for `key` (the last one again once they are used up)."""
        answers = table.get(key)
        if not answers:
            return None
        i = self._cursor.get((id(table), key), 0)
        self._cursor[(id(table), key)] = i + 1
        return answers[min(i, len(answers) - 1)]

    def _recorded_path(self, path: str) -> str:
        """The live path as the recording named it (the recorded cwd in place of --cwd)."""
        live, rec = self.opt.cwd, self.script.cwd
        if live and rec and path.startswith(live.rstrip("/") + "/"):
            return rec.rstrip("/") + "/" + path[len(live.rstrip("/")) + 1 :]
        return path

    def _inside(self, path: Any) -> str | None:
        """`path` when it is absolute and under the cwd (what --fs real may touch)."""
        if not isinstance(path, str) or not os.path.isabs(path) or not self.cwd:
            return None
        real, root = os.path.normpath(path), os.path.normpath(self.cwd)
        return real if real == root or real.startswith(root.rstrip("/") + "/") else None

    def _read(self, params: Any) -> dict:
        path = get(params, "path")
        if self.opt.fs == "none":
            return _error(INTERNAL_ERROR, f"acp-relay rerun --fs none: file reads are refused ({path})")
        if self.opt.fs == "recorded":
            answer = self._recorded(self.script.fs_reads, self._recorded_path(str(path)))
            if answer is None:
                log.info(f"fs/read_text_file {path}: not in the recording, answered an error")
                return _error(NOT_FOUND, f"acp-relay rerun: the recording never read {path} (try --fs real)")
            return answer
        inside = self._inside(path)
        if inside is None or self.read_file is None:
            return _error(INVALID_PARAMS, f"acp-relay rerun --fs real: {path} is not an absolute path under {self.cwd}")
        try:
            text = self.read_file(inside)
        except (OSError, UnicodeDecodeError) as exc:
            return _error(NOT_FOUND, f"cannot read {path}: {exc}")
        return {"result": {"content": _slice(text, get(params, "line"), get(params, "limit"))}}

    def _write(self, params: Any) -> dict:
        path = get(params, "path")
        if self.opt.fs != "real":
            log.info(f"fs/write_text_file {path}: acknowledged, not written (--fs {self.opt.fs})")
            return {"result": None}
        inside = self._inside(path)
        content = get(params, "content")
        if inside is None or self.write_file is None or not isinstance(content, str):
            return _error(INVALID_PARAMS, f"acp-relay rerun --fs real: {path} is not an absolute path under {self.cwd}")
        try:
            self.write_file(inside, content)
        except OSError as exc:
            return _error(INTERNAL_ERROR, f"cannot write {path}: {exc}")
        return {"result": None}

    def _terminal(self, method: str, params: Any) -> dict:
        if method == vocab.TERMINAL_CREATE:
            key = command_key(params)
            answer = self._recorded(self.script.terminals, key)
            if answer is None:
                cmd = " ".join((key[0], *key[1]))
                log.info(f"terminal/create {cmd!r}: not in the recording, answered an error")
                return _error(INTERNAL_ERROR, f"acp-relay rerun runs no commands; `{cmd}` was not recorded")
            tid = get(answer.get("result"), "terminalId")
            if isinstance(tid, str):
                self._terminals.add(tid)
            return answer
        tid = str(get(params, "terminalId"))
        answer = self._recorded(self.script.terminal_calls, (method, tid)) if tid in self._terminals else None
        if answer is None:
            return _error(INTERNAL_ERROR, f"acp-relay rerun: no recorded {method} for terminal {tid}")
        return answer


def _choose(options: list, policy: str) -> dict:
    """allow: the first allow option (once before always); deny: a reject option, else cancelled."""
    kinds = ("allow_once", "allow_always") if policy == "allow" else ("reject_once", "reject_always")
    for kind in kinds:
        for o in options:
            if get(o, "kind") == kind and get(o, "optionId") is not None:
                return {"result": {"outcome": {"outcome": "selected", "optionId": o["optionId"]}}}
    return {"result": {"outcome": {"outcome": "cancelled"}}}


def _slice(text: str, line: Any, limit: Any) -> str:
    if not isinstance(line, int) and not isinstance(limit, int):
        return text
    lines = text.splitlines(keepends=True)
    start = max(0, line - 1) if isinstance(line, int) else 0
    end = start + limit if isinstance(limit, int) and limit >= 0 else len(lines)
    return "".join(lines[start:end])


def _error(code: int, message: str, method: str | None = None) -> dict:
    err: dict[str, Any] = {"code": code, "message": message}
    if method is not None:
        err["data"] = {"method": method}
    return {"error": err}
