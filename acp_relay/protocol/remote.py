"""The pure rules of remote ACP (the Streamable HTTP & WebSocket transport RFD), shared by every mode.

No I/O: how an endpoint URL is read and shown, which headers a POST carries, how a message that arrived
as a WebSocket text frame or an SSE payload becomes one NDJSON line for a stdio peer, and how headers
are written into a recording without their credentials.
"""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from . import vocab
from .jsonrpc import dumps, loads
from .redact import PLACEHOLDER, secret_key

CONNECTION_ID = "Acp-Connection-Id"
SESSION_ID = "Acp-Session-Id"
JSON = "application/json"
EVENT_STREAM = "text/event-stream"
# Methods the RFD calls session-scoped: their POST carries Acp-Session-Id (so do answers to the agent's
# requests, which the RFD lists as "permission responses, etc."). Methods that create or attach a session
# are left out: the server may not know the session on this connection yet.
SESSION_SCOPED = frozenset({vocab.PROMPT, vocab.CANCEL, *vocab.SETTERS, vocab.SESSION_CLOSE})
# Methods that attach a session the connection may not have seen yet. The RFD's resume flow sends
# Acp-Session-Id on them, and the TypeScript SDK's server refuses them (400) without it; the Python SDK's
# server answers 404 to a header naming a session it has not seen on this connection (the client then
# sends the message again without the header).
ATTACHING = frozenset({vocab.SESSION_LOAD, vocab.SESSION_RESUME})
ENDPOINT_SCHEMES = {"ws": "ws", "wss": "ws", "http": "http", "https": "http"}


class EndpointError(ValueError):
    """A URL or address the remote transports cannot use; the message says why."""


def transport_of(url: str) -> str:
    """`ws` or `http` for a --connect URL; EndpointError for anything else."""
    parts = urlsplit(url)
    kind = ENDPOINT_SCHEMES.get(parts.scheme.lower())
    if kind is None:
        raise EndpointError(f"{url!r}: the URL must start with ws://, wss://, http:// or https://")
    if not parts.hostname:
        raise EndpointError(f"{url!r}: the URL has no host")
    try:
        parts.port  # noqa: B018 - urlsplit checks the port only when it is read
    except ValueError:
        raise EndpointError(f"{url!r}: the port is not a number from 0 to 65535")
    return kind


