"""The Streamable HTTP client end of remote ACP: POST each message, read the agent's on SSE streams.

httpx (on trio through its own backend) carries the requests, with HTTP/2 where TLS negotiates it and one
cookie jar for the connection (the RFD's affinity cookies). The flow is the RFD's: `initialize` is
answered 200 with its result and Acp-Connection-Id; every later POST carries that id (and Acp-Session-Id
when session-scoped) and is answered 202; the agent's messages arrive on the connection's GET stream.
The shipped SDK servers also send a session's messages on a session-scoped stream, so one is opened for
every session the connection learns of, as the SDK clients do. Each SSE payload is one recorded frame.
"""

from __future__ import annotations

import logging
import ssl
import time
from typing import Any

import httpx
import trio

from ..protocol.remote import (
    CONNECTION_ID,
    EVENT_STREAM,
    JSON,
    SESSION_ID,
    Outgoing,
    SessionRouting,
    recorded_headers,
    relay_answer,
)
from ..protocol.sse import SseParser
from ..protocol.words import counted
from .base import CLOSE_WAIT, EXIT_PEER, EXIT_TIMEOUT, RemoteError, Tap, ms_since, why

log = logging.getLogger(__name__)
_END = b""  # in the inbox: the connection's stream ended
INBOX = 1024  # agent messages read and not yet taken by the bridge
INBOX_BYTES = 4 << 20  # and their bytes: past this the event streams are not read (the server is held back)


