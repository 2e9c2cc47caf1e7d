"""Fuzz targets for bad input: framer, classifier, tracker/correlator, redaction, frame rows, recorder, materializer.

Every target is a hypothesis test over hostile input: arbitrary bytes, deeply nested JSON, huge and
non-finite numbers, duplicate keys, ids of every JSON type, responses to unknown ids, batches of mixed
garbage, invalid UTF-8, escaped lone surrogates, NUL, CR and BOM. The properties: nothing raises; every
byte stays in a frame (per direction, frames joined with \\n plus the unterminated last give back the
input); seq strictly increases; typed ids never cross-correlate; the recorder's rows bind into SQLite and
read back byte-exact; the materializer, transcript and replay never fail inside.

Settings profiles (chosen with ACP_RELAY_FUZZ_PROFILE, never loaded globally so other tests keep theirs):
`acp-relay-fuzz-ci` (default, the whole file in well under 20 s) and `acp-relay-fuzz-long`, which
`tools/fuzz.py --minutes N` uses in a loop with a time budget per target (ACP_RELAY_FUZZ_EXAMPLES sets
the examples per round).

tests/corpus/ holds the interesting cases, one raw byte file each; test_corpus replays each one through
every target. Known findings (a library bug with a strict-xfail reproducer below) are detected at import
by running the reproducer: while one is open, the targets tolerate exactly its signature and count it;
once it is fixed, the signature is a failure again and the xfail test turns into an XPASS failure (the
six found so far are fixed; their reproducers are regression tests at the end).
"""

from __future__ import annotations

import base64
import collections
import json
import os
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from fastpath import check_fast_path
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from acp_relay.protocol.classify import FrameIndex, classify
from acp_relay.protocol.framing import LineFramer
from acp_relay.protocol.jsonrpc import id_key, loads
from acp_relay.protocol.materialize import UPDATE_HANDLERS, V1_ONLY, Event, Materializer, replay_updates
from acp_relay.protocol.redact import PLACEHOLDER, Policy
from acp_relay.protocol.tracker import A2C, C2A, Frame, Tracker
from acp_relay.record.recorder import Recorder
from acp_relay.render.transcript import render_transcript
from acp_relay.store import db
from acp_relay.store.writer import (
    INSERT_BATCH_MESSAGE,
    INSERT_FRAME,
    UPSERT_SESSION,
    Batch,
    frame_rows,
    json_or_null,
)

CORPUS = Path(__file__).resolve().parent / "corpus"

# ---- settings profiles ---------------------------------------------------------------------------------

_QUIET = list(HealthCheck)
# The suite's profile draws the same examples on every run and keeps no example database: a run's verdict
# is the code's, never the luck of the draw or an example saved by an older version of a strategy (one
# such example, replayed, failed as FlakyStrategyDefinition). tools/fuzz.py's long profile explores.
settings.register_profile(
    "acp-relay-fuzz-ci",
    max_examples=int(os.environ.get("ACP_RELAY_FUZZ_EXAMPLES", 60)),
    deadline=None,
    suppress_health_check=_QUIET,
    derandomize=True,
    database=None,
    print_blob=True,
)
settings.register_profile(
    "acp-relay-fuzz-long",
    max_examples=int(os.environ.get("ACP_RELAY_FUZZ_EXAMPLES", 500)),
    deadline=None,
    suppress_health_check=_QUIET,
    database=None,
    print_blob=True,
)
_PROFILE = os.environ.get("ACP_RELAY_FUZZ_PROFILE", "acp-relay-fuzz-ci")
_BASE = settings.get_profile(_PROFILE)


def fuzz(ci_examples: int) -> settings:
    """A target's settings: the profile's, with its own example count in CI (stream targets are the slow ones)."""
    if _PROFILE == "acp-relay-fuzz-ci" and "ACP_RELAY_FUZZ_EXAMPLES" not in os.environ:
        return settings(_BASE, max_examples=ci_examples)
    return _BASE


COUNTS: collections.Counter[str] = collections.Counter()  # examples run, by target (tools/fuzz.py prints them)
KNOWN_HITS: collections.Counter[str] = collections.Counter()  # examples that hit an open known finding
LAST_INPUT: dict[str, bytes] = {}  # the last input of each target: tools/fuzz.py saves it on a finding

PARSES = {"ok", "blank", "cr", "invalid_utf8", "invalid_json", "not_jsonrpc"}
FRAME_KINDS = {"request", "notification", "response", "error", "batch", "invalid"}
MESSAGE_KINDS = FRAME_KINDS - {"batch"}

# ---- generators of hostile JSON text ---------------------------------------------------------------------


class Raw(str):
    """A JSON token emitted verbatim (numbers and escapes Python values cannot express)."""


class Obj(list):
    """An object as (key, value) pairs: duplicate keys allowed."""