def shown_endpoint(url: str) -> str:
    """The URL as a recording keeps it: no user:password, credential-like query values redacted."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    query = "&".join(
        f"{k}={PLACEHOLDER}" if v and secret_key(k) else (f"{k}={v}" if sep else k)
        for k, sep, v in (item.partition("=") for item in parts.query.split("&") if item)
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def parse_header(text: str) -> tuple[str, str]:
    """`--header 'Name: value'` as (name, value); EndpointError when it is not a usable header."""
    name, colon, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not colon or not name:
        raise EndpointError(f"--header {text!r}: expected 'Name: value'")
    if any(c in name for c in ' \t\r\n()<>@,;\\"/[]?={}') or not name.isascii() or not name.isprintable():
        raise EndpointError(f"--header {text!r}: {name!r} is not a valid header name")
    if "\r" in value or "\n" in value or "\0" in value:
        raise EndpointError(f"--header {text!r}: the value holds a line break")
    return name, value


def recorded_headers(headers: Any, always: frozenset[str] = frozenset()) -> list[list[str]]:
    """[[name, value], ...] for a recording: values of credential-like headers (Authorization, Cookie,
    Set-Cookie, X-Api-Key, anything with token, secret or key in its name) and of the names in `always`
    (lower case: the user's --header names) replaced by PLACEHOLDER."""
    out: list[list[str]] = []
    for name, value in headers:
        n = name.decode("latin-1") if isinstance(name, bytes) else str(name)
        v = value.decode("latin-1") if isinstance(value, bytes) else str(value)
        out.append([n, PLACEHOLDER if secret_key(n) or n.lower() in always else v])
    return out


def one_line(payload: bytes) -> bytes:
    """A message as one NDJSON line: a JSON text may hold line breaks only as whitespace between tokens
    (a string cannot hold a raw one), so each becomes a space and the message means the same."""
    if b"\n" not in payload and b"\r" not in payload:
        return payload
    return payload.replace(b"\r\n", b" ").replace(b"\n", b" ").replace(b"\r", b" ")


class Outgoing:
    """What one client-to-agent line needs on the way out over Streamable HTTP: parsed once."""

    __slots__ = ("is_initialize", "method", "rpc_id", "session_id", "is_request", "is_response", "valid")

    def __init__(self, line: bytes) -> None:
        self.valid = False
        self.method: str | None = None
        self.rpc_id: Any = None
        self.session_id: str | None = None
        self.is_request = self.is_response = self.is_initialize = False
        try:
            msg = loads(line)
        except Exception:
            return
        if not isinstance(msg, dict):
            return
        self.valid = True
        method = msg.get("method")
        self.method = method if isinstance(method, str) else None
        self.rpc_id = msg.get("id")
        self.is_request = self.method is not None and "id" in msg
        self.is_response = self.method is None and "id" in msg
        self.is_initialize = self.is_request and self.method == vocab.INITIALIZE
        params = msg.get("params")
        sid = params.get("sessionId") if isinstance(params, dict) else None
        self.session_id = sid if isinstance(sid, str) else None


RELAY_ANSWER = "relay_answer"  # the transport event of an answer the relay made itself (see relay_answer)
RELAY_ERROR_CODE = -32603  # JSON-RPC's internal error, as the TypeScript SDK's own HTTP client answers a refused POST


def relay_answer(
    out: Outgoing, why: str, status: int | None = None, body: str | None = None
) -> tuple[dict[str, Any], bytes]:
    """For a request the remote never took (its POST refused, or the link gone): the relay_answer transport
    event that names it, and the JSON-RPC error the relay sends the editor, which is owed an answer; the
    error says it came from acp-relay, not the agent."""
    event = {"event": RELAY_ANSWER, "side": "client", "rpc": out.method, "id": out.rpc_id, "status": status}
    event["reason"] = why
    data: dict[str, Any] = {"source": "acp-relay"}
    if status is not None:
        data["httpStatus"] = status
    if body:
        data["body"] = body
    error = {
        "code": RELAY_ERROR_CODE,
        "message": f"acp-relay: the request never reached the agent: {why}",
        "data": data,
    }
    return event, dumps({"jsonrpc": "2.0", "id": out.rpc_id, "error": error})


class SessionRouting:
    """Which Acp-Session-Id a POST carries, and which sessions' SSE streams a client opens.

    The RFD wants the header on every session-scoped POST, answers to the agent's requests included, and
    the TypeScript SDK's server refuses (400) any POST whose params name a session without it. The Python
    SDK's server answers 404 to a header naming a session it has not seen on this connection, so the header
    names a session this connection has seen (in a result or an agent message), or one being attached."""

    def __init__(self) -> None:
        self.known: set[str] = set()
        self._asked: dict[str, str] = {}  # id key of an agent request -> its sessionId

    def saw_incoming(self, payload: bytes) -> str | None:
        """Note an agent-to-client message; returns a session id seen for the first time (its stream is due)."""
        try:
            msg = loads(payload)
        except Exception:
            return None
        if not isinstance(msg, dict):
            return None
        sid = None
        params, result = msg.get("params"), msg.get("result")
        for holder in (params, result):
            if isinstance(holder, dict) and isinstance(holder.get("sessionId"), str):
                sid = holder["sessionId"]
                break
        if sid is not None and "method" in msg and "id" in msg:
            self._asked[repr(msg["id"])] = sid
        if sid is None or sid in self.known:
            return None
        self.known.add(sid)
        return sid

    def header_for(self, out: Outgoing) -> str | None:
        if out.is_response:
            sid = self._asked.pop(repr(out.rpc_id), None)
            return sid if sid in self.known else None
        if out.session_id is not None and (out.session_id in self.known or out.method in ATTACHING):
            return out.session_id
        return None


def parse_listen(text: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 as `[::1]:PORT`) for --listen; EndpointError when malformed."""
    host, colon, port = text.rpartition(":")
    if not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise EndpointError(f"--listen {text!r}: expected HOST:PORT (port 0 picks a free one)")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return host or "127.0.0.1", int(port)


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and `localhost`: the addresses a listener may bind without a token."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Guard:
    """Who may talk to a listener: the Host and Origin it answers to (against DNS rebinding: a page on
    evil.example that resolves its own name to 127.0.0.1 still sends `Host: evil.example`), and the bearer
    token a non-loopback listener requires. Pure: headers in, a refusal (status, reason) or None out."""

    def __init__(self, host: str, port: int, token: str | None = None, allow_hosts: tuple[str, ...] = ()) -> None:
        self.token = token.encode() if token else None
        names = {h.lower() for h in allow_hosts}
        if is_loopback(host):
            names |= {"localhost", "127.0.0.1", "[::1]", "::1"}
        self.any_host = not names and host in ("0.0.0.0", "::", "")  # a wildcard bind, nothing named: the token guards
        names.add(f"[{host}]".lower() if ":" in host else host.lower())
        self.names = names
        self.port = port

    def _host_ok(self, value: str) -> bool:
        if self.any_host:
            return True
        name, _, port = value.lower().rpartition(":") if not value.endswith("]") else (value.lower(), "", "")
        if not name or (port and not port.isdigit()):  # no port given
            name, port = value.lower(), ""
        return name in self.names and (not port or int(port) == self.port)

    def check(self, headers: dict[str, str], compare: Any) -> tuple[int, str] | None:
        """A refusal for these request headers (names lower case), or None. `compare` is a constant-time
        equality (hmac.compare_digest: the caller's, so this module does no crypto of its own)."""
        host = headers.get("host")
        if host is None or not self._host_ok(host):
            return 421, f"Host {host!r} is not this listener's"
        origin = headers.get("origin")
        if origin is not None and origin != "null":
            try:
                parts = urlsplit(origin)
            except ValueError:  # one it cannot split (`http://[::1`, `http://e\x1b[31m`)
                return 403, f"Origin {origin[:80]!r} is not a URL"
            netloc = parts.netloc
            if parts.scheme not in ("http", "https", "ws", "wss") or not self._host_ok(netloc):
                return 403, f"Origin {origin!r} is not allowed"
        elif origin == "null":
            return 403, "Origin 'null' is not allowed"
        if self.token is not None:
            auth = headers.get("authorization", "")
            scheme, _, given = auth.partition(" ")
            if scheme.lower() != "bearer" or not compare(given.strip().encode(), self.token):
                return 401, "a valid bearer token is required"
        return None
