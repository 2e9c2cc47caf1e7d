"""The server end of remote ACP: one `/acp` endpoint, WebSocket and Streamable HTTP, as an ASGI app that
hypercorn serves on trio.

Each ACP connection (a WebSocket, or an HTTP `initialize` POST) gets a backend from the command's factory
(for `serve`, a local stdio agent of its own, recorded). The routing follows the RFD: POST `initialize`
200 with the agent's answer and Acp-Connection-Id, other POSTs 202; GET with `Accept: text/event-stream`
is the connection's SSE stream, where every agent message goes (the RFD's single stream); a session-scoped
GET (the SDK clients open one per session) is accepted and kept open with keepalives only; DELETE ends the
connection. Every request is checked first: Host and Origin, the bearer token, size and count limits.
"""

from __future__ import annotations

import hmac
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import trio

from ..protocol.remote import CONNECTION_ID, EVENT_STREAM, SESSION_ID, SESSION_SCOPED, Guard, Outgoing, recorded_headers
from ..protocol.words import counted
from .base import ms_since

log = logging.getLogger(__name__)

KEEPALIVE = 15.0  # seconds between SSE comments on a quiet stream
INITIALIZE_TIMEOUT = 30.0


class Backend(Protocol):
    """One ACP connection's far side: a local agent process (serve) or a remote agent (proxy)."""

    async def start(self, nursery: trio.Nursery) -> None: ...

    async def send(self, line: bytes) -> bool: ...

    lines: trio.MemoryReceiveChannel[bytes]

    async def close(self) -> int: ...


class Opened(Protocol):
    """What the factory hands back: the backend, and where its transport events are recorded."""

    backend: Backend

    def event(self, fields: dict[str, Any]) -> None: ...

    async def finish(self, code: int, closed_by: str, error: str | None) -> None: ...


Factory = Callable[[str, str], Awaitable[Opened]]  # (transport, peer address) -> a started connection


class Limits:
    def __init__(self, max_message: int = 16 << 20, max_connections: int = 16, idle: float = 600.0) -> None:
        self.max_message, self.max_connections, self.idle = max_message, max_connections, idle


class _Http:
    """A Streamable HTTP connection: its backend, the queue its SSE stream drains, its clock."""

    def __init__(self, cid: str, opened: Opened) -> None:
        self.cid, self.opened = cid, opened
        # Bounded: while no stream drains it, a full queue stops reading the agent (which then waits).
        self.send_out, self.out = trio.open_memory_channel[bytes](1024)
        self.waiting: dict[str, trio.MemorySendChannel[bytes]] = {}  # initialize's id -> its POST
        self.last = time.monotonic()
        self.done = trio.Event()
        self.streams = 0


