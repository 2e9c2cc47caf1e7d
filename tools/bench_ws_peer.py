"""A remote agent for tools/bench.py's `ws` case: a WebSocket server on loopback.

    python tools/bench_ws_peer.py echo          # answers each request at once (its id, a small result)
    python tools/bench_ws_peer.py flood N SIZE  # on the first message: N notifications of SIZE bytes, then close

The flood's frames are built before it listens and written in 1 MiB writes (wsproto does the handshake
and the close), so the peer is not what limits the rate being measured.

Prints its port on stdout once it listens; serves until killed.
"""

from __future__ import annotations

import sys

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


async def flood_server(n: int, size: int) -> None:
    from wsproto import ConnectionType, WSConnection
    from wsproto.events import AcceptConnection, CloseConnection, Message, Request

    frames = b"".join(text_frame(notification(size, i)) for i in range(n))

    async def handle(stream: trio.SocketStream) -> None:
        ws = WSConnection(ConnectionType.SERVER)
        started = False
        while not started:
            data = await stream.receive_some(1 << 16)
            if not data:
                return
            ws.receive_data(data)
            for event in ws.events():
                if isinstance(event, Request):
                    await stream.send_all(ws.send(AcceptConnection()))
                elif isinstance(event, Message):
                    started = True
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
    """Answers each request at once (the frames are protocol/wsframes.py's, the handshake wsproto's)."""
    from wsproto import ConnectionType, WSConnection
    from wsproto.events import AcceptConnection, Request

    from acp_relay.protocol.wsframes import CLOSE, TEXT, FrameReader, encode

    async def handle(stream: trio.SocketStream) -> None:
        ws = WSConnection(ConnectionType.SERVER)
        accepted = False
        while not accepted:
            data = await stream.receive_some(1 << 16)
            if not data:
                return
            ws.receive_data(data)
            for event in ws.events():
                if isinstance(event, Request):
                    await stream.send_all(ws.send(AcceptConnection()))
                    accepted = True
        reader = FrameReader(expect_masked=True)
        while data := await stream.receive_some(1 << 16):
            out = []
            for m in reader.feed(bytes(data)):
                if m.opcode == CLOSE:
                    await stream.send_all(encode(CLOSE, m.payload, None))
                    await stream.aclose()
                    return
                if m.opcode == TEXT:
                    msg = m.payload
                    at = msg.find(b'"id":')
                    end = msg.find(b",", at)
                    out.append(encode(TEXT, ANSWER % msg[at + 5 : end], None))
            if out:
                await stream.send_all(b"".join(out))

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    print(listeners[0].socket.getsockname()[1], flush=True)
    await trio.serve_listeners(handle, listeners)


async def main() -> None:
    if sys.argv[1] == "flood":
        await flood_server(int(sys.argv[2]), int(sys.argv[3]))
    else:
        await echo_server()


if __name__ == "__main__":
    trio.run(main)
