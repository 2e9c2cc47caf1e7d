"""Running an /acp listener (transport/server.py's app) on hypercorn until a signal: shared by `serve`,
`proxy` and `replay --listen`, which differ only in what each connection's far side is."""

from __future__ import annotations

import logging
import signal
import socket
from collections.abc import Callable
from typing import Any

from ..protocol.remote import is_loopback

log = logging.getLogger(__name__)
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class ListenError(Exception):
    """A usage problem found before anything listens: one line, exit status 2."""


def check_address(host: str, token: str | None) -> None:
    """A listener binds loopback unless told otherwise, and then only with a token."""
    if not is_loopback(host) and not token:
        raise ListenError(
            f"{host} is not a loopback address: give --token (or $ACP_RELAY_TOKEN) so strangers cannot drive the agent"
        )


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
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    sock.set_inheritable(True)
    return sock


def serve_until_signal(sock: socket.socket, app: Any, *, max_message: int, banner: Callable[[int], str]) -> int:
    """Serve `app` (an AcpApp) on `sock` until SIGINT, SIGTERM or SIGHUP; then end every connection (up to
    10 s) and return 128+N for signal N. `banner(port)` is said on stderr once it listens."""
    import trio
    from hypercorn.config import Config
    from hypercorn.trio import serve

    port = sock.getsockname()[1]
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
            log.info(banner(port))
            await serve(app, config, shutdown_trigger=until_signal)
            for conn in list(app.http.values()):
                conn.done.set()
            with trio.move_on_after(10):
                while app.active:
                    await trio.sleep(0.05)
            nursery.cancel_scope.cancel()

    trio.run(main)
    return 128 + got[0] if got else 0
