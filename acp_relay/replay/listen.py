"""`acp-relay replay SESSION --listen HOST:PORT`: serve a recording to a remote-capable client at /acp,
over WebSocket and Streamable HTTP. Each ACP connection gets its own `acp-relay replay` process on stdio
(the same replay, byte for byte), behind transport/server.py's listener with its checks; nothing is
recorded (replay reads the database only)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from ..protocol.remote import Guard
from ..transport.base import NullTap
from ..transport.listen import bind, check_address, serve_until_signal

log = logging.getLogger(__name__)


class _Replay:
    """One connection's replay process (transport/server.py's Opened)."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    def event(self, fields: dict[str, Any]) -> None:
        """Not recorded: a replay writes nothing."""

    async def finish(self, code: int, closed_by: str, error: str | None) -> None:
        """Nothing to store."""


def run_listen(
    listen: tuple[str, int], db_path: Path, replay_args: list[str], *, token: str | None, max_connections: int = 16
) -> int:
    """Serve until a signal; returns 128+N for signal N."""
    from ..transport.agent import StdioAgent, describe
    from ..transport.server import AcpApp, Limits

    host, port = listen
    check_address(host, token)
    sock = bind(host, port)
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    argv = [sys.executable, "-m", "acp_relay", "replay", "--db", str(db_path), *replay_args]

    async def factory(transport: str, peer: str) -> _Replay:
        agent = StdioAgent(argv, NullTap())
        try:
            assert app.nursery is not None
            await agent.start(app.nursery)
        except OSError as exc:
            log.warning(describe(argv, exc)[0])
            raise
        return _Replay(agent)

    limits = Limits(max_connections=max_connections)
    app = AcpApp(factory, Guard(host, port, token), limits)
    return serve_until_signal(
        sock,
        app,
        max_message=limits.max_message,
        banner=lambda port: f"listening on http://{shown}:{port}/acp (WebSocket ws://{shown}:{port}/acp)",
    )