class _WsLink:
    """One WebSocket connection's three tasks: the agent's lines to the client, the client's messages to the
    agent, and the idle timer. The first to end cancels the others and says how it ended (`by`, and the
    close `code` and `error` when there is one)."""

    def __init__(self, receive: Any, send: Any, opened: Opened, limits: Limits) -> None:
        self.receive, self.send, self.opened, self.limits = receive, send, opened, limits
        self.backend = opened.backend
        self.code: int | None = None
        self.by = "client_close"
        self.error: str | None = None
        self.last = time.monotonic()
        self.cancel: Callable[[], None] = lambda: None

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self.cancel = nursery.cancel_scope.cancel
            nursery.start_soon(self._to_client)
            nursery.start_soon(self._from_client)
            nursery.start_soon(self._idle)

    async def _to_client(self) -> None:
        async for line in self.backend.lines:
            self.last = time.monotonic()
            try:
                await self.send({"type": "websocket.send", "text": line.decode("utf-8")})
            except UnicodeDecodeError:
                self.opened.event({"event": "dropped", "side": "client", "reason": "invalid UTF-8", "bytes": len(line)})
        self.by = "agent_exit"
        self.cancel()

    async def _from_client(self) -> None:
        max_message = self.limits.max_message
        while True:
            message = await self.receive()
            if message["type"] == "websocket.disconnect":
                self.code = message.get("code")
                if self.code == 1009:  # hypercorn's own bound (twice ours) closed it
                    self.by, self.error = "limit", "message too big"
                break
            self.last = time.monotonic()
            text, data = message.get("text"), message.get("bytes")
            if text is not None:
                if len(text) * 4 > max_message and len(text.encode()) > max_message:
                    self.code, self.by, self.error = 1009, "limit", "message too big"
                    await self.send({"type": "websocket.close", "code": 1009})
                    break
                if not await self.backend.send(text.encode("utf-8")):
                    break
            elif data is not None:
                self.opened.event({"event": "dropped", "side": "client", "reason": "binary frame", "bytes": len(data)})
        self.cancel()

    async def _idle(self) -> None:
        while True:
            left = self.last + self.limits.idle - time.monotonic()
            if left <= 0:
                self.code, self.by, self.error = 1001, "idle", f"idle for {self.limits.idle:g} s"
                try:
                    await self.send({"type": "websocket.close", "code": 1001, "reason": "idle"})
                except Exception:
                    pass
                self.cancel()
                return
            await trio.sleep(left)

    async def end(self, cid: str) -> None:
        """The agent ended (its exit status closes the WebSocket if the agent ended first), and recorded."""
        code = await self.backend.close()
        if self.by == "agent_exit":
            try:
                await self.send({"type": "websocket.close", "code": 1000 if code == 0 else 1011})
            except Exception:
                pass
        self.opened.event(
            {"event": "ws_close", "side": "client", "status": self.code, "connection": cid, "by": self.by}
        )
        await self.opened.finish(code, self.by, self.error)