def enc(value: Any) -> str:
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, Obj):
        return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{enc(v)}" for k, v in value) + "}"
    if isinstance(value, dict):
        return enc(Obj(value.items()))
    if isinstance(value, list):
        return "[" + ",".join(enc(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)  # inf/nan come out as Infinity/NaN: garbage we want too


NUMBERS = [
    "0",
    "-0",
    "-0.0",
    "1",
    "1.0",
    "1e0",
    "1e400",
    "-1e400",
    "1.5e-400",
    str(2**200),
    str(2**64),
    str(2**64 + 1),
    str(2**63),
    str(-(2**63) - 1),
    str(2**63 - 1),
    "NaN",
    "Infinity",
    "-Infinity",
    "1E+2",
    "9" * 400,
    "0.1",
    "-1",
]
STRINGS = [
    '"1"',
    '""',
    '"\\ud800"',
    '"\\udfff"',
    '"\\ud83d\\ude00"',
    '"\\u0000"',
    '"a\\u001b[2Jb"',
    '"s1"',
    '"s2"',
    '"\u00e9\u2028"',
    '"\\\\"',
    '"\\"quoted\\""',
]
KEYS = [
    "jsonrpc",
    "id",
    "method",
    "params",
    "result",
    "error",
    "sessionId",
    "update",
    "sessionUpdate",
    "messageId",
    "toolCallId",
    "terminalId",
    "planId",
    "compactionId",
    "content",
    "requestId",
    "code",
    "message",
    "data",
    "cwd",
    "title",
    "mcpServers",
    "env",
    "headers",
    "value",
    "_meta",
    "token",
    "prompt",
    "stopReason",
    "protocolVersion",
    "clientInfo",
    "agentInfo",
    "info",
    "outcome",
    "optionId",
    "modes",
    "currentModeId",
    "configOptions",
    "availableCommands",
    "state",
    "plan",
    "entries",
    "output",
    "exitStatus",
    "usage",
    "childSessionId",
    "senderSessionId",
    "recipientSessionId",
    "locations",
    "summary",
    "status",
    "kind",
    "type",
    "text",
    "methodId",
    "api_key",
    "Authorization",
]
METHODS = [
    "initialize",
    "session/new",
    "session/load",
    "session/resume",
    "session/fork",
    "nes/start",
    "session/prompt",
    "session/update",
    "session/cancel",
    "$/cancel_request",
    "session/request_permission",
    "session/set_mode",
    "session/set_config_option",
    "authenticate",
    "auth/login",
    "fs/read_text_file",
    "terminal/create",
    "x",
    "",
]
VARIANTS = sorted(set(UPDATE_HANDLERS) | V1_ONLY) + ["mystery_update", "_vendor"]
IDS = ["m1", "m2", "t1", "p1", "c1", "s1", "s2", "msg-1", "#1", "main", "\x1b[2J", ""]

key = st.sampled_from(KEYS) | st.text(max_size=6)
scalar = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, width=64)
    | st.text(max_size=8)
    | st.sampled_from(NUMBERS).map(Raw)
    | st.sampled_from(STRINGS).map(Raw)
    | st.sampled_from(VARIANTS)
    | st.sampled_from(IDS)
)
tree = st.recursive(
    scalar, lambda c: st.lists(c, max_size=4) | st.lists(st.tuples(key, c), max_size=5).map(Obj), max_leaves=16
)
an_id = (
    st.sampled_from(
        [
            "1",
            '"1"',
            "1.0",
            "true",
            "false",
            "null",
            "[1]",
            '{"a":1}',
            "0",
            "-0",
            "1e0",
            "2",
            '"2"',
            str(2**64),
            str(2**64 + 1),
            "1e400",
            "NaN",
        ]
    ).map(Raw)
    | scalar
)

block = (
    st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=12))
    | st.builds(lambda m: {"type": st_choice_img(m), "mimeType": m}, st.sampled_from(["image/png", "audio/wav", ""]))
    | st.builds(lambda u: {"type": "resource_link", "uri": u, "name": u}, st.text(max_size=6))
    | st.builds(lambda r: {"type": "resource", "resource": r}, tree)
    | tree
)


def st_choice_img(mime: str) -> str:
    return "audio" if mime.startswith("audio") else "image"


b64 = st.binary(max_size=24).map(lambda b: base64.b64encode(b).decode()) | st.sampled_from(["***", "QQ", "QQ=="])
PLAUSIBLE: dict[str, st.SearchStrategy[Any]] = {
    "messageId": st.sampled_from(IDS),
    "toolCallId": st.sampled_from(IDS),
    "terminalId": st.sampled_from(IDS),
    "planId": st.sampled_from(IDS),
    "compactionId": st.sampled_from(IDS),
    "sessionId": st.sampled_from(IDS),
    "childSessionId": st.sampled_from(IDS),
    "senderSessionId": st.sampled_from(IDS),
    "content": block | st.lists(block, max_size=3) | st.builds(lambda b: {"type": "content", "content": b}, block),
    "summary": st.lists(block, max_size=2),
    "data": b64,
    "output": st.builds(lambda d: {"data": d}, b64),
    "plan": st.builds(
        lambda i, t, e: {"planId": i, "type": t, "entries": e, "content": "x\ny"},
        st.sampled_from(IDS),
        st.sampled_from(["items", "markdown", "file", "other"]),
        st.lists(
            st.builds(
                lambda s, c: {"status": s, "content": c, "priority": "high"},
                st.sampled_from(["pending", "completed"]),
                st.text(max_size=6),
            ),
            max_size=3,
        ),
    ),
    "entries": st.lists(
        st.fixed_dictionaries({"status": st.text(max_size=4), "content": st.text(max_size=4)}), max_size=3
    ),
    "state": st.sampled_from(["running", "idle", "requires_action", "other"]) | tree,
    "stopReason": st.sampled_from(["end_turn", "cancelled", "refusal"]) | tree,
    "exitStatus": st.fixed_dictionaries({"exitCode": st.integers(-1, 255), "signal": st.sampled_from(["", "SIGKILL"])}),
    "availableCommands": st.lists(st.fixed_dictionaries({"name": st.text(max_size=5)}) | tree, max_size=3),
    "configOptions": st.lists(st.fixed_dictionaries({"name": st.text(max_size=5), "currentValue": tree}), max_size=3),
    "locations": st.lists(st.fixed_dictionaries({"path": st.text(max_size=5), "line": st.integers(0, 9) | st.none()})),
    "status": st.sampled_from(["pending", "in_progress", "completed", "failed"]),
    "modes": st.fixed_dictionaries(
        {"currentModeId": st.sampled_from(IDS), "availableModes": st.lists(tree, max_size=2)}
    ),
    "outcome": st.fixed_dictionaries(
        {"outcome": st.sampled_from(["selected", "cancelled"]), "optionId": st.sampled_from(["o1", "o2"])}
    ),
    "options": st.lists(
        st.fixed_dictionaries({"optionId": st.sampled_from(["o1", "o2"]), "name": st.text(max_size=4)})
    ),
    "mcpServers": st.lists(
        st.fixed_dictionaries(
            {
                "name": st.text(max_size=3),
                "env": st.lists(
                    st.fixed_dictionaries({"name": st.text(max_size=3), "value": st.text(max_size=5)}) | tree,
                    max_size=2,
                ),
                "headers": st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2) | tree,
            }
        ),
        max_size=2,
    ),
    "_meta": st.dictionaries(st.sampled_from(["token", "api-Key", "traceId", "Authorization", "x"]), tree, max_size=3),
}
FIELD_KEYS = sorted(PLAUSIBLE) + ["title", "usage", "currentModeId", "modeId", "prompt", "protocolVersion", "kind"]


@st.composite
def fields(draw: st.DrawFn, extra: list[str] | None = None, max_size: int = 5) -> Obj:
    """An object of plausible-or-garbage fields (keys may repeat)."""
    pairs = Obj()
    for k in draw(st.lists(st.sampled_from(FIELD_KEYS + (extra or [])), max_size=max_size)):
        strat = PLAUSIBLE.get(k)
        pairs.append((k, draw(strat | tree if strat is not None else tree)))
    return pairs


@st.composite
def update(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 15)) == 0:
        return draw(tree)
    obj = draw(fields(max_size=6))
    obj.insert(draw(st.integers(0, len(obj))), ("sessionUpdate", draw(st.sampled_from(VARIANTS) | tree)))
    return obj