class HttpAgentLink:
    transport = "http"

    def __init__(
        self,
        url: str,
        headers: list[tuple[str, str]],
        tap: Tap,
        *,
        verify: ssl.SSLContext | bool = True,
        timeout: float = 30.0,
    ) -> None:
        self.url, self.tap, self.timeout = url, tap, timeout
        self.headers = headers
        self.secret = frozenset(n.lower() for n, _ in headers)  # --header values are never recorded
        # No read timeout: an SSE stream is quiet while the agent thinks. Connect and write are bounded.
        self.client = httpx.AsyncClient(
            http2=True,
            verify=verify,
            timeout=httpx.Timeout(timeout, read=None),
            follow_redirects=False,
        )
        self.connection_id: str | None = None
        self.routing = SessionRouting()
        self.streams: set[str | None] = set()
        # Bounded: an editor that stops reading stops our SSE readers, and TCP pushes back on the server.
        self.send_inbox, self.inbox = trio.open_memory_channel[bytes](INBOX)
        self.inbox_bytes = 0
        self.inbox_room = trio.Event()  # set each time receive() has taken messages out
        self.nursery: Any = None
        self.closing = False
        self.end = "the connection's event stream ended"
        self.clean = True
        self.ended_seen = False
        self.failure: str | None = None  # why the link failed under a send (the run then ends with end_code)
        self.end_code = EXIT_PEER

    async def open(self, nursery: Any) -> None:
        self.nursery = nursery

    def _headers(self, extra: dict[str, str]) -> list[tuple[str, str]]:
        return [*extra.items(), *self.headers]

    async def _request(
        self,
        method: str,
        extra: dict[str, str],
        body: bytes | None = None,
        session: str | None = None,
        out: Outgoing | None = None,
        timeout: float | None = None,
    ) -> httpx.Response:
        headers = self._headers(extra)
        timeout = self.timeout if timeout is None else timeout
        start = time.perf_counter()
        fields: dict[str, Any] = {"event": "http", "side": "agent", "method": method, "session": session}
        if out is not None:  # what the POST carried, for check's transport rules
            fields.update(rpc=out.method, answer=out.is_response)
        try:
            with trio.fail_after(timeout):
                response = await self.client.request(method, self.url, headers=headers, content=body)
        except trio.TooSlowError:
            self.tap.event(
                {**fields, "ms": ms_since(start), "error": "timeout", "sent": recorded_headers(headers, self.secret)}
            )
            raise RemoteError(f"{method} {self.url}: no answer within {timeout:g} s", EXIT_TIMEOUT)
        except httpx.HTTPError as exc:
            self.tap.event(
                {
                    **fields,
                    "ms": ms_since(start),
                    "error": str(exc)[:500],
                    "sent": recorded_headers(headers, self.secret),
                }
            )
            raise RemoteError(f"{method} {self.url}: {why(exc)}")
        self.tap.event(
            {
                **fields,
                "status": response.status_code,
                "ms": ms_since(start),
                "connection": response.headers.get(CONNECTION_ID) or self.connection_id,
                "http": response.http_version,
                "sent": recorded_headers(headers, self.secret),
                "headers": recorded_headers(response.headers.raw),
                **({"body": response.content[:300].decode("utf-8", "replace")} if response.status_code >= 300 else {}),
            }
        )
        return response

    async def send(self, line: bytes) -> None:
        out = Outgoing(line)
        if self.failure is not None:  # the link is gone: the editor has had our answers and its EOF is coming
            self.tap.event({"event": "dropped", "side": "agent", "reason": "the link had failed", "bytes": len(line)})
            return
        try:
            if self.connection_id is None and out.is_initialize:
                await self._initialize(line, out)
            else:
                await self._post(line, out)
        except RemoteError as exc:
            # The connection is unusable: the request is answered (the editor must not wait for the agent),
            # then the link ends as if the agent's stream had, with this error's exit code.
            if out.is_request:
                await self._answer(out, str(exc), None, None)
            await self._fail(str(exc), exc.code)

    async def _post(self, line: bytes, out: Outgoing) -> None:
        extra = {"Content-Type": JSON}
        if self.connection_id is not None:
            extra[CONNECTION_ID] = self.connection_id
        session = self.routing.header_for(out)
        if session is not None:
            extra[SESSION_ID] = session
        response = await self._request("POST", extra, line, session, out)
        status = response.status_code
        if status == 404 and session is not None and session not in self.routing.known:
            # The Python SDK's server does not know the session on this connection yet (session/load after
            # a reconnect): it took nothing, so the same message goes again without the header.
            del extra[SESSION_ID]
            session = None
            response = await self._request("POST", extra, line, None, out)
            status = response.status_code
        if status == 200 and response.content:
            self.inbox_bytes += len(response.content)  # counted, not waited for: the editor's side sends it
            await self.send_inbox.send(response.content)
        elif status not in (200, 202):
            what = out.method or ("a response" if out.is_response else "a message")
            if status == 404 and not out.session_id:
                raise RemoteError(
                    f"the remote agent no longer knows connection {self.connection_id} (POST {what}: 404)"
                )
            await self._refused(out, response)

    async def _refused(self, out: Outgoing, response: httpx.Response) -> None:
        """A POST the agent refused (4xx/5xx): a request is answered by us, anything else is only said."""
        status, text = response.status_code, _excerpt(response)
        why_ = f"HTTP {status} {response.reason_phrase}".rstrip()
        if out.is_request:
            reason = f"the remote agent refused the POST ({why_})"
            log.warning(f"answered {out.method} (id {out.rpc_id!r}) with an error: {reason} {text}".rstrip())
            await self._answer(out, reason, status, text or None)
            return
        what = out.method or ("a response" if out.is_response else "a message")
        self.tap.event(
            {
                "event": "refused",
                "side": "agent",
                "method": "POST",
                "status": status,
                "rpc": out.method,
                "answer": out.is_response,
            }
        )
        log.warning(f"the remote agent refused POST {what}: HTTP {status} {text}".rstrip())

    async def _answer(self, out: Outgoing, why_: str, status: int | None, body: str | None) -> None:
        """The editor's answer to a request the agent never took: recorded as what the editor received, and
        a relay_answer event beside it names the request and says the relay made it."""
        event, answer = relay_answer(out, why_, status, body)
        self.tap.event(event)
        self.inbox_bytes += len(answer)  # receive() takes it off the count with the rest
        await self.send_inbox.send(answer)

    async def _fail(self, message: str, code: int) -> None:
        """End the link: receive() returns what is queued, then None; ended() and end_code say why."""
        if self.failure is None:
            self.failure, self.clean, self.end, self.end_code = message, False, message, code
            self.closing = True
            await self.send_inbox.send(_END)

    async def _initialize(self, line: bytes, out: Outgoing) -> None:
        response = await self._request("POST", {"Content-Type": JSON}, line, None, out)
        if response.status_code != 200:
            raise RemoteError(
                f"initialize was answered HTTP {response.status_code}, not 200 {_excerpt(response)}".rstrip()
            )
        cid = response.headers.get(CONNECTION_ID)
        if not cid:
            raise RemoteError(f"initialize was answered without an {CONNECTION_ID} header")
        self.connection_id = cid
        self.inbox_bytes += len(response.content)
        await self.send_inbox.send(response.content)
        self._open_stream(None)

    def _open_stream(self, session: str | None) -> None:
        if session in self.streams or self.closing:
            return
        self.streams.add(session)
        self.nursery.start_soon(self._stream, session)

    async def _stream(self, session: str | None) -> None:
        assert self.connection_id is not None
        extra = {"Accept": EVENT_STREAM, CONNECTION_ID: self.connection_id}
        if session is not None:
            extra[SESSION_ID] = session
        headers = self._headers(extra)
        start = time.perf_counter()
        base: dict[str, Any] = {"side": "agent", "method": "GET", "connection": self.connection_id, "session": session}
        parser = SseParser()
        events = 0
        reason = "ended"
        try:
            async with self.client.stream("GET", self.url, headers=headers) as response:
                self.tap.event(
                    {
                        **base,
                        "event": "sse_open",
                        "status": response.status_code,
                        "ms": ms_since(start),
                        "http": response.http_version,
                        "sent": recorded_headers(headers, self.secret),
                        "headers": recorded_headers(response.headers.raw),
                    }
                )
                if response.status_code != 200:
                    reason = f"HTTP {response.status_code}"
                else:
                    async for chunk in response.aiter_raw():
                        for event in parser.feed(chunk):
                            events += 1
                            if event.id is not None or event.event not in (None, "message"):
                                self.tap.event({**base, "event": "sse_event", "id": event.id, "type": event.event})
                            if event.data:
                                while self.inbox_bytes > INBOX_BYTES:
                                    self.inbox_room = trio.Event()
                                    await self.inbox_room.wait()
                                self.inbox_bytes += len(event.data)
                                await self.send_inbox.send(event.data)
                    _, left = parser.finish()
                    if left:
                        reason = f"ended inside an event ({counted(len(left), 'byte')} not dispatched)"
        except httpx.HTTPError as exc:
            reason = f"broke: {why(exc)}"
        finally:
            self.tap.event(
                {**base, "event": "sse_close", "reason": reason, "events": events, "comments": parser.comments}
            )
            self.streams.discard(session)
            if session is None:
                if not self.closing and self.failure is None:
                    self.clean = reason == "ended"
                    self.end = f"the connection's event stream {reason}"
                with trio.CancelScope(shield=True), trio.move_on_after(5.0):
                    await self.send_inbox.send(_END)

    async def receive(self) -> list[bytes] | None:
        """The agent's messages that have arrived (at least one), or None once the connection's stream ended."""
        if self.ended_seen:
            return None
        out = [await self.inbox.receive()]
        size = len(out[0])
        while len(out) < INBOX and size < INBOX_BYTES:
            try:
                out.append(self.inbox.receive_nowait())
            except trio.WouldBlock:
                break
            size += len(out[-1])
        self.inbox_bytes -= size
        self.inbox_room.set()
        if _END in out:
            self.ended_seen = True
            out = out[: out.index(_END)]
        for payload in out:
            sid = self.routing.saw_incoming(payload)
            if sid is not None:
                self._open_stream(sid)
        return out or None

    def ended(self) -> tuple[bool, str]:
        return self.clean, self.end

    async def close(self) -> None:
        self.closing = True
        if self.connection_id is not None and self.failure is None:  # a failed link: nobody to say goodbye to
            try:  # said, not waited for: a remote that does not answer it in CLOSE_WAIT is recorded so
                await self._request("DELETE", {CONNECTION_ID: self.connection_id}, timeout=CLOSE_WAIT)
            except RemoteError:
                pass
        with trio.move_on_after(CLOSE_WAIT):
            await self.client.aclose()


def _excerpt(response: httpx.Response) -> str:
    return response.content[:200].decode("utf-8", "replace").strip()