class AcpApp:
    """The ASGI application. `nursery` (set by serve_app) owns the connections' tasks."""

    def __init__(self, factory: Factory, guard: Guard, limits: Limits) -> None:
        self.factory, self.guard, self.limits = factory, guard, limits
        self.nursery: trio.Nursery | None = None
        self.active = 0
        self.http: dict[str, _Http] = {}

    # -- shared checks ------------------------------------------------------------------------------------
    def _checked(self, scope: dict[str, Any]) -> tuple[tuple[int, str] | None, dict[str, str]]:
        """(a refusal, or None; the request's headers, names lower case, once they have passed _malformed)."""
        if scope.get("path") not in ("/acp", "/acp/"):
            return (404, "the ACP endpoint is /acp"), {}
        malformed = _malformed(scope["headers"])
        if malformed is not None:
            return malformed, {}
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        return self.guard.check(headers, hmac.compare_digest), headers

    def _full(self) -> bool:
        return self.active >= self.limits.max_connections

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
        elif scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    # -- WebSocket ------------------------------------------------------------------------------------------
    async def _websocket(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if (await receive())["type"] != "websocket.connect":
            return
        refusal, _ = self._checked(scope)
        if refusal is None and self._full():
            refusal = 503, f"at most {self.limits.max_connections} ACP connections at once"
        if refusal is not None:
            log.warning(f"refused a WebSocket from {_peer(scope)}: {refusal[1]}")
            await send({"type": "websocket.http.response.start", "status": refusal[0], "headers": _plain})
            await send({"type": "websocket.http.response.body", "body": refusal[1].encode()})
            return
        self.active += 1
        try:
            await self._websocket_connection(scope, receive, send)
        finally:
            self.active -= 1

    async def _websocket_connection(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        start = time.perf_counter()
        try:
            opened = await self.factory("ws", _peer(scope))
        except OSError as exc:
            await send({"type": "websocket.http.response.start", "status": 502, "headers": _plain})
            await send({"type": "websocket.http.response.body", "body": str(exc).encode()})
            return
        cid = uuid.uuid4().hex
        await send({"type": "websocket.accept", "headers": [(CONNECTION_ID.lower().encode(), cid.encode())]})
        opened.event(
            {
                "event": "ws_open",
                "side": "client",
                "method": "GET",
                "status": 101,
                "ms": ms_since(start),
                "connection": cid,
                "headers": recorded_headers(scope["headers"]),
                "peer": _peer(scope),
            }
        )
        link = _WsLink(receive, send, opened, self.limits)
        try:
            await link.run()
        finally:
            with trio.CancelScope(shield=True):  # the server shutting down still ends the agent and records it
                await link.end(cid)

    # -- Streamable HTTP ----------------------------------------------------------------------------------
    async def _http(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        refusal, headers = self._checked(scope)
        if refusal is not None:
            log.warning(f"refused {scope['method']} from {_peer(scope)}: {refusal[1]}")
            # The body is not read, so the connection cannot carry another request: say so, or a client
            # that reuses it races the server's close ("Server disconnected without sending a response").
            extra = [(b"www-authenticate", b"Bearer")] if refusal[0] == 401 else []
            await _respond(send, refusal[0], refusal[1], [*extra, (b"connection", b"close")])
            return
        method = scope["method"]
        if method == "POST":
            await self._post(scope, headers, receive, send)
        elif method == "GET":
            await self._get(headers, send)
        elif method == "DELETE":
            await self._delete(headers, send)
        else:
            await _respond(send, 405, "POST, GET or DELETE", [(b"allow", b"POST, GET, DELETE")])

    async def _read_body(self, receive: Any) -> bytes | None:
        """The request body, or None once it passes the message limit (the rest is not read)."""
        parts: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(parts)
            size += len(message.get("body", b""))
            if size > self.limits.max_message:
                return None
            parts.append(message.get("body", b""))
            if not message.get("more_body"):
                return b"".join(parts)

    async def _post(self, scope: dict[str, Any], headers: dict[str, str], receive: Any, send: Any) -> None:
        start = time.perf_counter()
        content_type = headers.get("content-type", "")
        if content_type.split(";")[0].strip().lower() != "application/json":
            await _respond(send, 415, "Content-Type must be application/json")
            return
        body = await self._read_body(receive)
        if body is None:
            await _respond(send, 413, f"a message may be at most {counted(self.limits.max_message, 'byte')}")
            return
        stripped = body.strip()
        if stripped.startswith(b"["):
            await _respond(send, 501, "batch requests are not supported")
            return
        out = Outgoing(stripped)
        if not out.valid:
            await _respond(send, 400, "the body is not a JSON-RPC message")
            return
        cid = headers.get(CONNECTION_ID.lower())
        if cid is None:
            if not out.is_initialize:
                await _respond(send, 400, f"missing {CONNECTION_ID}")
                return
            await self._initialize(scope, stripped, out, start, send)
            return
        conn = self.http.get(cid)
        if conn is None:
            await _respond(send, 404, f"unknown {CONNECTION_ID}")
            return
        session = headers.get(SESSION_ID.lower())
        if out.method in SESSION_SCOPED and session is None:
            await _respond(send, 400, f"missing {SESSION_ID} for {out.method}")
            conn.opened.event(_post_event(scope, 400, start, cid, None, out))
            return
        conn.last = time.monotonic()
        ok = await conn.opened.backend.send(stripped)
        status = 202 if ok else 410
        await _respond(send, status, "" if ok else "the agent has exited")
        conn.opened.event(_post_event(scope, status, start, cid, session, out))

    async def _initialize(self, scope: dict[str, Any], line: bytes, out: Outgoing, start: float, send: Any) -> None:
        if self._full():
            await _respond(send, 503, f"at most {self.limits.max_connections} ACP connections at once")
            return
        try:
            opened = await self.factory("http", _peer(scope))
        except OSError as exc:
            await _respond(send, 502, str(exc))
            return
        self.active += 1
        conn = _Http(uuid.uuid4().hex, opened)
        self.http[conn.cid] = conn
        assert self.nursery is not None
        self.nursery.start_soon(self._http_connection, conn)
        answer_in, answer = trio.open_memory_channel[bytes](1)
        conn.waiting[repr(out.rpc_id)] = answer_in
        await opened.backend.send(line)
        with trio.move_on_after(INITIALIZE_TIMEOUT):
            reply = await answer.receive()
            await _respond(send, 200, reply, [(CONNECTION_ID.lower().encode(), conn.cid.encode())], json=True)
            opened.event(_post_event(scope, 200, start, conn.cid, None, out))
            return
        await _respond(send, 504, "the agent did not answer initialize in time")
        opened.event(_post_event(scope, 504, start, conn.cid, None, out))
        await self._end(conn, "initialize_timeout")

    async def _http_connection(self, conn: _Http) -> None:
        """Route the agent's lines (initialize's answer to its POST, the rest to the SSE queue) and end the
        connection when the agent exits or it sits idle."""
        backend = conn.opened.backend
        why = ["agent_exit"]

        async def route() -> None:
            async for line in backend.lines:
                conn.last = time.monotonic()
                if conn.waiting:
                    reply = Outgoing(line)
                    waiter = conn.waiting.pop(repr(reply.rpc_id), None) if reply.is_response else None
                    if waiter is not None:
                        waiter.send_nowait(line)
                        continue
                try:
                    await conn.send_out.send(line)
                except trio.ClosedResourceError:  # the connection was ended meanwhile (initialize timed out)
                    break
            cancel.cancel()

        async def idle() -> None:
            while True:
                left = conn.last + self.limits.idle - time.monotonic()
                if left <= 0:
                    break
                await trio.sleep(max(left, 1.0))
            why[0] = "idle"
            cancel.cancel()

        try:
            with trio.CancelScope() as cancel:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(route)
                    nursery.start_soon(idle)
                    await conn.done.wait()
                    why[0] = "deleted"
                    nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                await self._end(conn, why[0])

    async def _end(self, conn: _Http, by: str) -> None:
        if self.http.pop(conn.cid, None) is None:
            return
        conn.done.set()
        conn.send_out.close()
        code = await conn.opened.backend.close()
        await conn.opened.finish(code, by, None)
        self.active -= 1

    async def _get(self, headers: dict[str, str], send: Any) -> None:
        if EVENT_STREAM not in headers.get("accept", "") and "*/*" not in headers.get("accept", ""):
            await _respond(send, 406, f"Accept must include {EVENT_STREAM}")
            return
        conn = await self._known(headers, send)
        if conn is None:
            return
        session = headers.get(SESSION_ID.lower())
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", EVENT_STREAM.encode()), (b"cache-control", b"no-cache")],
            }
        )
        conn.opened.event(
            {
                "event": "sse_open",
                "side": "client",
                "method": "GET",
                "status": 200,
                "connection": conn.cid,
                "session": session,
                "headers": recorded_headers(headers.items()),
            }
        )
        conn.streams += 1
        sent = 0
        try:
            while not conn.done.is_set():
                with trio.move_on_after(KEEPALIVE) as waited:
                    if session is None:  # the connection's stream carries every message (the RFD's model)
                        try:
                            line = await conn.out.receive()
                        except trio.EndOfChannel:
                            break
                        await send(
                            {"type": "http.response.body", "body": b"data: " + line + b"\n\n", "more_body": True}
                        )
                        sent += 1
                    else:  # a session-scoped stream (an SDK habit): kept open, fed nothing
                        await conn.done.wait()
                if waited.cancelled_caught:
                    await send({"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True})
        finally:
            conn.streams -= 1
            conn.opened.event(
                {"event": "sse_close", "side": "client", "connection": conn.cid, "session": session, "events": sent}
            )
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _known(self, headers: dict[str, str], send: Any) -> _Http | None:
        """The connection a GET or DELETE names, or None once it is answered 400 (none named) or 404."""
        cid = headers.get(CONNECTION_ID.lower())
        if cid is None:
            await _respond(send, 400, f"missing {CONNECTION_ID}")
            return None
        conn = self.http.get(cid)
        if conn is None:
            await _respond(send, 404, f"unknown {CONNECTION_ID}")
        return conn

    async def _delete(self, headers: dict[str, str], send: Any) -> None:
        conn = await self._known(headers, send)
        if conn is None:
            return
        conn.opened.event(
            {"event": "http", "side": "client", "method": "DELETE", "status": 202, "connection": conn.cid}
        )
        conn.done.set()
        await _respond(send, 202, "")


# The request headers the listener reads, and the status a malformed one gets: a Host that is not ours is
# 421 and a foreign Origin 403 (as when they are well formed but not this listener's), the rest 400.
PARSED = {
    b"host": 421,
    b"origin": 403,
    b"authorization": 400,
    b"content-type": 400,
    b"accept": 400,
    CONNECTION_ID.lower().encode(): 400,
    SESSION_ID.lower().encode(): 400,
}
ASCII_ONLY = (b"host", b"origin")  # an Origin is serialized in ASCII, and a Host is ASCII (IDNs as punycode)
VALUE_MAX = 8192  # bytes: no header we read is longer (a bearer JWT is a few KiB)
VALUE_SHOWN = 80  # characters of a refused value quoted in the log line and the answer
_CONTROLS = bytes(range(0x20)) + b"\x7f"


def _malformed(raw: list[tuple[bytes, bytes]]) -> tuple[int, str] | None:
    """A refusal for a header we read that holds a control character (a tab included), bytes that are not
    ASCII where only ASCII is valid, a value longer than VALUE_MAX, or a second copy (the dict the checks
    read keeps the last one, so `Origin: evil` then `Origin: ours` would pass): never a 500 from a parser
    that chokes on it later, and never a value the checks see differently from the peer."""
    seen: set[bytes] = set()
    for key, value in raw:
        name = key.lower()
        status = PARSED.get(name)
        if status is None:
            continue
        if name in seen:
            return (400 if status == 421 else status), f"{key.decode('latin-1')} is given twice"
        seen.add(name)
        if len(value) > VALUE_MAX:
            return status, f"{key.decode('latin-1')} is longer than {counted(VALUE_MAX, 'byte')}"
        if len(value.translate(None, _CONTROLS)) != len(value):
            return status, f"{_shown(key, value)} holds a control character"
        if name in ASCII_ONLY and not value.isascii():
            return status, f"{_shown(key, value)} is not ASCII"
    return None


def _shown(key: bytes, value: bytes) -> str:
    """A refused header as its refusal quotes it (the line is escaped where it is printed)."""
    return f"{key.decode('latin-1')} {value[:VALUE_SHOWN].decode('latin-1')!r}"


_plain = [(b"content-type", b"text/plain; charset=utf-8")]


async def _respond(
    send: Any, status: int, body: str | bytes, headers: list[tuple[bytes, bytes]] | None = None, *, json: bool = False
) -> None:
    data = body.encode() if isinstance(body, str) else body
    kind = [(b"content-type", b"application/json")] if json else (_plain if data else [])
    await send({"type": "http.response.start", "status": status, "headers": [*kind, *(headers or [])]})
    await send({"type": "http.response.body", "body": data})


def _post_event(
    scope: dict[str, Any], status: int, start: float, cid: str | None, session: str | None, out: Outgoing
) -> dict[str, Any]:
    return {
        "event": "http",
        "side": "client",
        "method": "POST",
        "status": status,
        "ms": ms_since(start),
        "connection": cid,
        "session": session,
        "rpc": out.method,
        "answer": out.is_response,
        "http": f"HTTP/{scope.get('http_version', '1.1')}",
        "headers": recorded_headers(scope["headers"]),
    }


def _peer(scope: dict[str, Any]) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "?"