@st.composite
def message(draw: st.DrawFn) -> Any:
    """A JSON-RPC-ish message (Python tree with Raw/Obj leaves), sometimes not one at all."""
    shape = draw(st.sampled_from(["request", "notification", "update", "response", "error", "garbage", "cancel"]))
    obj = Obj()
    if draw(st.integers(0, 9)):
        obj.append(("jsonrpc", draw(st.just("2.0") | tree) if draw(st.integers(0, 9)) == 0 else "2.0"))
    sid = draw(st.sampled_from(IDS) | tree) if draw(st.integers(0, 5)) == 0 else draw(st.sampled_from(["s1", "s2"]))
    if shape in ("request", "notification"):
        method = (
            draw(st.sampled_from(METHODS) | tree) if draw(st.integers(0, 9)) == 0 else draw(st.sampled_from(METHODS))
        )
        if shape == "request":
            obj.append(("id", draw(an_id)))
        obj.append(("method", method))
        params = draw(fields(extra=["sessionId", "cwd"]))
        params.append(("sessionId", sid))
        obj.append(("params", params if draw(st.integers(0, 9)) else draw(tree)))
    elif shape == "update":
        if draw(st.integers(0, 4)) == 0:
            obj.append(("id", draw(an_id)))
        obj += [("method", "session/update"), ("params", Obj([("sessionId", sid), ("update", draw(update()))]))]
    elif shape == "cancel":
        obj += [("method", "$/cancel_request"), ("params", Obj([("requestId", draw(an_id))]))]
    elif shape in ("response", "error"):
        obj.append(("id", draw(an_id)))
        if shape == "response":
            result = draw(fields(extra=["sessionId", "messageId", "stopReason", "agentInfo", "usage"]))
            obj.append(("result", result if draw(st.integers(0, 5)) else draw(tree)))
        else:
            obj.append(("error", Obj([("code", draw(an_id)), ("message", draw(st.text(max_size=5)))])))
    else:
        return draw(tree)
    if draw(st.integers(0, 7)) == 0:  # a duplicate key, the later one wins (or does it?)
        k, v = draw(st.sampled_from(obj)) if obj else ("id", 1)
        obj.append((k, draw(an_id) if k == "id" else draw(tree)))
    return obj


def _deep(n: int, kind: int) -> bytes:
    return [
        b"[" * n,
        b"[" * n + b"]" * n,
        b'{"a":' * n + b"1" + b"}" * n,
        b'{"jsonrpc":"2.0","id":1,"result":' + b"[" * n + b"]" * n + b"}",
    ][kind]


SPECIAL = st.sampled_from(
    [
        b"",
        b"\r",
        b" ",
        b"\x00",
        b"\xef\xbb\xbf",
        b"\xff\xfe\xfd",
        b"\xc3",
        b"\xed\xa0\x80",
        b"[]",
        b"{}",
        b"null",
        b"[[]]",
        b'{"id":1,"id":"1"}',
        b'[1,{"id":1},"x",null]',
    ]
)
DEEP = st.builds(_deep, st.sampled_from([10, 255, 256, 1023, 1024, 1025, 5000, 100_000]), st.integers(0, 3))


@st.composite
def line(draw: st.DrawFn) -> bytes:
    """One hostile line, without its \\n."""
    pick = draw(st.integers(0, 19))
    if pick < 12:
        body = enc(draw(message())).encode("utf-8", "surrogatepass")
    elif pick < 15:
        body = ("[" + ",".join(enc(m) for m in draw(st.lists(message() | tree, max_size=4))) + "]").encode(
            "utf-8", "surrogatepass"
        )
    elif pick < 16:
        body = enc(draw(tree)).encode("utf-8", "surrogatepass")
    elif pick < 17:
        body = draw(st.binary(max_size=30))
    elif pick < 18:
        body = draw(SPECIAL)
    else:
        body = draw(DEEP) if draw(st.integers(0, 3)) == 0 else draw(SPECIAL)
    mangle = draw(st.integers(0, 11))
    if mangle == 0:
        body = b"\xef\xbb\xbf" + body
    elif mangle == 1:
        body += b"\r"
    elif mangle == 2 and body:
        i = draw(st.integers(0, len(body)))
        body = body[:i] + draw(st.sampled_from([b"\x00", b"\xff", b"\xc0\x80", b"\r", b"\t", b"\\"])) + body[i:]
    elif mangle == 3 and body:
        body = body[: draw(st.integers(0, len(body)))]  # truncated
    return body.replace(b"\n", b"\\n") if draw(st.integers(0, 5)) else body  # \n inside splits the line: fine too


@st.composite
def stream(draw: st.DrawFn) -> list[tuple[str, bytes]]:
    """Interleaved chunks of both directions: (direction, chunk), a chunk of b"" meaning EOF."""
    per: dict[str, list[bytes]] = {}
    for direction in (C2A, A2C):
        lines = draw(st.lists(line(), max_size=8))
        newline_at_end: bool = draw(st.booleans())
        data = b"\n".join(lines) + (b"\n" if lines and newline_at_end else b"")
        cuts = sorted(set(draw(st.lists(st.integers(0, max(len(data), 1)), max_size=6))))
        per[direction] = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True) if data[a:b]]
    out: list[tuple[str, bytes]] = []
    queues = {d: list(c) for d, c in per.items()}
    while queues[C2A] or queues[A2C]:
        d = draw(st.sampled_from([d for d in (C2A, A2C) if queues[d]]))
        out.append((d, queues[d].pop(0)))
    for d in draw(st.permutations([C2A, A2C])):
        if draw(st.integers(0, 4)):
            out.append((d, b""))
    return out


class StrictTracker(Tracker):
    """Tracker._frame swallows tracking errors (they cost an index field, never the frame): the fuzz
    targets still want to see them, so this one keeps each and check_tracked() raises the first."""

    def __init__(self, policy: Policy | None = None) -> None:
        super().__init__(policy)
        self.errors: list[BaseException] = []

    def _track(self, *args: Any) -> None:
        try:
            super()._track(*args)
        except Exception as exc:
            self.errors.append(exc)
            raise

    def check_tracked(self) -> None:
        if self.errors:
            raise self.errors[0]


# ---- known findings -----------------------------------------------------------------------------------------
# name -> (reproducer that raises/asserts while the bug is present, exception signature)


