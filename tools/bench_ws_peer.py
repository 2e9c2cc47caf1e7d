"""A remote agent for tools/bench.py's `ws` case: a WebSocket server on loopback.

    python tools/bench_ws_peer.py echo          # answers each request at once (its id, a small result)
    python tools/bench_ws_peer.py flood N SIZE  # on the first message: N notifications of SIZE bytes, then close
    python tools/bench_ws_peer.py http          # the echo over Streamable HTTP (hypercorn): POST in, SSE out

The flood's frames are built before it listens and written in 1 MiB writes (wsproto does the handshake
and the close), so the peer is not what limits the rate being measured.

Prints its port on stdout once it listens; serves until killed.
"""

from __future__ import annotations

import sys
from typing import Any

import trio

ANSWER = b'{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"}}'


def notification(size: int, i: int) -> str:
    head = '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"bench","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"'
    tail = '"}}}}'
    body = f"{i:08d}"
    return head + body + "x" * max(0, size - len(head) - len(tail) - len(body)) + tail


def text_frame(text: str) -> bytes:
    """One unmasked (server-to-client) final text frame, RFC 6455 section 5.2."""
    data = text.encode()
    n = len(data)
    head = (
        bytes([0x81, n])
        if n < 126
        else bytes([0x81, 126]) + n.to_bytes(2, "big")
        if n < 65536
        else bytes([0x81, 127]) + n.to_bytes(8, "big")
    )
    return head + data


async def accepted(stream: trio.SocketStream, ws: Any, *, until_message: bool) -> bool:
    """Answer the handshake (wsproto), and with `until_message` read on until the client's first message.
    False when the client went away first."""
    from wsproto.events import AcceptConnection, Message, Request

    while True:
        data = await stream.receive_some(1 << 16)
        if not data:
            return False
        ws.receive_data(data)
        for event in ws.events():
            if isinstance(event, Request):
                await stream.send_all(ws.send(AcceptConnection()))
                if not until_message:
                    return True
            elif isinstance(event, Message) and until_message:
                return True


async def flood_server(n: int, size: int) -> None:
    from wsproto import ConnectionType, WSConnection
    from wsproto.events import CloseConnection

    frames = b"".join(text_frame(notification(size, i)) for i in range(n))

    async def handle(stream: trio.SocketStream) -> None:
        ws = WSConnection(ConnectionType.SERVER)
        if not await accepted(stream, ws, until_message=True):  # the client's first message starts it
            return
        view = memoryview(frames)
        for i in range(0, len(view), 1 << 20):
            await stream.send_all(view[i : i + (1 << 20)])
        await stream.send_all(ws.send(CloseConnection(code=1000)))
        with trio.move_on_after(10):  # the client's close frame answers ours; then the server closes TCP
            while data := await stream.receive_some(1 << 16):
                ws.receive_data(data)
                if any(isinstance(e, CloseConnection) for e in ws.events()):
                    break
        await stream.aclose()

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    print(listeners[0].socket.getsockname()[1], flush=True)
    await trio.serve_listeners(handle, listeners)


async def echo_server() -> None:
    """Answers each request at once (the frames are websockets' sans-I/O server side, the handshake
    wsproto's: the faster frame layer of the two, so the peer is not what the round trip measures)."""
    from websockets.frames import Frame, Opcode
    from websockets.protocol import Protocol, Side
    from wsproto import ConnectionType, WSConnection

    async def handle(stream: trio.SocketStream) -> None:
        ws = WSConnection(ConnectionType.SERVER)
        if not await accepted(stream, ws, until_message=False):
            return
        frames = Protocol(Side.SERVER, max_size=None)
        while data := await stream.receive_some(1 << 16):
            frames.receive_data(bytes(data))
            for f in frames.events_received():
                if isinstance(f, Frame) and f.opcode is Opcode.TEXT:
                    frames.send_text(answer_to(bytes(f.data)))
            out = b"".join(frames.data_to_send())  # answers, and the echo of a close
            if out:
                await stream.send_all(out)
            if frames.close_rcvd is not None:
                await stream.aclose()
                return

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    print(listeners[0].socket.getsockname()[1], flush=True)
    await trio.serve_listeners(handle, listeners)


def answer_to(msg: bytes) -> bytes:
    at = msg.find(b'"id":')
    end = msg.find(b",", at)
    return ANSWER % msg[at + 5 : end]


async def http_server() -> None:
    """The echo as the RFD's Streamable HTTP endpoint: `initialize` answered 200 with Acp-Connection-Id,
    every other POST 202 with the answer on that connection's GET event stream."""
    import socket

    from hypercorn.config import Config
    from hypercorn.trio import serve

    streams: dict[bytes, tuple[Any, Any]] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        headers = dict(scope["headers"])
        conn = headers.get(b"acp-connection-id", b"")
        if scope["method"] == "POST":
            body, more = b"", True
            while more:
                event = await receive()
                body, more = body + event.get("body", b""), event.get("more_body", False)
            if b'"initialize"' in body:
                conn = b"c%d" % len(streams)
                streams[conn] = trio.open_memory_channel[bytes](1 << 16)
                start = {"type": "http.response.start", "status": 200}
                await send({**start, "headers": [(b"content-type", b"application/json"), (b"acp-connection-id", conn)]})
                await send({"type": "http.response.body", "body": answer_to(body)})
                return
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            if conn in streams and b'"method"' in body and b'"id"' in body:
                await streams[conn][0].send(answer_to(body))
        elif scope["method"] == "GET" and conn in streams:
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
            )
            async for data in streams[conn][1]:
                await send({"type": "http.response.body", "body": b"data: " + data + b"\n\n", "more_body": True})
        else:
            await send({"type": "http.response.start", "status": 202 if scope["method"] == "DELETE" else 404})
            await send({"type": "http.response.body", "body": b""})

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    config = Config()
    config.bind = [f"fd://{sock.fileno()}"]
    config.accesslog = config.errorlog = None
    print(sock.getsockname()[1], flush=True)
    await serve(app, config)  # type: ignore[arg-type]


async def main() -> None:
    if sys.argv[1] == "http":
        await http_server()
    elif sys.argv[1] == "flood":
        await flood_server(int(sys.argv[2]), int(sys.argv[3]))
    else:
        await echo_server()


if __name__ == "__main__":
    trio.run(main)
