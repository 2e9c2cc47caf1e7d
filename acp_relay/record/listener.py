"""`acp-relay serve --listen HOST:PORT -- AGENT`: a local stdio agent reachable at /acp over WebSocket and
Streamable HTTP, one agent process and one recorded connection per ACP connection. `acp-relay proxy
--listen HOST:PORT --upstream URL`: the same listener, each connection carried on to a remote agent.

The listener binds loopback unless told otherwise, and then only with a bearer token; Host and Origin
are checked on every request (transport/server.py, protocol/remote.Guard). Each ACP connection's recorder
is the stdio relay's (record/pipe.py), started when the connection is.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from ..protocol.redact import Policy
from ..protocol.remote import Guard
from ..transport.listen import ListenError, bind, check_address, serve_until_signal
from .pipe import RecorderClient

log = logging.getLogger(__name__)
ServeError = ListenError  # the CLI catches it for a usage error (exit 2)


class _Connection:
    """One ACP connection's agent and recorder, as transport/server.py's factory returns them."""

    def __init__(self, backend: Any, recorder: RecorderClient) -> None:
        self.backend, self.recorder = backend, recorder

    def event(self, fields: dict[str, Any]) -> None:
        self.recorder.event(fields)

    async def finish(self, code: int, closed_by: str, error: str | None) -> None:
        import trio

        await trio.to_thread.run_sync(
            lambda: self.recorder.close(status="ended", exit_code=code, closed_by=closed_by, error=error)
        )


class _Opener:
    """What each new ACP connection gets (transport/server.py's factory): its recorder, started with the
    connection, and its far side: a local agent (`serve`) or an upstream link (`proxy`)."""

    def __init__(
        self,
        db_path: Path,
        argv: list[str],
        upstream: tuple[str, list[tuple[str, str]], bool, float] | None,
        label: str | None,
        policy: Policy,
        command: str,
        endpoint: str,
    ) -> None:
        self.db_path, self.argv, self.upstream, self.label = db_path, argv, upstream, label
        self.policy, self.command, self.endpoint = policy, command, endpoint
        self.app: Any = None

    def backend_for(self, recorder: RecorderClient) -> Any:
        if self.upstream is None:
            from ..transport.agent import StdioAgent

            return StdioAgent(self.argv, recorder)
        from ..transport.upstream import RemoteBackend, link_to

        url, headers, insecure, timeout = self.upstream
        link = link_to(url, headers, recorder, insecure=insecure, timeout=timeout)
        return RemoteBackend(link, recorder)

    async def factory(self, transport: str, peer: str) -> _Connection:
        import trio

        from ..transport.agent import describe

        recorder = RecorderClient(
            self.db_path,
            argv=self.argv,
            cwd=os.getcwd(),
            label=self.label,
            policy=self.policy,
            command=self.command,
            transport=transport,
            endpoint=self.endpoint,
        )
        recorder.launch()
        agent = self.backend_for(recorder)
        try:
            assert self.app is not None and self.app.nursery is not None
            await agent.start(self.app.nursery)
        except OSError as exc:
            message, code = describe(self.argv, exc) if self.upstream is None else (str(exc), 4)
            log.warning(message)
            await trio.to_thread.run_sync(
                lambda: recorder.close(status="spawn_failed", exit_code=code, closed_by="spawn_failed", error=message)
            )
            raise
        recorder.record_spawn(getattr(agent, "pid", None))
        recorder.event({"event": "accepted", "side": "client", "peer": peer})
        return _Connection(agent, recorder)


def run_serve(listen: tuple[str, int], argv: list[str], db_path: Path, **options: Any) -> int:
    """Serve a local stdio agent until a signal; returns 128+N for signal N."""
    return _listen(listen, db_path, argv=argv, upstream=None, **options)


def run_proxy(
    listen: tuple[str, int],
    upstream: str,
    db_path: Path,
    *,
    headers: list[tuple[str, str]],
    insecure: bool = False,
    timeout: float = 30.0,
    **options: Any,
) -> int:
    """Carry each client connection on to the remote agent at `upstream`, recording both; until a signal."""
    from ..protocol.remote import shown_endpoint, transport_of

    transport_of(upstream)  # EndpointError for a URL no link can use
    if insecure and upstream.lower().startswith(("https:", "wss:")):
        log.warning(f"--insecure: the certificate of {shown_endpoint(upstream)} is NOT verified")
    return _listen(
        listen,
        db_path,
        argv=[shown_endpoint(upstream)],
        upstream=(upstream, headers, insecure, timeout),
        **options,
    )


def _listen(
    listen: tuple[str, int],
    db_path: Path,
    *,
    argv: list[str],
    upstream: tuple[str, list[tuple[str, str]], bool, float] | None,
    token: str | None,
    allow_hosts: tuple[str, ...] = (),
    max_message: int = 16 << 20,
    max_connections: int = 16,
    idle: float = 600.0,
    label: str | None = None,
    policy: Policy | None = None,
) -> int:
    """The listener both commands share; `upstream` (url, headers, insecure, timeout) makes it a proxy."""
    command = "serve" if upstream is None else "proxy"
    host, port = listen
    check_address(host, token)
    sock = bind(host, port)
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    endpoint = f"http://{shown}:{port}/acp" if upstream is None else argv[0]

    from ..transport.server import AcpApp, Limits

    opened = _Opener(db_path, argv, upstream, label, policy or Policy(), command, endpoint)
    app = AcpApp(opened.factory, Guard(host, port, token, allow_hosts), Limits(max_message, max_connections, idle))
    opened.app = app  # the factory starts each connection's tasks in the app's nursery
    return serve_until_signal(
        sock,
        app,
        max_message=max_message,
        banner=lambda port: (
            f"listening on http://{shown}:{port}/acp (WebSocket ws://{shown}:{port}/acp), "
            f"one {argv[0]!r} per ACP connection, recording to {db_path}"
        ),
    )