def _repro_cancel_unhashable() -> None:
    t = StrictTracker()
    t.feed(C2A, b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":[1]}}\n', 0.0, 0.0)
    t.feed(C2A, b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":{"a":[1]}}}\n', 0.0, 0.0)
    t.check_tracked()


def _repro_classify_int_overflow() -> None:
    classify(b'{"jsonrpc":"2.0","id":' + b"9" * 400 + b',"method":"m"}')


def _repro_unencodable_index() -> None:
    t = StrictTracker()
    frames = t.feed(
        C2A,
        b'{"jsonrpc":"2.0","id":"\\ud800","method":"session/update","params":{"sessionId":"\\udfff",'
        b'"update":{"sessionUpdate":"agent_message_chunk","messageId":"\\udc00"}}}\n',
        0.0,
        0.0,
    )
    conn = _fresh_db()
    rows, batches = frame_rows(1, frames)
    conn.executemany(INSERT_FRAME, rows)
    _bind_tracker_state(conn, t)


def _repro_wide_int_info() -> None:
    t = StrictTracker()
    t.feed(
        C2A,
        b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"clientInfo":{"v":18446744073709551616,'
        b'"w":1e400}}}\n',
        0.0,
        0.0,
    )
    _bind_tracker_state(_fresh_db(), t)


def _repro_array_id_correlates() -> None:
    t = StrictTracker()
    t.feed(C2A, b'{"jsonrpc":"2.0","id":[1],"method":"x"}\n', 0.0, 0.0)
    (f,) = t.feed(A2C, b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"bad"}}\n', 0.0, 0.0)
    assert f.index.messages[0].request_seq is None


def _repro_transcript_escapes() -> None:
    m = Materializer()
    m.feed(
        Event(
            1,
            0.0,
            A2C,
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": "s",
                    "update": {
                        "sessionUpdate": "tool_call",
                        "toolCallId": "\x1b]0;owned\x07",
                        "title": "t",
                        "status": "\x1b[2J",
                    },
                },
            },
        )
    )
    _check_transcript_clean(render_transcript(m.state))


def _present(repro: Callable[[], None]) -> bool:
    try:
        repro()
    except Exception:
        return True
    return False


KNOWN: dict[str, tuple[Callable[[], None], Callable[[BaseException], bool]]] = {
    "classify-int-overflow": (_repro_classify_int_overflow, lambda e: isinstance(e, OverflowError)),
    "cancel-unhashable-requestId": (
        _repro_cancel_unhashable,
        lambda e: isinstance(e, TypeError) and "unhashable" in str(e),
    ),
    "unencodable-index-strings": (
        _repro_unencodable_index,
        lambda e: isinstance(e, (UnicodeEncodeError, TypeError)) and "surrogate" in str(e),
    ),
    "wide-int-connection-info": (_repro_wide_int_info, lambda e: isinstance(e, TypeError) and "64-bit" in str(e)),
    "array-id-correlates-with-null": (
        _repro_array_id_correlates,
        lambda e: isinstance(e, AssertionError) and "cross-correlated" in str(e),
    ),
    "transcript-terminal-escapes": (
        _repro_transcript_escapes,
        lambda e: isinstance(e, AssertionError) and "control character" in str(e),
    ),
}


def _fresh_db() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    db.migrate(conn)
    conn.execute("INSERT INTO connections (id, started_at, argv) VALUES (1, 0, '[]')")
    return conn


def _bind_tracker_state(conn: sqlite3.Connection, t: Tracker) -> None:
    """What Recorder._insert and _finish bind besides frames: sessions, backfill, connection info, unanswered."""
    conn.executemany(
        UPSERT_SESSION,
        [
            (s.session_id, 1, s.origin, s.first_seen, s.last_seen, s.cwd, s.title, s.parent_session_id)
            for s in t.sessions.values()
        ],
    )
    conn.executemany(
        "UPDATE frames SET session_id = ? WHERE connection_id = ? AND seq = ? AND session_id IS NULL",
        [(sid, 1, seq) for seq, sid in t.backfill],
    )
    dumps = json_or_null  # what the recorder binds (exact JSON, however wide the ints: issue 10)
    conn.execute(
        "UPDATE connections SET protocol_version = ?, client_info = ?, agent_info = ?, unanswered = ? WHERE id = 1",
        (t.info.protocol_version, dumps(t.info.client_info), dumps(t.info.agent_info), dumps(t.unanswered() or None)),
    )


OPEN: set[str] = set()  # the findings whose reproducer still fails: computed below, once the checks exist


def known(exc: BaseException) -> bool:
    """True (and counted) when exc is the signature of a finding that is still open."""
    for name, (_, signature) in KNOWN.items():
        if name in OPEN and signature(exc):
            KNOWN_HITS[name] += 1
            try:
                event(f"known finding: {name}")
            except InvalidArgument:  # outside a hypothesis test (the corpus replay)
                pass
            return True
    return False


def tolerant(check: Callable[..., object]) -> Callable[..., None]:
    """Run a check; an open known finding's signature ends the example quietly, anything else propagates."""

    def run(*args: Any) -> None:
        try:
            check(*args)
        except Exception as exc:
            if not known(exc):
                raise

    run.__name__ = check.__name__
    return run


# ---- the checks (shared by the hypothesis targets and the corpus replay) -------------------------------------


def check_framer(data: bytes, cuts: list[int]) -> None:
    framer, lines = LineFramer(), []
    points = sorted({c % (len(data) + 1) for c in cuts})
    for a, b in zip([0, *points], [*points, len(data)], strict=True):
        lines += framer.feed(data[a:b])
        assert framer.pending == len(data[:b].rsplit(b"\n", 1)[-1])
    last = framer.finish()
    assert b"".join(line + b"\n" for line in lines) + (last or b"") == data
    assert (last is not None) == (bool(data) and not data.endswith(b"\n"))
    assert all(b"\n" not in line for line in lines) and framer.finish() is None and framer.pending == 0


def _utf8(value: Any, what: str) -> None:
    if isinstance(value, str):
        value.encode("utf-8")  # raises UnicodeEncodeError (surrogates), as SQLite binding would
    elif value is not None:
        raise AssertionError(f"{what} is {type(value).__name__}: {value!r}")


def check_index(ix: FrameIndex) -> None:
    assert ix.parse in PARSES and ix.kind in FRAME_KINDS, ix
    if ix.kind == "batch":
        assert ix.messages
    else:
        assert len(ix.messages) <= 1
        assert (ix.kind == "invalid") == (not ix.messages or ix.messages[0].kind == "invalid")
    for m in ix.messages:
        assert m.kind in MESSAGE_KINDS
        assert m.rpc_id is None or type(m.rpc_id) in (str, int, float, bool), m
        if type(m.rpc_id) is int:
            assert -(2**63) <= m.rpc_id < 2**63
        for what, value in (
            ("method", m.method),
            ("session_id", m.session_id),
            ("update_kind", m.update_kind),
            ("rpc_id", m.rpc_id if isinstance(m.rpc_id, str) else None),
        ):
            _utf8(value, what)
        if m.details:
            orjson.dumps(m.details)


