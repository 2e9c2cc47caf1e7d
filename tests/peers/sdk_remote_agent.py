"""The SDK test agent served remotely: the Python SDK's ASGI app (`acp.http.create_asgi_app`, WebSocket and
Streamable HTTP on one endpoint) run by a real server, hypercorn on asyncio.

Run: ``python tests/peers/sdk_remote_agent.py [--port N] [--set-cookie]``: binds 127.0.0.1 (port 0 picks a
free one), prints ``PORT`` on stdout once it listens, and serves ``/acp`` until killed. One SdkTestAgent per
ACP connection, as the SDK's factory gives each connection its own. ``--set-cookie`` wraps the app so each
response sets an affinity cookie, and an HTTP request after initialize without it is refused with 409:
a client that does not keep the connection's cookies fails.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import quick_sdk  # noqa: F401  (before the SDK: see quick_sdk.py)

# isort: split
from acp.http.asgi import create_asgi_app
from hypercorn.asyncio import serve
from hypercorn.config import Config
from sdk_agent import SdkTestAgent

COOKIE = b"acp-affinity=node-7"


def with_cookie(app: Any) -> Any:
    """Set the affinity cookie on every response; refuse (409) a request whose Cookie names another node."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        after_initialize = b"acp-connection-id" in headers  # a request of an established HTTP connection
        if scope["type"] == "http" and after_initialize and COOKIE not in headers.get(b"cookie", b""):
            await send({"type": "http.response.start", "status": 409, "headers": []})
            await send({"type": "http.response.body", "body": b"affinity cookie missing or wrong"})
            return

        async def send_with_cookie(message: dict[str, Any]) -> None:
            if message["type"] in ("http.response.start", "websocket.accept"):
                message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", COOKIE + b"; Path=/")]}
            await send(message)

        await app(scope, receive, send_with_cookie)

    return wrapped


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--set-cookie", action="store_true")
    parser.add_argument("--certfile", help="serve TLS (wss://, https://) with this certificate and --keyfile")
    parser.add_argument("--keyfile")
    args = parser.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(64)
    sock.set_inheritable(True)
    config = Config()
    config.bind = [f"fd://{sock.fileno()}"]
    config.accesslog = None
    config.errorlog = "-"
    config.loglevel = "WARNING"
    if args.certfile:
        config.certfile, config.keyfile = args.certfile, args.keyfile
    app: Any = create_asgi_app(lambda conn: SdkTestAgent())
    if args.set_cookie:
        app = with_cookie(app)
    print(sock.getsockname()[1], flush=True)
    asyncio.run(serve(app, config))


if __name__ == "__main__":
    main()
