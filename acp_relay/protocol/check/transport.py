"""The Streamable HTTP & WebSocket transport RFD's rules, judged on a recording's transport events.

A separate rule set beside the message rules (rules.py, engine.py): its input is transport_events rows,
not frames, and its findings are about the connection (frame None), each naming the event it is about.
Both sides are judged: `side` agent is what a remote agent's server answered us (run --connect, proxy's
upstream), `side` client what a client sent to our listener (serve, proxy). Where the shipped SDKs differ
from the RFD (session-scoped SSE streams, answers to the agent's requests without Acp-Session-Id,
HTTP/1.1), the finding is a warning that says so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, NamedTuple

from .. import vocab
from ..remote import RELAY_ANSWER, SESSION_SCOPED
from .rules import ERROR, INFO, WARNING, Finding, Rule

RFD = "Streamable HTTP & WebSocket Transport RFD"
_RULES = [
    Rule(
        "transport.initialize-status",
        ERROR,
        "initialize not answered 200 with an Acp-Connection-Id header",
        f"{RFD}: Connection Initialization",
    ),
    Rule(
        "transport.post-status",
        ERROR,
        "a POST other than initialize answered with a 2xx other than 202",
        f"{RFD}: Unified Endpoint Routing",
    ),
    Rule(
        "transport.content-type",
        ERROR,
        "a POST without Content-Type: application/json, or one not refused with 415",
        f"{RFD}: Content Negotiation and Validation",
    ),
    Rule(
        "transport.session-header",
        ERROR,
        "a session-scoped POST without Acp-Session-Id, or one not refused with 400",
        f"{RFD}: Identity Model",
    ),
    Rule(
        "transport.answer-session-header",
        WARNING,
        "an answer to the agent's request POSTed without Acp-Session-Id (the Python SDK's client does this; the"
        " TypeScript SDK's, when the request came on the connection's stream)",
        f"{RFD}: Identity Model",
    ),
    Rule(
        "transport.unknown-connection",
        ERROR,
        "a request naming a connection id the server never gave, not answered 404",
        f"{RFD}: Unified Endpoint Routing",
    ),
    Rule(
        "transport.accept",
        ERROR,
        "a GET stream without Accept: text/event-stream, or one not refused with 406",
        f"{RFD}: Content Negotiation and Validation",
    ),
    Rule(
        "transport.session-stream",
        WARNING,
        "a session-scoped SSE stream (Acp-Session-Id on GET): the RFD has one stream per connection; both SDKs open these",
        f"{RFD}: Revision history 2026-04-23",
    ),
    Rule(
        "transport.http2", WARNING, "Streamable HTTP over HTTP/1.1: the RFD requires HTTP/2", f"{RFD}: Requires HTTP/2"
    ),
    Rule(
        "transport.relay-answer",
        WARNING,
        "a request the remote agent never took (its POST refused, its link gone), answered to the editor by"
        " acp-relay with a JSON-RPC error: the agent did not send that answer",
        "acp-relay: run --connect answers what the remote refused",
    ),
    Rule("transport.ws-close", WARNING, "a WebSocket that closed with a code other than 1000 or 1001", "RFC 6455 §7.4"),
    Rule(
        "transport.split-order",
        WARNING,
        "a session's messages came over a session-scoped SSE stream beside the connection's: the order between"
        " the two is not defined (both SDK servers answer session/load on one and replay on the other), so"
        " findings about message order are warnings",
        f"{RFD}: Single long-lived GET stream per connection",
    ),
]
TRANSPORT_RULES: dict[str, Rule] = {r.id: r for r in _RULES}


class Event(NamedTuple):
    """One transport_events row, its details parsed."""

    id: int
    event: str
    side: str | None
    method: str | None
    status: int | None
    connection: str | None
    session: str | None
    details: dict[str, Any]


def _header(pairs: Any, name: str) -> str | None:
    for pair in pairs or ():
        if isinstance(pair, list | tuple) and len(pair) == 2 and str(pair[0]).lower() == name:
            return str(pair[1])
    return None


def _sent(e: Event) -> Any:
    """The request's headers: what we sent (side agent) or what a client sent us (side client)."""
    return e.details.get("sent") if e.side == "agent" else e.details.get("headers")


def check_transport(events: Iterable[Event]) -> list[Finding]:
    """Every transport rule broken in one connection's events, in event order."""
    judge = _Judge()
    for e in events:
        judge.event(e)
    return judge.out