def check_classify(raw: bytes) -> None:
    ix = classify(raw)
    check_index(ix)
    if ix.parse == "ok":
        assert ix.kind != "invalid" and raw[-1:] != b"\r"
    if raw.strip(b" \t\r") == b"":
        assert ix.parse in ("blank", "cr") and not ix.messages


def _feed_all(chunks: list[tuple[str, bytes]], tracker: Tracker) -> list[Frame]:
    frames: list[Frame] = []
    for i, (d, chunk) in enumerate(chunks):
        frames += tracker.feed(d, chunk, float(i), i / 1000.0) if chunk else tracker.eof(d, float(i), i / 1000.0)
    if isinstance(tracker, StrictTracker):
        tracker.check_tracked()
    return frames


def _expected(chunks: list[tuple[str, bytes]]) -> dict[str, tuple[bytes, bool]]:
    """Per direction: the bytes sent and whether EOF was seen."""
    out: dict[str, tuple[bytes, bool]] = {}
    for d in (C2A, A2C):
        out[d] = (b"".join(c for dd, c in chunks if dd == d), any(dd == d and not c for dd, c in chunks))
    return out


def _rejoin(frames: list[tuple[bytes, bool]]) -> bytes:
    return b"".join(raw + (b"" if unterminated else b"\n") for raw, unterminated in frames)


def _message_at(frames_by_seq: dict[int, Frame], seq: int) -> list[Any]:
    f = frames_by_seq[seq]
    return [m for m in f.index.messages if m.kind == "request"]


def check_tracker(chunks: list[tuple[str, bytes]]) -> list[Frame]:
    tracker = StrictTracker()
    frames = _feed_all(chunks, tracker)
    assert [f.seq for f in frames] == list(range(1, len(frames) + 1))  # strictly increasing, no gaps
    for d, (data, eof) in _expected(chunks).items():
        mine = [f for f in frames if f.direction == d]
        assert all(not f.unterminated for f in mine[:-1])
        rebuilt = _rejoin([(f.raw, f.unterminated) for f in mine])
        pending = tracker.framers[d].pending  # bytes of a last line not yet terminated (no EOF yet)
        assert rebuilt + data[len(data) - pending :] == data and (pending == 0 or not eof)
    by_seq = {f.seq: f for f in frames}
    for f in frames:
        check_index(f.index)
        for m in f.index.messages:
            if m.request_seq is None:
                continue
            req = by_seq[m.request_seq]
            assert req.direction != f.direction and req.seq < f.seq
            raw_id = m.message.get("id")
            match = [r for r in _message_at(by_seq, req.seq) if id_key(r.rpc_id) == id_key(m.rpc_id)]
            assert match, f"response {m!r} correlated with {req.raw!r}"
            for r in match:  # typed ids: the JSON values must be of one type
                req_id = r.message.get("id")
                if type(req_id) is type(raw_id) or (
                    isinstance(raw_id, (int, float)) and type(r.rpc_id) is type(m.rpc_id)
                ):
                    continue
                problem = AssertionError(f"cross-correlated: {req_id!r} and {raw_id!r}")
                if {type(req_id), type(raw_id)} <= {list, dict, type(None)} and known(problem):
                    continue  # the open array-id finding: go on checking the rest of the stream
                raise problem
    for s in tracker.sessions.values():
        assert isinstance(s.session_id, str)
    json_or_null(tracker.unanswered())  # what the recorder binds: exact JSON, however wide the ids
    return frames


