"""Issue 19: `export` streams, a frame at a time (a big frame's values a piece at a time), and writes what it
wrote before, byte for byte.

The golden files are main's output before the export streamed (commit 8d078b8) on the fixture recordings,
their `exportedAt` set to 0. The piece-at-a-time path is checked against the whole-value path on every
frame: with the threshold lowered to a few bytes, every string of every frame is cut into pieces of a few
bytes (through multi-byte characters, escapes, invalid UTF-8 and base64), and the output must not change.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from acp_relay.export.command import run_export
from acp_relay.protocol import captures
from acp_relay.protocol.redact import Policy
from acp_relay.render.text import _JSON_ESCAPES, _UNSAFE_JSON, _UNSAFE_LEADS, escape_json
from acp_relay.store.rows import open_db

GOLDEN = Path(__file__).resolve().parent / "golden" / "export"
SELECTIONS: dict[str, tuple[str | None, str | None]] = {
    "sessv1alpha": ("sess-v1-alpha", None),
    "sessv2beta": ("sess-v2-beta", None),
}
SELECTIONS |= {f"c{n}": (None, str(n)) for n in (1, 2, 3)}
FORMATS = ("ndjson", "acp-devtools")


def _export(db: Path, session: str | None, connection: str | None, fmt: str, policy: Policy | None = None) -> bytes:
    out = io.BytesIO()
    conn = open_db(db)
    try:
        assert run_export(conn, session, connection, fmt, None, policy or Policy(), print, out) == 0
    finally:
        conn.close()
    return re.sub(rb'"exportedAt": \d+', b'"exportedAt": 0', out.getvalue())


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", list(SELECTIONS))
def test_export_is_byte_for_byte_what_main_wrote(fixture_db: Path, name: str, fmt: str) -> None:
    assert _export(fixture_db, *SELECTIONS[name], fmt) == (GOLDEN / f"{name}.{fmt}").read_bytes()


# Frames that exercise every piece boundary: C1, bidi and ESC in strings, 4-byte characters, escapes, a
# string that is the marker json_chunks swaps in (so it must pick another), nesting, a line that is not
# UTF-8, one that is JSON but not JSON-RPC, a secret to redact, a wide integer.
EVIL = '\x1b[31m\u009b\u202e\u2066\u061c\u200f\x7f\x00\t"\\ é😀'
HOSTILE_FRAMES = [
    ("c2a", orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/p" + EVIL}})),
    ("a2c", orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s-1"}})),
    (
        "a2c",
        orjson.dumps(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": "s-1",
                    "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": EVIL * 40}},
                    "_meta": {"a": [EVIL, {"b": [[EVIL * 3]]}, "\x00acp-relay-piece:0:0", "\x00acp-relay-piece:1:0"]},
                },
            }
        ),
    ),
    ("a2c", b'{"jsonrpc":"2.0","method":"x/y","params":{"n":123456789012345678901234567890,"t":"' + b"z" * 50 + b'"}}'),
    ("a2c", b'{"jsonrpc":"2.0","id":7,"result":{"token":"sk-' + b"A1b2C3d4E5f6G7h8I9j0" * 2 + b'"}}'),
    ("a2c", b"\x1b[31m\x00\x9b\xff\xc3( not json \xe2\x82" * 7),
    ("a2c", b'{"not":"jsonrpc","t":"' + EVIL.encode() * 5 + b'"}'),
    ("a2c", b'{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'),
]


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("stream")
    capture = tmp / "hostile.ndjson"
    capture.write_bytes(
        b"".join(
            captures.ndjson_line(seq, captures.Captured(d, 1.7e9 + seq, raw))
            for seq, (d, raw) in enumerate(HOSTILE_FRAMES, 1)
        )
    )
    db = tmp / "relay.db"
    done = subprocess.run(
        [sys.executable, "-m", "acp_relay", "import", "--db", str(db), str(capture)], capture_output=True
    )
    assert done.returncode == 0, done.stderr
    return db


@pytest.mark.parametrize("redact", [True, False])
@pytest.mark.parametrize("fmt", FORMATS)
def test_pieces_write_what_the_whole_values_write(
    fixture_db: Path, hostile_db: Path, fmt: str, redact: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = Policy(enabled=redact)
    cases = [(fixture_db, *sel) for sel in SELECTIONS.values()] + [(hostile_db, None, "1")]
    whole = [_export(db, s, c, fmt, policy) for db, s, c in cases]
    monkeypatch.setattr(captures, "BIG_VALUE", 4)
    monkeypatch.setattr(captures, "PIECE", 3)  # a multiple of 3 (base64), cutting through every character
    pieces = [_export(db, s, c, fmt, policy) for db, s, c in cases]
    for (db, s, c), a, b in zip(cases, whole, pieces, strict=True):
        assert a == b, (db.name, s, c)
    assert b"\\u009b" in whole[-1] and b"\xc2\x9b" not in whole[-1]  # escaped, in either path
    if fmt == "acp-devtools":
        assert isinstance(orjson.loads(whole[-1])["messages"], list)
    else:
        assert all(orjson.loads(line) for line in whole[-1].splitlines())


def test_json_chunks_is_dumps_for_every_shape() -> None:
    """json_chunks against dumps itself, compact and indented at each depth, with and without big values."""
    values = [[], {}, "", [[]], {"a": []}, {"a": {"b": [1, "x" * 9, None, 1.5, True]}}, [EVIL * 3, {"k": EVIL}]]
    for value in values:
        for depth in (None, 0, 1, 2):
            for big in (1 << 20, 2):
                captures.BIG_VALUE, saved = big, captures.BIG_VALUE
                try:
                    got = b"".join(captures.json_chunks(value, depth))
                finally:
                    captures.BIG_VALUE = saved
                want = captures.dumps(value, indent=depth is not None)
                assert got == (want.replace(b"\n", b"\n" + b"  " * depth) if depth else want), (value, depth, big)
    # A value that holds the marker json_chunks would use first: it takes another one.
    value = ["\x00acp-relay-piece:0:0", "y" * 40, {"\x00acp-relay-piece:0:1": "\x00acp-relay-piece:0:1"}]
    captures.BIG_VALUE, saved = 30, captures.BIG_VALUE
    try:
        chunks = list(captures.json_chunks(value, 1))
    finally:
        captures.BIG_VALUE = saved
    assert b"".join(chunks) == captures.dumps(value, indent=True).replace(b"\n", b"\n  ") and b"y" * 40 in chunks


def test_every_character_escape_json_escapes_starts_with_a_lead_it_looks_for() -> None:
    """escape_json skips text holding none of _UNSAFE_LEADS: each character it escapes must start with one."""
    for code in range(0x7F, 0x110000):
        if 0xD800 <= code < 0xE000:
            continue
        char = chr(code)
        if _UNSAFE_JSON.match(char):
            encoded = char.encode()
            assert encoded == b"\x7f" or any(encoded.startswith(lead) for lead in _UNSAFE_LEADS), hex(code)
    assert {c for c, _ in _JSON_ESCAPES} == {
        chr(c) for c in range(0x7F, 0x110000) if not 0xD800 <= c < 0xE000 and _UNSAFE_JSON.match(chr(c))
    }


@pytest.mark.parametrize(
    "data",
    [
        b'{"a":"plain ascii"}',
        b'{"a":"del \x7f here","b":"\x7f"}',
        b"QUJD" * 1000 + b"\x7f",
        '{"a":"caf\u00e9 \u202eevil\u202c \u0085 \u2066"}'.encode(),
        '{"a":"caf\u00e9 only"}'.encode(),
        b'{"a":"\xff\xfe not utf-8 \x7f"}',
    ],
)
def test_escape_json_skips_only_what_holds_nothing_to_escape(data: bytes) -> None:
    """Whichever shortcut it takes (ASCII, no lead byte), escape_json answers as the plain regex would."""
    text = data.decode("utf-8", "surrogateescape")
    want = _UNSAFE_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8", "surrogateescape")
    assert escape_json(data) == want


@pytest.mark.parametrize(
    "text",
    ["plain ascii ", "curly \u201cquotes\u201d and dashes \u2014 ", "evil \u202e and \x9b and \x7f ", "caf\u00e9 "],
)
def test_safe_dumps_of_a_big_value_is_the_same_json_with_nothing_unsafe(text: str) -> None:
    """Past SAFE_DUMPS_BIG safe_dumps takes other paths (no escaping needed; strings escaped before the
    dump): the same value read back, and not one character escape_json would escape left raw."""
    from acp_relay.render.text import SAFE_DUMPS_BIG, safe_dumps

    for value in ({"k": text}, {"k": text * (SAFE_DUMPS_BIG // len(text) + 1), "n": [1, text]}):
        out = safe_dumps(value)
        assert orjson.loads(out) == value
        assert _UNSAFE_JSON.search(out.decode()) is None
        assert out == escape_json(out)