class _Judge:
    """The state the rules need across one connection's events."""

    def __init__(self) -> None:
        self.out: list[Finding] = []
        self.given: set[str] = set()  # connection ids the server handed out (initialize's header, the WebSocket's)
        self.http1_said = False

    def add(self, rule: str, e: Event, message: str) -> None:
        r = TRANSPORT_RULES[rule]
        self.out.append(
            Finding(
                None,
                e.session,
                rule,
                r.severity,
                f"transport event {e.id} ({e.side or '?'} side, {e.method or e.event}): {message}",
                r.spec,
            )
        )

    def event(self, e: Event) -> None:
        d = e.details
        if e.event == RELAY_ANSWER:
            self.add(
                "transport.relay-answer",
                e,
                f"acp-relay answered {d.get('rpc') or 'a request'} (id {d.get('id')!r}) itself: {d.get('reason')}",
            )
            return
        if e.event == "ws_open" and e.connection:
            self.given.add(e.connection)
        if e.event == "ws_close" and e.status not in (None, 1000, 1001, 1005):
            self.add("transport.ws-close", e, f"closed with code {e.status}")
        if e.event not in ("http", "sse_open") or e.status is None:
            return
        if d.get("http") == "HTTP/1.1" and not self.http1_said:
            self.http1_said = True
            self.add("transport.http2", e, "this connection's requests went over HTTP/1.1")
        opening = e.method == "POST" and d.get("rpc") == vocab.INITIALIZE and not d.get("answer")
        if self.given and e.connection and e.connection not in self.given and not opening and e.status != 404:
            self.add(
                "transport.unknown-connection",
                e,
                f"Acp-Connection-Id {e.connection} was never given, answered {e.status}",
            )
        if e.event == "sse_open":
            self._stream(e)
        elif e.method == "POST":
            self._post(e, e.status)

    def _stream(self, e: Event) -> None:
        """A GET that opened an SSE stream."""
        accept = _header(_sent(e), "accept") or ""
        if "text/event-stream" not in accept and "*/*" not in accept and e.status != 406:
            self.add("transport.accept", e, f"Accept {accept!r}, answered {e.status}")
        if e.session:
            self.add("transport.session-stream", e, f"a stream for session {e.session}")

    def _post(self, e: Event, status: int) -> None:
        """A POST and its answer's status."""
        d = e.details
        content_type = (_header(_sent(e), "content-type") or "").split(";")[0].strip().lower()
        if content_type != "application/json":
            self.add(
                "transport.content-type",
                e,
                f"Content-Type {content_type or 'missing'!r}, answered {status}"
                + ("" if status == 415 else " (415 expected)"),
            )
            return
        rpc = d.get("rpc")
        if rpc == vocab.INITIALIZE and not d.get("answer"):
            got = e.connection if e.side == "client" else _header(d.get("headers"), "acp-connection-id")
            if status != 200 or not got:
                self.add(
                    "transport.initialize-status",
                    e,
                    f"answered {status}" + ("" if got else " without Acp-Connection-Id"),
                )
            if got:
                self.given.add(got)
            return
        if rpc in SESSION_SCOPED and not e.session:
            self.add(
                "transport.session-header",
                e,
                f"{rpc} without Acp-Session-Id, answered {status}" + ("" if status == 400 else " (400 expected)"),
            )
            return
        if d.get("answer") and not e.session:
            self.add("transport.answer-session-header", e, "an answer to the agent's request without Acp-Session-Id")
        if 200 <= status < 300 and status != 202:
            self.add("transport.post-status", e, f"answered {status}, not 202")


# Message rules whose finding is only about the order of two agent messages, which two SSE streams can swap.
ORDER_RULES = frozenset({"lifecycle.after-cancel", "lifecycle.replay-after-answer", "lifecycle.resume-history"})


def soften_split_order(found: list[Finding], events: Iterable[Event]) -> list[Finding]:
    """The message findings, with the order ones made warnings when the agent's messages came over more than one
    SSE stream (the SDK servers' session-scoped streams): the recording cannot tell their order, so an error
    would blame a clean agent. One transport.split-order finding says why, once, when it changed anything."""
    split = next((e for e in events if e.event == "sse_open" and e.side == "agent" and e.session), None)
    if split is None:
        return found
    out: list[Finding] = []
    softened = 0
    for f in found:
        if f.rule in ORDER_RULES and f.severity == ERROR:
            softened += 1
            f = dataclasses.replace(
                f, severity=WARNING, message=f"{f.message} (the two SSE streams' order is not defined)"
            )
        out.append(f)
    if softened:
        r = TRANSPORT_RULES["transport.split-order"]
        out.append(
            Finding(
                None,
                split.session,
                r.id,
                r.severity,
                f"transport event {split.id} ({split.side} side, GET): a stream for session {split.session} beside"
                f" the connection's; {softened} message-order finding(s) made warnings",
                r.spec,
            )
        )
    return out


def relay_made(found: list[Finding], made: Iterable[int]) -> list[Finding]:
    """The message findings, with those about a frame acp-relay wrote itself (store.transport.relay_answers)
    made info and said to be the relay's: whatever they find, the agent did not send it."""
    mine = set(made)
    return [
        dataclasses.replace(f, severity=INFO, message=f"{f.message} (this answer was made by acp-relay, not the agent)")
        if f.frame in mine
        else f
        for f in found
    ]
