"""`acp-relay serve --listen HOST:PORT -- AGENT`: a local stdio agent reachable at /acp over WebSocket and
Streamable HTTP, one agent process and one recorded connection per ACP connection. `acp-relay proxy
--listen HOST:PORT --upstream URL`: the same listener, each connection carried on to a remote agent.

The listener binds loopback unless told otherwise, and then only with a bearer token; Host and Origin
are checked on every request (transport/server.py, protocol/remote.Guard). Each ACP connection's recorder
is the stdio relay's (record/pipe.py), started when the connection is.
"""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path
from typing import Any

from ..fdio import warn
from ..protocol.redact import Policy
from ..protocol.remote import Guard, is_loopback
from .pipe import RecorderClient

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class ServeError(Exception):
    """A usage problem found before anything listens: one line, exit status 2."""


def bind(host: str, port: int) -> socket.socket:
    """The listening socket (ours, so the port that port 0 picked is known before hypercorn starts)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    sock.set_inheritable(True)
    return sock


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
        warn(f"acp-relay: proxy: --insecure: the certificate of {shown_endpoint(upstream)} is NOT verified")
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
    if not is_loopback(host) and not token:
        raise ServeError(
            f"{host} is not a loopback address: give --token (or $ACP_RELAY_TOKEN) so strangers cannot drive the agent"
        )
    policy = policy or Policy()
    sock = bind(host, port)
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    endpoint = f"http://{shown}:{port}/acp" if upstream is None else argv[0]

    import trio
    from hypercorn.config import Config
    from hypercorn.trio import serve

    from ..transport.agent import StdioAgent, describe
    from ..transport.server import AcpApp, Limits

    def backend_for(recorder: RecorderClient) -> Any:
        if upstream is None:
            return StdioAgent(argv, recorder)
        from ..transport.upstream import RemoteBackend
        from .remote import link_to

        url, headers, insecure, timeout = upstream
        return RemoteBackend(link_to(url, headers, recorder, insecure=insecure, timeout=timeout), recorder)

    async def factory(transport: str, peer: str) -> _Connection:
        recorder = RecorderClient(
            db_path,
            argv=argv,
            cwd=os.getcwd(),
            label=label,
            warn=warn,
            policy=policy,
            transport=transport,
            endpoint=endpoint,
        )
        recorder.launch()
        agent = backend_for(recorder)
        try:
            assert app.nursery is not None
            await agent.start(app.nursery)
        except OSError as exc:
            message, code = describe(argv, exc) if upstream is None else (str(exc), 4)
            warn(f"acp-relay: {command}: {message}")
            await trio.to_thread.run_sync(
                lambda: recorder.close(status="spawn_failed", exit_code=code, closed_by="spawn_failed", error=message)
            )
            raise
        recorder.record_spawn(getattr(agent, "pid", None))
        recorder.event({"event": "accepted", "side": "client", "peer": peer})
        return _Connection(agent, recorder)

    app = AcpApp(
        factory, Guard(host, port, token, allow_hosts), Limits(max_message, max_connections, idle), warn, command
    )
    config = Config()
    config.bind = [f"fd://{sock.detach()}"]  # hypercorn owns (and closes) the descriptor from here
    config.accesslog = None
    config.errorlog = None
    config.include_server_header = False
    # Room past the limit so that the app sees an oversized message and closes with 1009 and a recorded
    # reason; beyond twice the limit hypercorn closes first (1009 too), so memory stays bounded.
    config.websocket_max_message_size = 2 * max_message + 1024
    config.graceful_timeout = 3.0
    got: list[int] = []

    async def until_signal() -> None:
        with trio.open_signal_receiver(*SIGNALS) as signals:
            async for signum in signals:
                got.append(signum)
                return

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            app.nursery = nursery
            warn(
                f"acp-relay: {command}: listening on http://{shown}:{port}/acp (WebSocket ws://{shown}:{port}/acp), "
                f"one {argv[0]!r} per ACP connection, recording to {db_path}"
            )
            await serve(app, config, shutdown_trigger=until_signal)  # type: ignore[arg-type]
            for conn in list(app.http.values()):
                conn.done.set()
            with trio.move_on_after(10):
                while app.active:
                    await trio.sleep(0.05)
            nursery.cancel_scope.cancel()

    trio.run(main)
    return 128 + got[0] if got else 0
