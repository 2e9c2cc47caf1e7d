"""Issue 19: a malformed header a listener reads is a refusal, logged escaped; never a 500, never let through.

`serve` and `proxy` answer every request through one app (transport/server.py). Each header it reads gets
generated variants, written as raw bytes on a socket: each control character inside a valid value, a
leading ESC before a valid value (urlsplit strips it, so the Origin read as ours), bytes that are not
UTF-8, a value over the limit, a second copy of the header, and values the URL and port parsers choke on.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from acp_relay.transport.server import PARSED, VALUE_MAX

FORBIDDEN = re.compile(rb"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\x8e\x8f\xaa-\xae]|\xe2\x81[\xa6-\xa9]")
# Not an initialize: a request that passes every check is answered at once (400, no Acp-Connection-Id).
BODY = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/cancel", "params": {"sessionId": "s-1"}})
# What the app says when it refuses a request's headers (the guard's reasons and the malformed ones).
REFUSALS: tuple[bytes, ...] = (b"holds a control", b"is not ASCII", b"is given twice", b"is longer than")
REFUSALS = (*REFUSALS, b"is not a URL", b"not allowed", b"is not this listener's")


def _valid(port: int) -> dict[bytes, bytes]:
    return {
        b"host": b"127.0.0.1:%d" % port,
        b"origin": b"http://127.0.0.1:%d" % port,
        b"authorization": b"Bearer abcdefgh",
        b"content-type": b"application/json",
        b"accept": b"application/json, text/event-stream",
        b"acp-connection-id": b"c0ffee",
        b"acp-session-id": b"s-1",
    }


def _variants(port: int) -> list[tuple[bytes, list[bytes], bool]]:
    """(header name, the values sent for it in order, whether every header must refuse it) for each variant:
    controls, a copy too many and an over-long value are malformed in any header; bytes that are not ASCII
    only in Host and Origin (elsewhere they may be a value the endpoint merely does not know)."""
    out: list[tuple[bytes, list[bytes], bool]] = []
    for name, good in _valid(port).items():
        cut = len(good) // 2
        while good[cut : cut + 1] in b" \t":  # LF then a space is an obsolete line fold: a valid value
            cut += 1
        for c in [*range(0x20), 0x7F]:
            out.append((name, [good[:cut] + bytes([c]) + good[cut:]], True))
        out.append((name, [b"\x1b" + good], True))
        out.append((name, [good + b"\x1b[31m"], True))
        for bad in (b"\xff", b"\xc3(", b"\xed\xa0\x80", b"\xc2\x9b", "\u202e".encode()):
            out.append((name, [good[:cut] + bad + good[cut:]], False))
        out.append((name, [good + b"a" * VALUE_MAX], True))
        out.append((name, [good, good], True))
        out.append((name, [b"evil" + good, good], True))
    for odd in (b"http://[::1", b"http://e\x1b[31m", b"http://127.0.0.1:\xb2", b"http://127.0.0.1:%d]" % port):
        out.append((b"origin", [odd], True))
    for odd in (b"127.0.0.1:\xb2", b"127.0.0.1:\xb9\xb2", b"[::1", b"127.0.0.1:%d]" % port):
        out.append((b"host", [odd], True))
    return out


def _request(port: int, name: bytes, values: list[bytes]) -> bytes:
    headers = {k: [v] for k, v in _valid(port).items() if k not in (b"authorization", b"acp-connection-id")}
    headers[b"acp-session-id"] = []
    headers[name] = values
    head = b"".join(b"%s: %s\r\n" % (k, v) for k, vs in headers.items() for v in vs)
    req = b"POST /acp HTTP/1.1\r\n" + head + b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(req)
        s.shutdown(socket.SHUT_WR)
        data = b""
        try:
            while chunk := s.recv(65536):
                data += chunk
        except OSError:
            pass
    return data


@pytest.mark.parametrize("command", ["serve", "proxy"])
def test_malformed_headers_are_refusals_logged_escaped(tmp_path: Path, command: str) -> None:
    db = str(tmp_path / "relay.db")
    argv = ["serve", "--db", db, "--listen", "127.0.0.1:0", "--", sys.executable, "-c", "import time; time.sleep(60)"]
    if command == "proxy":  # refused requests never reach the upstream (nothing listens there)
        argv = ["proxy", "--db", db, "--listen", "127.0.0.1:0", "--upstream", "ws://127.0.0.1:9/acp"]
    proc = subprocess.Popen([sys.executable, "-m", "acp_relay", *argv], stderr=subprocess.PIPE)
    wrong, refused = [], 0
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert b"listening on http://127.0.0.1:" in first, first
        port = int(first.split(b"127.0.0.1:")[1].split(b"/")[0])
        for name, values, malformed in _variants(port):
            answer = _request(port, name, values)
            status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0
            ours = any(r in answer for r in REFUSALS)
            refused += ours
            # The HTTP parser's own refusal (NUL, CR, LF, a second Host): 400 with no body, before the app.
            parser = status == 400 and b"content-length: 0" in answer
            if malformed or name in (b"host", b"origin"):
                ok = parser or (status == PARSED[name] and ours)
            else:  # a value the endpoint does not know: its ordinary answer, never a 5xx
                ok = 400 <= status < 500
            if not ok:
                wrong.append((name, values, answer[:300]))
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert wrong == [], (len(wrong), wrong[:5])
    assert b"Traceback" not in err, err[-2000:]
    assert err.count(b": refused POST from ") == refused, err[-3000:]
    assert refused > 100 and FORBIDDEN.findall(err) == []
