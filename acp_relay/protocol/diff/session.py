"""What `acp-relay diff` compares of one session, folded from its recorded messages in one pass (pure).

`Digester.feed` takes the same `Event`s as the materializer (which it drives) and keeps, beside the
materialized state: the protocol as a sequence of tokens (direction, kind, method, update variant: no ids,
no session ids, no times), the metadata the peers announced, and the latencies per method.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .. import vocab
from ..jsonrpc import C2A, OPPOSITE, Correlator, get
from ..materialize import Event, Materializer, SessionState

Token = tuple[str, str, str | None, str | None]  # (direction, kind, method, update variant)


@dataclass
class SessionDigest:
    """One session as the diff layers see it."""

    name: str  # how the output names it (the session id)
    state: SessionState
    tokens: list[Token] = field(default_factory=list)
    token_turns: list[int] = field(default_factory=list)  # the turn (0 = before the first prompt) of each token
    meta: dict[str, Any] = field(default_factory=dict)
    latencies: dict[str, list[float]] = field(default_factory=dict)  # "c2a session/prompt" -> seconds

    @property
    def turn_durations(self) -> list[float | None]:
        return [t.duration for t in self.state.turns]


class Digester:
    """Feed a session's events in recorded order; read `digest` at the end."""

    def __init__(self, name: str, protocol_version: int = 1) -> None:
        self._mat = Materializer(protocol_version)
        self.digest = SessionDigest(name, self._mat.state)
        self._pending: Correlator[tuple[str, float]] = Correlator()  # (method, ts) of each request waiting
        self._turn = 0
        self._origin_seen = False

    def feed(self, event: Event | None, *, direction: str = C2A) -> None:
        """One message (None: a recorded line that is not JSON, kept as an `invalid` token)."""
        d = self.digest
        if event is None or not isinstance(event.message, dict):
            d.tokens.append((event.direction if event else direction, "invalid", None, None))
            d.token_turns.append(self._turn)
            return
        self._mat.feed(event)
        msg, direction = event.message, event.direction
        method = msg.get("method")
        variant = None
        if isinstance(method, str):
            kind = "request" if "id" in msg else "notification"
            if method == vocab.UPDATE:
                v = get(get(msg.get("params"), "update"), "sessionUpdate")
                variant = v if isinstance(v, str) else "?"
            if kind == "request":
                self._request(event, method, msg)
        else:
            kind = "error" if "error" in msg else "response"
            method = self._response(event, msg)
        if direction == C2A and method == vocab.PROMPT and kind == "request":
            self._turn += 1
        d.tokens.append((direction, kind, method if isinstance(method, str) else None, variant))
        d.token_turns.append(self._turn)

    def _request(self, event: Event, method: str, msg: dict) -> None:
        self._pending.request(event.direction, msg.get("id"), (method, event.ts))
        params = msg.get("params")
        if method == vocab.INITIALIZE and isinstance(params, dict):
            for key, value in params.items():
                self.digest.meta[f"client {key}"] = value

    def _response(self, event: Event, msg: dict) -> str | None:
        req_dir = OPPOSITE.get(event.direction, C2A)
        method, ts = self._pending.answer(event.direction, msg.get("id")) or (None, None)
        if method is None and isinstance(event.request, dict):
            m = event.request.get("method")
            method = m if isinstance(m, str) else None
        if method is None:
            return None
        if ts is not None:
            self.digest.latencies.setdefault(f"{req_dir} {method}", []).append(max(0.0, event.ts - ts))
        result = msg.get("result")
        if method == vocab.INITIALIZE and isinstance(result, dict):
            for key, value in result.items():
                self.digest.meta[f"agent {key}"] = value
        elif method in vocab.SESSION_ORIGINS and isinstance(result, dict) and not self._origin_seen:
            self._origin_seen = True
            for key, value in result.items():
                if key != "sessionId":
                    self.digest.meta[f"session {key}"] = value
        return method

    def finish(self) -> SessionDigest:
        """The digest, with what only the end of the session knows (commands, mode, config)."""
        state, meta = self.digest.state, self.digest.meta
        meta["protocol version"] = state.protocol_version
        for key, value in (
            ("final commands", state.commands),
            ("final mode", state.mode),
            ("final config options", state.config_options),
        ):
            if value is not None:
                meta[key] = value
        return self.digest


def digest(name: str, events: Iterable[Event | None], protocol_version: int = 1) -> SessionDigest:
    """Fold a whole session at once."""
    d = Digester(name, protocol_version)
    for event in events:
        d.feed(event)
    return d.finish()