def _typeof(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "null"
    return {str: "text", int: "integer", bool: "integer", float: "real"}[type(value)]


def check_rows(chunks: list[tuple[str, bytes]], policy: Policy) -> None:
    tracker = StrictTracker(policy)  # redacts each frame before indexing it, as the recorder's does
    frames = _feed_all(chunks, tracker)
    for f in frames:
        if f.redacted and f.index.messages:
            loads(f.raw)  # a redacted frame keeps valid JSON (numbers exact, however wide)
    conn = _fresh_db()
    rows, batches = frame_rows(1, frames)
    conn.executemany(INSERT_FRAME, rows)
    conn.executemany(INSERT_BATCH_MESSAGE, batches)
    _bind_tracker_state(conn, tracker)
    stored = conn.execute(
        "SELECT seq, direction, raw, unterminated, redacted, length, typeof(rpc_id), kind, parse "
        "FROM frames ORDER BY seq"
    ).fetchall()
    assert len(stored) == len(frames)
    for f, (seq, d, raw, unterminated, redacted, length, rpc_type, kind, parse) in zip(frames, stored, strict=True):
        assert (seq, d, raw, bool(unterminated), redacted, length) == (
            f.seq,
            f.direction,
            f.raw,
            f.unterminated,
            f.redacted,
            len(f.raw),
        )
        assert (kind, parse) == (f.index.kind, f.index.parse)
        single = f.index.single
        assert rpc_type == _typeof(single.rpc_id if single else None)
    n_batch = sum(len(f.index.messages) for f in frames if f.index.kind == "batch")
    assert conn.execute("SELECT count(*) FROM batch_messages").fetchone()[0] == n_batch
    if not policy.enabled:
        for d, (data, _) in _expected(chunks).items():
            got = _rejoin([(r, bool(u)) for _, dd, r, u, *_ in stored if dd == d])
            assert data.startswith(got) and len(data) - len(got) == tracker.framers[d].pending
    conn.execute("SELECT count(*) FROM messages").fetchone()


class _StrictRecorder(Recorder):
    """The writer's path minus the thread, with _write's catch-all removed so a failure shows its exception."""

    def _submit(self, batch: Batch) -> None:
        assert self.conn is not None
        try:
            self._insert(batch)
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        self.frames += batch.frames


def check_recorder(chunks: list[tuple[str, bytes]]) -> None:
    """Recorder._process as the writer thread runs it: every frame recorded, byte-exact, on a healthy database."""
    conn = _fresh_db()
    rec = _StrictRecorder(
        Path("/nonexistent/fuzz.db"),
        argv=["agent"],
        cwd="/",
        label=None,
        policy=Policy(enabled=False),
    )
    rec.conn, rec.connection_id, rec.tracker = conn, 1, StrictTracker()
    for i, (d, chunk) in enumerate(chunks):
        rec._process([(d, chunk, float(i), i / 1000.0)])
    rec.tracker.check_tracked()
    assert rec.unrecorded == 0
    for d, (data, _) in _expected(chunks).items():
        got = _rejoin(
            [
                (r, bool(u))
                for r, u in conn.execute("SELECT raw, unterminated FROM frames WHERE direction = ? ORDER BY seq", (d,))
            ]
        )
        assert data.startswith(got) and len(data) - len(got) == rec.tracker.framers[d].pending
    json_or_null(rec.tracker.unanswered() or None)  # what _finish writes


CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _check_transcript_clean(lines: list[str]) -> None:
    for line in lines:
        assert isinstance(line, str)
        bad = CONTROL.search(line)
        assert bad is None, f"control character {bad.group()!r} in transcript line {line!r}"


def check_materializer(events: list[Event], version: int) -> None:
    m = Materializer(version)
    for e in events:
        m.feed(e)
    state = m.state
    assert not state.errors, state.errors  # feed() survived, but only through its last-resort handler
    assert not [e for e in state.entries if any("materializer error" in p for p in e.problems)]
    updates = replay_updates(state, version)
    assert all(isinstance(u, dict) for u in updates)
    json.dumps(updates, default=repr)
    again = Materializer(version)  # what replay sends must be something the materializer folds cleanly
    for i, u in enumerate(updates):
        again.feed(
            Event(
                i + 1,
                float(i),
                A2C,
                {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": u}},
            )
        )
    assert not again.state.errors, again.state.errors
    render_transcript(again.state)
    for color in (False, True):
        lines = render_transcript(state, color=color)
        assert all(isinstance(line, str) for line in lines)
    _check_transcript_clean(render_transcript(state, color=False))
    check_spans(events, version)


def check_spans(events: list[Event], version: int) -> None:
    """The OpenTelemetry mapping of the same events: it never raises, every span ends no earlier than it
    starts, ids are unique, and both OTLP encodings (our JSON, the SDK's protobuf) take the result."""
    from acp_relay.otel import sdk
    from acp_relay.protocol.spans import session_spans

    spans, resource = session_spans(events, "s1", version, content=True)
    assert all(s.end_ns >= s.start_ns and s.ended for s in spans)
    assert len({s.span_id for s in spans}) == len(spans)
    if spans:
        orjson.loads(sdk.traces_json(spans, resource))
        sdk.encode_spans(sdk.readable_spans(spans, resource)).SerializeToString()


def events_from(frames: list[Frame]) -> list[Event]:
    """Events as show/replay build them: one per message, a response carrying its request."""
    by_seq = {f.seq: f for f in frames}
    events = []
    for f in frames:
        for m in f.index.messages:
            request = None
            if m.request_seq is not None:
                req = [r.message for r in _message_at(by_seq, m.request_seq) if id_key(r.rpc_id) == id_key(m.rpc_id)]
                request = req[0] if req else None
            events.append(Event(f.seq, f.ts, f.direction, m.message, request=request, raw=f.raw))
    return events


def check_stream(chunks: list[tuple[str, bytes]]) -> None:
    """Every stream-level target on one input."""
    for check, args in (
        (check_tracker, ()),
        (check_rows, (Policy(),)),
        (check_rows, (Policy(enabled=False),)),
        (check_recorder, ()),
        (check_fast_path, ()),
    ):
        tolerant(check)(chunks, *args)
    try:
        frames = _feed_all(chunks, StrictTracker())
    except Exception as exc:
        if known(exc):
            return
        raise
    for version in (1, 2):
        tolerant(check_materializer)(events_from(frames), version)


OPEN.update(name for name, (repro, _) in KNOWN.items() if _present(repro))


# ---- hypothesis targets -------------------------------------------------------------------------------------


def _note(target: str, data: bytes) -> None:
    COUNTS[target] += 1
    LAST_INPUT[target] = data


def _stream_bytes(chunks: list[tuple[str, bytes]]) -> bytes:
    """A stream as one file: its c2a bytes (what the corpus stores)."""
    return b"".join(c for d, c in chunks if d == C2A)


@fuzz(80)
@given(st.lists(line(), max_size=6).map(b"\n".join) | st.binary(max_size=200), st.lists(st.integers(0), max_size=8))
def test_fuzz_framer(data: bytes, cuts: list[int]) -> None:
    _note("framer", data)
    check_framer(data, cuts)


@fuzz(100)
@given(line() | st.binary(max_size=100))
def test_fuzz_classify(raw: bytes) -> None:
    _note("classify", raw)
    tolerant(check_classify)(raw)


@fuzz(30)
@given(stream())
def test_fuzz_tracker(chunks: list[tuple[str, bytes]]) -> None:
    _note("tracker", _stream_bytes(chunks))
    tolerant(check_tracker)(chunks)


_TYPED = [
    "1",
    '"1"',
    "1.0",
    "true",
    "false",
    "null",
    "[1]",
    '{"id":1}',
    "0",
    "-0",
    '"01"',
    "1e0",
    "-1",
    "1.5",
    str(2**63),
    str(2**64),
    '"\\u0031"',
    "[]",
    "{}",
]


@fuzz(50)
@given(
    st.lists(st.sampled_from(_TYPED), unique=True, max_size=12),
    st.lists(st.sampled_from(_TYPED), max_size=14),
    st.sampled_from([(C2A, A2C), (A2C, C2A)]),
)
def test_fuzz_typed_ids(request_ids: list[str], response_ids: list[str], dirs: tuple[str, str]) -> None:
    """Requests with ids of every JSON type, answered in any order (and to unknown ids): no cross-correlation."""
    data = b"".join(b'{"jsonrpc":"2.0","id":%s,"method":"m%d"}\n' % (i.encode(), n) for n, i in enumerate(request_ids))
    answers = b"".join(b'{"jsonrpc":"2.0","id":%s,"result":{}}\n' % i.encode() for i in response_ids)
    _note("typed_ids", data + answers)
    tolerant(check_tracker)([(dirs[0], data), (dirs[1], answers)])


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
    | st.sampled_from(IDS + METHODS),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(key, c, max_size=5),
    max_leaves=24,
)
rpc_values = st.builds(
    lambda m, p, extra: {**extra, "method": m, "params": p},
    st.sampled_from(METHODS),
    st.fixed_dictionaries(
        {},
        optional={
            "mcpServers": PLAUSIBLE["mcpServers"],
            "_meta": PLAUSIBLE["_meta"],
            "methodId": json_values,
            "token": json_values,
            "sessionId": json_values,
        },
    ),
    st.dictionaries(key, json_values, max_size=3),
)
policies = st.builds(
    lambda paths, rx, on: Policy(enabled=on, paths=paths, regexes=rx),
    st.lists(
        st.lists(st.sampled_from(KEYS[:12] + ["*", "0", "1", ""]), min_size=1, max_size=4).map(".".join), max_size=3
    ),
    st.lists(st.sampled_from(["sk-[a-z0-9]+", "s1", "(a|b)+", "^", "", r"\d"]), max_size=2),
    st.booleans(),
)


def _secret_values(value: Any, inside: bool = False) -> list[Any]:
    """Scalars under credential-like _meta keys (that must come out as the placeholder): an object under
    such a key is looked into by its own keys, a list item by item; null, booleans and "" hold nothing."""
    from acp_relay.protocol.redact import secret_key

    out: list[Any] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if inside and isinstance(k, str) and secret_key(k):
                out += _secret_leaves(v)
            else:
                out += _secret_values(v, inside or k == "_meta")
    elif isinstance(value, list):
        for v in value:
            out += _secret_values(v, inside)
    return out


def _secret_leaves(v: Any) -> list[Any]:
    from acp_relay.protocol.redact.walk import _DESCRIPTIVE

    if isinstance(v, dict):
        return [
            x
            for k, item in v.items()
            if not (k in _DESCRIPTIVE and not isinstance(item, (dict, list)))
            for x in _secret_leaves(item)
        ]
    if isinstance(v, list):
        return [x for item in v for x in _secret_leaves(item)]
    return [] if v is None or v == "" or isinstance(v, bool) else [v]


def check_redact(value: Any, policy: Policy) -> None:
    try:
        before = orjson.dumps(value)
    except orjson.JSONEncodeError:
        return  # deeper than orjson writes (255): not a redaction input the recorder can store either
    out, changed = policy.apply(value)
    assert orjson.dumps(value) == before, "apply() mutated its input"
    dumped = orjson.dumps(out)  # the stored copy must stay JSON
    if not changed:
        assert dumped == before
    if policy.enabled and _secret_values(value):
        # user regexes run after the placeholders and may rewrite them, never bring a secret back
        assert changed and all(isinstance(v, str) and PLACEHOLDER in v for v in _secret_values(out))


@fuzz(60)
@given(json_values | rpc_values | st.lists(rpc_values, max_size=3), policies)
def test_fuzz_redact(value: Any, policy: Policy) -> None:
    _note("redact", repr(value).encode("utf-8", "backslashreplace"))
    check_redact(value, policy)


@fuzz(20)
@given(stream(), policies)
def test_fuzz_frame_rows(chunks: list[tuple[str, bytes]], policy: Policy) -> None:
    _note("frame_rows", _stream_bytes(chunks))
    tolerant(check_rows)(chunks, policy)


@fuzz(20)
@given(stream())
def test_fuzz_recorder(chunks: list[tuple[str, bytes]]) -> None:
    _note("recorder", _stream_bytes(chunks))
    tolerant(check_recorder)(chunks)


@fuzz(20)
@given(stream(), st.sampled_from([1, 2]))
def test_fuzz_materializer_stream(chunks: list[tuple[str, bytes]], version: int) -> None:
    """Events built the way show/replay build them, from whatever the tracker made of hostile bytes."""
    _note("materializer_stream", _stream_bytes(chunks))
    try:
        frames = _feed_all(chunks, StrictTracker())
    except Exception as exc:
        if known(exc):
            return
        raise
    tolerant(check_materializer)(events_from(frames), version)


def _plain(value: Any) -> Any:
    """A generated tree as plain Python (Raw tokens parsed, or kept as strings when they do not parse)."""
    if isinstance(value, Raw):
        try:
            return json.loads(value)
        except ValueError:
            return str(value)
    if isinstance(value, Obj):
        return {k: _plain(v) for k, v in value}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


event_dicts = st.builds(
    lambda seq, ts, d, msg, req: Event(seq, ts, d, msg, request=req),
    st.integers(0, 50),
    st.floats(0, 1e9) | st.sampled_from([float("nan"), float("inf"), -1.0]),
    st.sampled_from([C2A, A2C, "sideways"]),
    message().map(_plain) | tree.map(_plain),
    st.none() | message().map(_plain) | tree.map(_plain),
)


@fuzz(25)
@given(st.lists(event_dicts, max_size=15), st.sampled_from([1, 2, 3]))
def test_fuzz_materializer_events(events: list[Event], version: int) -> None:
    """Events straight from JSON-RPC-ish dicts: every variant name, garbage payloads, nonsense requests."""
    _note("materializer_events", repr([e.message for e in events]).encode("utf-8", "backslashreplace"))
    tolerant(check_materializer)(events, version)


# ---- corpus -------------------------------------------------------------------------------------------------

CORPUS_FILES = (
    sorted(p for p in CORPUS.glob("*") if p.is_file() and not p.name.startswith(".")) if CORPUS.is_dir() else []
)


@pytest.mark.parametrize("path", CORPUS_FILES, ids=[p.name for p in CORPUS_FILES])
def test_corpus(path: Path) -> None:
    """Each stored case through every target: as one chunk, byte by byte, in either direction, answered."""
    data = path.read_bytes()
    check_framer(data, [])
    check_framer(data, list(range(0, len(data), max(1, len(data) // 64))))
    for raw in data.split(b"\n"):
        tolerant(check_classify)(raw)
    small = len(data) <= 4096
    shapes = [[(C2A, data), (C2A, b""), (A2C, b"")], [(A2C, data)], [(C2A, data), (A2C, data), (A2C, b"")]]
    if small:
        shapes.append([(C2A, data[i : i + 1]) for i in range(len(data))] + [(C2A, b"")])
    for chunks in shapes:
        check_stream(chunks)
    try:
        value = orjson.loads(data.split(b"\n")[0])
    except orjson.JSONDecodeError:
        value = None
    for policy in (Policy(), Policy(paths=["params.*"], regexes=["s1"])):
        check_redact(value, policy)


def test_corpus_exists() -> None:
    assert len(CORPUS_FILES) >= 20


# ---- findings, fixed in 92c4c7e: their minimal reproducers stay as regression tests ------------------------
# A new finding goes in as a strict xfail reproducer plus a KNOWN entry (the targets then tolerate its signature
# while it is open); once fixed, the xfail mark comes off and the test joins these.


def test_regression_classify_int_overflow() -> None:
    """An id of 309+ digits (json fallback, orjson refuses it as infinity): float() raised OverflowError."""
    _repro_classify_int_overflow()


def test_regression_cancel_request_with_unhashable_id() -> None:
    """A list/dict requestId in $/cancel_request: unhashable id key, the tracker raised, the recorder thread
    died and forwarding stalled once 16 MB were queued."""
    _repro_cancel_unhashable()


def test_regression_lone_surrogate_index_strings() -> None:
    """Escaped lone surrogates passed the json fallback: index strings could not be encoded to UTF-8 and every
    later write of the connection failed (sessions stayed dirty)."""
    _repro_unencodable_index()


def test_regression_wide_int_connection_info() -> None:
    """Ints wider than 64 bits from the json fallback in clientInfo: orjson.dumps raised in every _insert."""
    _repro_wide_int_info()


def test_regression_array_id_correlates_with_null() -> None:
    """Array/object ids became rpc_id None: a request with id [1] was answered by a response with id null."""
    _repro_array_id_correlates()


def test_regression_transcript_terminal_escapes() -> None:
    """render_transcript printed ids, status and mode unsanitized: a recording could drive the terminal."""
    _repro_transcript_escapes()


def test_known_findings_all_fixed() -> None:
    """While a KNOWN finding is open the targets tolerate its signature; today none is."""
    assert set() == OPEN


def test_deep_message_redaction_keeps_the_frame() -> None:
    """Found by fuzzing: orjson.dumps stops at 255 levels, orjson.loads at 1024; redaction falls back to json."""
    t = Tracker(Policy())
    (f,) = t.feed(
        C2A,
        b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"_meta":{"token":"s"},"deep":'
        + b"[" * 300
        + b"]" * 300
        + b"}}\n",
        0.0,
        0.0,
    )
    stored = json.loads(f.raw)
    assert f.redacted and stored["params"]["_meta"]["token"] == PLACEHOLDER


# ---- issue 19: every import format is untrusted --------------------------------------------------------------
def check_import(fmt: str, data: bytes, tmp: Path) -> None:
    """A capture file: refused with FormatError, or validated and written whole into a fresh database
    (one transaction, every frame there). Nothing else may escape: no crash, no partial write."""
    from acp_relay.import_.command import read_capture
    from acp_relay.protocol.captures import FormatError
    from acp_relay.store.imports import write_captures

    path = tmp / f"capture.{fmt}"
    path.write_bytes(data)
    try:
        captures = read_capture(path, data)
    except FormatError:
        return
    conn = db.connect(tmp / "import.db")
    try:
        before = conn.execute("SELECT count(*) FROM frames").fetchone()[0]
        results = write_captures(conn, captures, digest=os.urandom(8).hex(), source=str(path), label=None)
        after = conn.execute("SELECT count(*) FROM frames").fetchone()[0]
        assert after - before == sum(r.frames for r in results) == sum(len(c.frames) for c, _ in captures)
    finally:
        conn.close()


_capture_values = json_values | st.floats() | st.sampled_from([1e308, -1.0, 1e12, "abc", "c2a", "a2c", ""])


@fuzz(30)
@given(
    st.lists(
        st.dictionaries(st.sampled_from(["seq", "ts", "direction", "raw", "raw_b64"]), _capture_values), max_size=4
    )
)
def test_fuzz_import_ndjson(tmp_path_factory: pytest.TempPathFactory, records: list[dict[str, Any]]) -> None:
    data = b"".join(json.dumps(r).encode() + b"\n" for r in records)
    _note("import_ndjson", data)
    check_import("ndjson", data, tmp_path_factory.mktemp("imp"))


@fuzz(30)
@given(
    st.dictionaries(st.sampled_from(["id", "agentCommand", "startedAt", "endedAt"]), _capture_values),
    st.lists(
        st.dictionaries(
            st.sampled_from(["seq", "timestamp", "direction", "kind", "raw", "rawBase64", "payload"]),
            _capture_values | st.sampled_from(["editor-to-agent", "agent-to-editor"]),
        ),
        max_size=4,
    ),
)
def test_fuzz_import_devtools(
    tmp_path_factory: pytest.TempPathFactory, session: dict[str, Any], messages: list[dict[str, Any]]
) -> None:
    data = json.dumps({"version": 1, "exportedAt": 1, "session": session, "messages": messages}).encode()
    _note("import_devtools", data)
    check_import("json", data, tmp_path_factory.mktemp("imp"))


@fuzz(30)
@given(
    st.lists(
        st.fixed_dictionaries(
            {"type": st.sampled_from(["request", "response", "notification"]), "ts": _capture_values},
            optional={
                "from": st.sampled_from(["Client", "Agent", "Proxy(0)"]) | _capture_values,
                "to": st.sampled_from(["Client", "Agent", "Proxy(0)"]) | _capture_values,
                "method": _capture_values,
                "id": _capture_values,
                "params": _capture_values,
                "payload": _capture_values,
                "protocol": st.sampled_from(["acp", "mcp"]),
            },
        ),
        max_size=4,
    )
)
def test_fuzz_import_conductor_trace(tmp_path_factory: pytest.TempPathFactory, events: list[dict[str, Any]]) -> None:
    data = b"".join(json.dumps(e).encode() + b"\n" for e in events)
    _note("import_trace", data)
    check_import("jsons", data, tmp_path_factory.mktemp("imp"))


_cell = (
    st.none()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats()
    | st.text(max_size=8)
    | st.binary(max_size=16)
    | st.just(b"{}")
)


@fuzz(30)
@given(
    st.tuples(_cell, _cell, _cell),
    st.lists(st.tuples(_cell, st.sampled_from(["c2a", "a2c"]) | _cell, _cell, _cell, _cell), max_size=3),
    st.lists(st.tuples(_cell, _cell, _cell), max_size=2),
)
def test_fuzz_import_sqlite(
    tmp_path_factory: pytest.TempPathFactory,
    connection: tuple[Any, ...],
    frames: list[tuple[Any, ...]],
    stderr: list[tuple[Any, ...]],
) -> None:
    tmp = tmp_path_factory.mktemp("imp")
    src = sqlite3.connect(tmp / "src.db")
    src.executescript(
        "CREATE TABLE connections (id INTEGER PRIMARY KEY, started_at, ended_at, argv);"
        "CREATE TABLE frames (connection_id, seq, direction, ts, mono, raw, unterminated DEFAULT 0, "
        "redacted DEFAULT 0, details);"
        "CREATE TABLE stderr (id INTEGER PRIMARY KEY, connection_id, ts, mono, raw, unterminated DEFAULT 0);"
    )
    src.execute("INSERT INTO connections VALUES (1, ?, ?, ?)", connection)
    src.executemany(
        "INSERT INTO frames (connection_id, seq, direction, ts, mono, raw) VALUES (1, ?, ?, ?, ?, ?)", frames
    )
    src.executemany("INSERT INTO stderr (connection_id, ts, mono, raw) VALUES (1, ?, ?, ?)", stderr)
    src.commit()
    src.close()
    data = (tmp / "src.db").read_bytes()
    _note("import_sqlite", data)
    check_import("db", data, tmp)
