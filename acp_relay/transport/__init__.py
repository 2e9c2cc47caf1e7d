"""How JSON-RPC messages reach a relay other than through a child's stdio: WebSocket and Streamable HTTP.

Every transport hands what it reads to the same tap as the stdio relay (record/pipe.py's RecorderClient:
`put` for frames, `event` for what the transport did), so one recorder and one set of tables serve all.
The pure rules (SSE framing, which headers a POST carries, credential redaction of headers) live in
protocol/sse.py and protocol/remote.py; these modules are the I/O around them, on trio.
"""
