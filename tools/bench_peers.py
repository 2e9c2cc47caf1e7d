"""Helper processes for tools/bench.py (standard library only, plus acp_relay for the `relay` wrapper).

    python tools/bench_peers.py echo                       # agent: answers every request at once
    python tools/bench_peers.py flood --size 200 --count N # agent: writes N frames of SIZE bytes (with \\n)
    python tools/bench_peers.py relay --stats F -- ARGS..  # `acp-relay ARGS..` in-process; writes its own
                                                           # peak RSS (VmHWM) and CPU time to F as JSON
    python tools/bench_peers.py pipe -- AGENT...           # a plain Python pass-through (no recording)
    python tools/bench_peers.py stream --size S --rate R --seconds T  # agent: R frames/s of S bytes for T
                                                           # seconds, and answers every request at once

`relay` runs the script named by $ACP_BENCH_PRELUDE first, if set: a hook to try a change to the relay
(a monkeypatch) under the benchmark without editing the package.

The flood's bytes are a pure function of (size, count): bench.py rebuilds them with `make_block` to check
that what came out of the relay is byte for byte what the agent wrote.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from typing import IO

BLOCK_BYTES = 4 << 20  # the flood writes one prebuilt block of frames again and again
PREFIX = (
    b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"bench-session","update":'
    b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"'
)
SUFFIX = b'"}}}}\n'
MIN_SIZE = len(PREFIX) + len(SUFFIX) + 9


def _io(stream: IO[bytes] | None) -> IO[bytes]:
    """A pipe the Popen call asked for (so never None)."""
    assert stream is not None
    return stream


def _pool(n: int) -> bytes:
    """n deterministic base64 characters (JSON-safe inside a string)."""
    return base64.b64encode(hashlib.shake_256(b"acp-relay-bench").digest(n * 3 // 4 + 3))[:n]


def frames_per_block(size: int) -> int:
    return max(1, BLOCK_BYTES // size)


def make_block(size: int) -> bytes:
    """frames_per_block(size) distinct session/update frames of exactly `size` bytes each, \\n included."""
    if size < MIN_SIZE:
        raise ValueError(f"frame size must be at least {MIN_SIZE} bytes")
    per = frames_per_block(size)
    pad = size - len(PREFIX) - len(SUFFIX) - 9
    pool = _pool(pad + 4096)
    out = bytearray()
    for i in range(per):
        off = (i * 61) % 4096
        out += PREFIX + b"%08d " % (i % 100_000_000) + pool[off : off + pad] + SUFFIX
    return bytes(out)


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def flood(size: int, count: int) -> None:
    block = make_block(size)
    per = frames_per_block(size)
    full, rest = divmod(count, per)
    for _ in range(full):
        _write_all(1, block)
    if rest:
        _write_all(1, memoryview(block)[: rest * size])


def echo() -> None:
    """Answer each request line with a response carrying its id; `initialize` gets a real-looking result."""
    buf = b""
    while True:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            return
        buf += chunk
        if b"\n" not in buf:
            continue
        *lines, buf = buf.split(b"\n")
        out = []
        for line in lines:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if not isinstance(msg, dict) or "id" not in msg or "method" not in msg:
                continue
            if msg["method"] == "initialize":
                result = {
                    "protocolVersion": 1,
                    "agentCapabilities": {},
                    "authMethods": [],
                    "agentInfo": {"name": "bench-echo", "version": "0"},
                }
            else:
                result = {"stopReason": "end_turn"}
            out.append(
                json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}, separators=(",", ":")).encode()
                + b"\n"
            )
        if out:
            _write_all(1, b"".join(out))


def stream(size: int, rate: float, seconds: float) -> None:
    """Frames of `size` bytes at `rate` a second (on a clock, not a sleep per frame), answering requests
    between them (a ping during a stream is the editor's latency); ends after `seconds`."""
    block = make_block(size)
    per = frames_per_block(size)
    lock = threading.Lock()

    def answer() -> None:
        buf = b""
        while chunk := os.read(0, 1 << 16):
            buf += chunk
            *lines, buf = buf.split(b"\n")
            out = []
            for line in lines:
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if isinstance(msg, dict) and "id" in msg and "method" in msg:
                    out.append(b'{"jsonrpc":"2.0","id":%d,"result":{}}\n' % msg["id"])
            if out:
                with lock:
                    _write_all(1, b"".join(out))

    threading.Thread(target=answer, daemon=True).start()
    start = time.monotonic()
    sent = 0
    while (now := time.monotonic()) - start < seconds:
        due = int((now - start) * rate)
        if due > sent:
            with lock:
                for i in range(sent, due):
                    j = i % per
                    _write_all(1, block[j * size : (j + 1) * size])
            sent = due
        time.sleep(min(0.002, 1 / rate))
    with open(os.environ.get("ACP_BENCH_SENT", os.devnull), "w") as f:  # before our last bytes go out
        f.write(str(sent))


def _hwm_kb() -> int:
    with open("/proc/self/status", "rb") as f:
        for line in f:
            if line.startswith(b"VmHWM:"):
                return int(line.split()[1])
    return -1


def relay(stats: str, args: list[str]) -> None:
    """Run the acp-relay CLI in this process (as the console script does) and report our own peak RSS."""
    import resource

    prelude = os.environ.get("ACP_BENCH_PRELUDE")  # experiments: a script to run first (e.g. monkeypatches)
    if prelude:
        import runpy

        runpy.run_path(prelude)
    from acp_relay.cli import main

    sys.argv = ["acp-relay", *args]
    code: str | int | None = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code
    finally:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        with open(stats, "w") as f:
            json.dump({"hwm_kb": _hwm_kb(), "utime": ru.ru_utime, "stime": ru.ru_stime}, f)
    sys.exit(code)


def pipe(argv: list[str]) -> int:
    """A Python relay without recording: two copy threads, stderr inherited. The cost of the hop alone."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)

    def copy(src: int, dst: int, close=None) -> None:
        try:
            while chunk := os.read(src, 1 << 16):
                _write_all(dst, chunk)
        except OSError:
            pass
        if close is not None:
            close.close()

    t_in = threading.Thread(target=copy, args=(0, _io(proc.stdin).fileno(), proc.stdin), daemon=True)
    t_in.start()
    copy(_io(proc.stdout).fileno(), 1)
    return proc.wait()


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "echo":
        echo()
    elif cmd == "flood":
        opts = dict(zip(rest[::2], rest[1::2], strict=False))
        flood(int(opts["--size"]), int(opts["--count"]))
    elif cmd == "stream":
        opts = dict(zip(rest[::2], rest[1::2], strict=False))
        stream(int(opts["--size"]), float(opts["--rate"]), float(opts["--seconds"]))
    elif cmd == "relay":
        assert rest[0] == "--stats" and rest[2] == "--", "usage: relay --stats FILE -- ARGS..."
        relay(rest[1], rest[3:])
    elif cmd == "pipe":
        assert rest[0] == "--"
        return pipe(rest[1:])
    else:
        print(f"unknown command {cmd!r}\n{__doc__}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
