"""Issue 30, item 7: every field of every message ACP defines is escaped by every command that prints it.

The messages are generated from the shipped JSON Schemas (check/schemas): for each session/update variant
the vocabulary names and each method's request, notification and response, one message per alternative of
its unions, with every string (enum values, ids, titles, paths, stop reasons, statuses, map keys) set to a
hostile payload and the discriminators (`type`, `sessionUpdate`) kept, so each renderer takes its branch.
A variant or method no schema defines gets its fields by hand. Nothing a command prints on stdout or stderr
may hold a control character (but the newline), a C1 control or a bidi control; --json lines stay JSON (the
characters as \\u escapes); view's page holds no tag the recording wrote.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import relay_cmd, rows
from support.cli import run
from test_hostile_output import EVIL, _bad

from acp_relay.protocol import vocab
from acp_relay.protocol.check.schema import _load, schema_set

# Short payloads, so that a field late on a line is not cut off before it is printed; each mixes classes in
# another order. OSC 52 (the clipboard) and BEL as in the issue; 8-bit CSI, bidi override and isolate, NUL,
# NEL; an OSC 8 link, CSI, DEL; then an HTML tag for view's page. The last pass is every class at once.
PAYLOADS = [
    "\x1b]52;c;cHduZWQ=\x07",
    "\x9b31m\u202e\x00\x85\u2066",
    "\x1b]8;;http://e.example/\x1b\\L\x1b]8;;\x1b\\\x1b[2J\x07\x7f",
    "<img src=x onerror=alert(1)>\x9b\u200f",
    EVIL,
]
SID = "s\x1b]52;c;eA==\x07\x9b\u202e\u2066"  # every sessionId field: one hostile session per connection
TAG = "<img src=x"


@dataclass(frozen=True)
class Leaf:
    """A string in a generated message (an enum's too: a hostile status is the issue's case): the payload."""


MAP_KEY = "\0key"  # a free-form map's key (`_meta`, env): hostile too


class Template:
    """One instance of a schema definition: at every union, alternative `pick` (modulo its length)."""

    def __init__(self, defs: dict[str, Any], pick: int) -> None:
        self.defs, self.pick, self.widest = defs, pick, 1

    def of(self, node: Any, seen: tuple[str, ...] = ()) -> Any:
        if not isinstance(node, dict):
            return None
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            return None if name in seen else self.of(self.defs[name], (*seen, name))
        if "const" in node:
            return node["const"]
        if "enum" in node:
            return Leaf()
        out = None
        for sub in node.get("allOf", []):
            out = _merge(out, self.of(sub, seen))
        union: list[Any] = node.get("oneOf") or node.get("anyOf") or []
        alts = [a for a in union if not (isinstance(a, dict) and a.get("type") == "null")]
        if alts:
            self.widest = max(self.widest, len(alts))
            out = _merge(out, self.of(alts[self.pick % len(alts)], seen))
        kind = node.get("type")
        kind = next((k for k in kind if k != "null"), None) if isinstance(kind, list) else kind
        if kind == "object" or "properties" in node:
            obj = {k: self.of(s, seen) for k, s in node.get("properties", {}).items()}
            extra = node.get("additionalProperties")
            if extra is True or (isinstance(extra, dict) and extra):
                obj[MAP_KEY] = self.of(extra, seen) if isinstance(extra, dict) else Leaf()
            return _merge(out, obj)
        if kind == "array":
            return [self.of(node.get("items", {}), seen)]
        default = {"string": Leaf(), "integer": 1, "number": 1.5, "boolean": True}.get(str(kind))
        if out is None and kind is None and not any(k in node for k in ("allOf", "oneOf", "anyOf")):
            return Leaf()  # any JSON value
        return default if out is None else out


def _merge(a: Any, b: Any) -> Any:
    if isinstance(a, dict) and isinstance(b, dict):
        return {**a, **b}
    return a if b is None else b


def fill(t: Any, payload: str, key: str = "") -> Any:
    """The template with every string the payload (a session id the hostile SID, so one session holds all)."""
    if isinstance(t, Leaf):
        return SID if key == "sessionId" else payload
    if isinstance(t, dict):
        return {(payload if k == MAP_KEY else k): fill(v, payload, k) for k, v in t.items()}
    if isinstance(t, list):
        return [fill(v, payload, key) for v in t]
    return t


def instances(defs: dict[str, Any], node: Any) -> Iterator[Any]:
    """One template per alternative of the widest union below `node`."""
    first = Template(defs, 0)
    yield first.of(node)
    for pick in range(1, first.widest):
        yield Template(defs, pick).of(node)


# What no shipped schema defines: by hand, every field the renderers know of.
def _quota(p: str) -> dict[str, Any]:
    meter = {"id": p, "label": p, "usedPercent": 5, "status": p, "resetsAt": p}
    meter |= {"used": {"value": p, "unit": p}, "limit": {"value": p, "unit": p}}
    return {
        "sessionUpdate": vocab.QUOTA_UPDATE,
        "updatedAt": p,
        "pools": [{"id": p, "label": p, "state": p, "meters": [meter]}],
    }


def _sent(method: str, kinds: dict[str, str], defs: dict[str, Any], payload: str) -> Iterator[tuple[str, Any]]:
    """(kind, params) of each request and notification of `method`: from its schema definitions, or, for a
    method this version's schema does not define (a former or unstable one), every field a view might pick."""
    for kind in ("request", "notification"):
        if kind in kinds:
            yield from ((kind, fill(t, payload)) for t in instances(defs, defs[kinds[kind]]))
    if not kinds:
        keys = ("modelId", "uri", "path", "title", "text", "command", "cwd", "toolCallId", "terminalId", payload)
        params = {"sessionId": SID, **dict.fromkeys(keys, payload)}
        yield ("notification" if vocab.METHODS[method].notification else "request"), params


def _direction(method: str, kind: str) -> str:
    """Who sends it: requests and notifications to the side that handles them; responses back."""
    side = vocab.METHODS[method].side if method in vocab.METHODS else vocab.Side.AGENT
    to_agent = side is not vocab.Side.CLIENT
    return ("c2a" if to_agent else "a2c") if kind != "response" else ("a2c" if to_agent else "c2a")


def connection(version: int, payloads: list[str] = PAYLOADS) -> list[tuple[float, str, Any]]:
    """One connection of `version` holding every variant and every method with hostile fields."""
    doc = _load(version, "schema.unstable.json")
    defs = doc["$defs"]
    schemas = schema_set(version)
    out: list[tuple[float, str, Any]] = []

    def add(direction: str, msg: dict[str, Any] | bytes) -> None:
        out.append((len(out) * 0.001, direction, msg if isinstance(msg, bytes) else {"jsonrpc": "2.0", **msg}))

    info = {"name": PAYLOADS[0], "title": PAYLOADS[1], "version": PAYLOADS[2]}
    add("c2a", {"id": 0, "method": vocab.INITIALIZE, "params": {"protocolVersion": version, "clientInfo": info}})
    add("a2c", {"id": 0, "result": {"protocolVersion": version, "agentInfo": info, "info": info}})
    add("c2a", {"id": 1, "method": vocab.SESSION_NEW, "params": {"cwd": "/" + PAYLOADS[1], "mcpServers": []}})
    add("a2c", {"id": 1, "result": {"sessionId": SID}})
    union = defs["SessionUpdate"]
    branches = [b for b in union.get("oneOf", union.get("anyOf", [])) if isinstance(b, dict)]
    n = 2
    for payload in payloads:
        for branch in branches:
            for t in instances(defs, branch):
                update = fill(t, payload)
                if isinstance(update, dict) and "sessionUpdate" in update:
                    add("a2c", {"method": vocab.UPDATE, "params": {"sessionId": SID, "update": update}})
        add("a2c", {"method": vocab.UPDATE, "params": {"sessionId": SID, "update": _quota(payload)}})
        for method in sorted(vocab.METHODS):
            if method in (vocab.INITIALIZE, vocab.UPDATE):
                continue
            kinds = schemas.methods[method].defs if method in schemas.methods else {}
            for kind, params in _sent(method, kinds, defs, payload):
                if kind == "notification":
                    add(_direction(method, kind), {"method": method, "params": params})
                    continue
                n += 1
                rid: Any = n if n % 2 else f"{payload}{n}"
                add(_direction(method, kind), {"id": rid, "method": method, "params": params})
                answer = kinds.get("response")
                for r in [fill(t, payload) for t in instances(defs, defs[answer])][:1] if answer else []:
                    add(_direction(method, "response"), {"id": rid, "result": r})
                if not answer:
                    error = {"code": -32000, "message": payload, "data": {payload: payload}}
                    add(_direction(method, "response"), {"id": rid, "error": error})
        # A method nobody defines, an error answer, a prompt's stop reason, a frame that is not JSON.
        n += 1
        add("c2a", {"id": n, "method": payload, "params": {payload: payload}})
        add("a2c", {"id": n, "error": {"code": -32601, "message": payload, "data": payload}})
        n += 1
        add(
            "c2a",
            {
                "id": n,
                "method": vocab.PROMPT,
                "params": {"sessionId": SID, "prompt": [{"type": "text", "text": payload}]},
            },
        )
        add("a2c", {"id": n, "result": {"stopReason": payload}})
        add("a2c", ("not json " + payload).encode())
        for part in ("split", "word"):  # a word only the joined message holds (search's message hits)
            text = {"type": "text", "text": part}
            chunk = {"sessionUpdate": vocab.AGENT_MESSAGE_CHUNK, "messageId": payload, "content": text}
            add("a2c", {"method": vocab.UPDATE, "params": {"sessionId": SID, "update": chunk}})
    return out


def record(path: Path, *scripts: list[tuple[float, str, Any]]) -> Path:
    """scripted_db.build_db, with what the relay writes about a connection hostile too: the agent's argv,
    the working directory, the label, the agent's stderr, an error and who closed it."""
    from scripted_db import BASE, line

    from acp_relay.store import db as dbmod
    from acp_relay.store.scripted import ConnectionWriter

    conn = dbmod.connect(path)
    for n, script in enumerate(scripts):
        payload = PAYLOADS[n % len(PAYLOADS)]
        conn.execute("BEGIN")
        argv = ["agent" + payload, "--flag=" + PAYLOADS[-1]]
        w = ConnectionWriter(conn, started_at=BASE + 3600 * n, argv=argv, cwd="/w" + payload, label="l" + payload)
        for mono, direction, msg in script:
            w.feed(direction, line(msg) + b"\n", mono)
        w.stderr(("stderr " + payload).encode(), script[-1][0])
        w.close(ended_mono=script[-1][0] + 0.01, error="error " + payload, closed_by="by" + payload)
        conn.execute("COMMIT")
    conn.close()
    return path


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record(tmp_path_factory.mktemp("fields") / "fields.db", connection(1), connection(2))


def _frame_ids(db: Path) -> list[str]:
    """A frame of each kind and of each update variant: --frame shows one in full, with its partner."""
    query = "SELECT min(id) FROM frames GROUP BY kind, method IS NULL, update_kind ORDER BY 1"
    return [str(i) for (i,) in rows(db, query)]


def test_the_recording_holds_every_variant_and_method(hostile_db: Path) -> None:
    """The generator misses nothing the vocabulary names (else a field of it would go untested)."""
    variants = {v for (v,) in rows(hostile_db, "SELECT DISTINCT update_kind FROM frames")}
    methods = {m for (m,) in rows(hostile_db, "SELECT DISTINCT method FROM frames WHERE kind != 'response'")}
    assert set(vocab.VARIANTS) <= variants and set(vocab.METHODS) <= methods, (
        set(vocab.VARIANTS) - variants,
        set(vocab.METHODS) - methods,
    )


ARG = SID.replace("\x00", "") + "@1"  # the hostile session, as an argument
COMMANDS = [
    ["show"],
    ["show", "--all", "--wide"],
    ["show", ARG],
    ["show", SID + "@2", "--wide"],
    ["show", "-c", "1"],
    ["show", "-c", "2"],
    ["show", ARG, "-g", "cHduZWQ"],
    ["show", "-c", "2", "-g", "onerror"],
    ["show", ARG, "--transcript"],
    ["show", SID + "@2", "--transcript"],
    ["show", ARG, "--json"],
    ["show", "-c", "2", "--json"],
    ["show", "--json"],
    ["show", ARG, "--errors"],
    ["search", "cHduZWQ"],
    ["search", "onerror", "--json"],
    ["search", "e.example", "-c", "2"],
    ["search", "splitword"],
    ["search", "splitword", "--json"],
    ["stats"],
    ["stats", ARG],
    ["stats", "-c", "2"],
    ["stats", ARG, "--json"],
    ["info", ARG],
    ["info", SID + "@2"],
    ["info", ARG, "--json"],
    ["check", ARG],
    ["check", "-c", "2"],
    ["check", "--all"],
    ["check", "-c", "1", "--json"],
    ["diff", ARG, SID + "@2"],
    ["diff", ARG, SID + "@2", "--json"],
    ["export", ARG, "--format", "ndjson"],
    ["export", "-c", "2", "--format", "acp-devtools"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(x.encode("unicode_escape").decode() for x in a))
def test_every_field_is_escaped_by_every_command(hostile_db: Path, args: list[str]) -> None:
    out = run(*args, "--db", str(hostile_db))
    assert out.exit_code in (0, 1, 3), out.stderr
    assert out.stdout_bytes, out.stderr
    assert _bad(out.stdout_bytes) == [], "stdout"
    assert _bad(out.stderr_bytes) == [], "stderr"
    if "--json" in args or "ndjson" in args:
        assert all(orjson.loads(line) is not None for line in out.stdout_bytes.splitlines())


def test_every_frame_in_full_is_escaped(hostile_db: Path) -> None:
    """show --frame N for a frame of each kind and variant (its request or response beside it); then
    every frame of the recording through the same renderers in-process: its line, its detail, its record."""
    for frame in _frame_ids(hostile_db):
        for mode in ([], ["--json"]):
            out = run("show", "--frame", frame, *mode, "--db", str(hostile_db))
            assert out.exit_code == 0, out.stderr
            assert _bad(out.stdout_bytes) == [] and _bad(out.stderr_bytes) == [], frame
    from acp_relay.render import frames as fmt
    from acp_relay.store.queries import iter_messages, open_db, resolve_view

    conn = open_db(str(hostile_db))
    seen = 0
    for cid in (1, 2):
        for f, _msg, _request in iter_messages(conn, resolve_view(conn, None, cid)):
            seen += 1
            text = "\n".join([fmt.frame_line(f, 0.0), *fmt.frame_detail(f, [])]).encode()
            assert _bad(text) == [] and _bad(fmt.dumps_line(fmt.frame_record(f, 0.0))) == [], f.id
    assert seen >= rows(hostile_db, "SELECT count(*) FROM frames")[0][0]


def test_the_page_holds_no_tag_of_the_recording(hostile_db: Path, tmp_path: Path) -> None:
    for n, session in enumerate((ARG, SID + "@2")):
        page = tmp_path / f"page-{n}.html"  # a page of its own: view -o replaces nothing without --force
        out = run("view", session, "-o", str(page), "--db", str(hostile_db))
        assert out.exit_code == 0 and _bad(out.stdout_bytes + out.stderr_bytes) == [], out.stderr
        body = page.read_bytes()
        assert TAG.encode() not in body
        title = body.split(b"<title>", 1)[1].split(b"</title>", 1)[0]  # what the browser's tab shows
        assert title.startswith(b"acp-relay view: session s") and _bad(title) == []


def test_a_tool_calls_status_reaches_no_terminal(tmp_path: Path) -> None:
    """The issue's repro: a tool_call whose status is an OSC 52 clipboard write, through `run -- cat`."""
    db = tmp_path / "r.db"
    update = {"sessionUpdate": vocab.TOOL_CALL, "toolCallId": "t1", "title": "findme", "status": PAYLOADS[0]}
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": vocab.SESSION_NEW, "params": {"cwd": "/x", "mcpServers": []}},
        {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s1"}},
        {"jsonrpc": "2.0", "method": vocab.UPDATE, "params": {"sessionId": "s1", "update": update}},
    ]
    data = b"".join(orjson.dumps(m) + b"\n" for m in msgs)
    assert subprocess.run(relay_cmd(db, "cat"), input=data, capture_output=True, timeout=60).stdout == data
    for args in (["show", "s1"], ["show", "-c", "1"], ["show", "s1", "-g", "t1"], ["search", "findme"]):
        out = run(*args, "--db", str(db))
        assert out.exit_code == 0 and b"tool_call t1" in out.stdout_bytes, (args, out.stderr)
        assert _bad(out.stdout_bytes) == [] and _bad(out.stderr_bytes) == [], args


AGENT = r"""
import sys
sys.stdout.buffer.write(open(sys.argv[1], "rb").read())
sys.stdout.buffer.flush()
for line in sys.stdin.buffer:
    pass
"""


def test_show_follow_escapes_every_field(tmp_path: Path) -> None:
    """`show -f` prints the frames of the next connection as a relay records them: a v2 connection's."""
    from scripted_db import line

    db = tmp_path / "follow.db"
    script = connection(2)
    c2a = b"".join(line(m) + b"\n" for _, d, m in script if d == "c2a")
    (tmp_path / "a2c").write_bytes(b"".join(line(m) + b"\n" for _, d, m in script if d == "a2c"))
    assert subprocess.run(relay_cmd(db, "true"), capture_output=True, timeout=60).returncode == 0  # the schema
    follow = subprocess.Popen(
        [sys.executable, "-m", "acp_relay", "show", "-f", "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert follow.stderr is not None
        assert b"waiting for the next connection" in follow.stderr.readline()
        cmd = relay_cmd(db, sys.executable, "-c", AGENT, str(tmp_path / "a2c"))
        assert subprocess.run(cmd, input=c2a, capture_output=True, timeout=120).returncode == 0
        out, err = follow.communicate(timeout=120)  # it ends with the connection
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait()
    assert follow.returncode == 0 and out.count(b"\n") >= len(script), err
    assert b"tool_call" in out and _bad(out) == [] and _bad(err) == []


OUR_COLORS = re.compile(rb"\x1b\[[0-9;]*m")  # what the views paint themselves (SGR only)


@pytest.mark.parametrize(
    "args",
    [
        ["show", ARG],
        ["show", "-c", "2"],
        ["show", "--all"],
        ["show", SID + "@2", "--transcript"],
        ["search", "cHduZWQ"],
        ["check", "-c", "2"],
        ["stats", ARG],
        ["info", ARG],
        ["diff", ARG, SID + "@2"],
        ["diff", ARG, SID + "@2", "--color", "always"],
    ],
    ids=lambda a: " ".join(x.encode("unicode_escape").decode() for x in a),
)
def test_a_terminal_gets_only_our_colors(hostile_db: Path, args: list[str]) -> None:
    """On a terminal (color and width): the only escape sequences are the views' own colors (the pager is
    `cat`: less writes its own)."""
    from support.cli import run_on_terminal

    status, text = run_on_terminal(*args, "--db", str(hostile_db), columns=160, env={"PAGER": "cat"})
    assert status in (0, 1), text
    assert _bad(OUR_COLORS.sub(b"", text.encode())) == []


def test_the_page_shows_every_field_escaped(tmp_path: Path) -> None:
    """In the browser: every frame of a v1 and a v2 connection opened in turn (C1, bidi and NUL in every
    field), the panel, the rows, the transcript and the heading show no control or bidi character."""
    from browser import Page, chromium

    db = record(tmp_path / "page.db", connection(1, PAYLOADS[1:2]), connection(2, PAYLOADS[1:2]))
    with chromium() as browser:
        for conn in ("1", "2"):
            html = tmp_path / f"c{conn}.html"
            assert run("view", "--connection", conn, "-o", str(html), "--db", str(db)).exit_code == 0
            p = Page(browser, html)
            try:
                n = rows(db, "SELECT count(*) FROM frames WHERE connection_id = ?", int(conn))[0][0]
                p.click("#rows .row >> nth=0")
                shown = [p.text_content("#head"), p.text_content("#main")]
                for i in range(n):
                    shown.append(p.text_content("#panel") + (p.text_content("#main") if i % 10 == 0 else ""))
                    p.keyboard.press("j")  # the rows scroll with it: only those on screen exist
                assert p.errors == []
                bad = [b for text in shown for b in _bad(text.encode())]
                assert bad == [], bad
            finally:
                p.close()


def test_replay_logs_every_field_escaped(hostile_db: Path) -> None:
    """replay's stdout is the recorded frames (protocol, on purpose); what it logs on stderr is for people."""
    from scripted_db import line

    editor = b"".join(line(m) + b"\n" for _, d, m in connection(2, PAYLOADS[1:2]) if d == "c2a")
    out = subprocess.run(
        [sys.executable, "-m", "acp_relay", "replay", SID + "@2", "--speed", "fast", "--db", str(hostile_db)],
        input=editor,
        capture_output=True,
        timeout=120,
    )
    assert b"Traceback" not in out.stderr and out.stdout, out.stderr
    assert _bad(out.stderr) == []


@pytest.mark.parametrize("mode", [[], ["--json"]])
def test_rerun_reports_every_field_escaped(hostile_db: Path, tmp_path: Path, mode: list[str]) -> None:
    """rerun plays the generated session's prompts to an agent that answers with hostile bytes: its report
    (stdout) and its log (stderr)."""
    import shutil

    from test_hostile_output import ARG_EVIL, RERUN_AGENT

    db = tmp_path / "rerun.db"
    shutil.copy(hostile_db, db)
    argv = ["rerun", SID + "@2", "--timeout", "20", *mode, "--db", str(db), "--", sys.executable, "-c", RERUN_AGENT]
    out = subprocess.run([sys.executable, "-m", "acp_relay", *argv, ARG_EVIL], capture_output=True, timeout=120)
    assert out.returncode in (0, 3, 4) and out.stdout and b"Traceback" not in out.stderr, out.stderr
    assert _bad(out.stdout) == [] and _bad(out.stderr) == []


@pytest.mark.parametrize(
    "args",
    [["delete", ARG], ["delete", SID + "@2", "--json"], ["prune", "--max-size", "1KB", "--dry-run"], ["recover"]],
    ids=lambda a: " ".join(x.encode("unicode_escape").decode() for x in a),
)
def test_the_commands_that_change_a_database_say_it_escaped(hostile_db: Path, tmp_path: Path, args: list[str]) -> None:
    import shutil

    db = tmp_path / "copy.db"
    shutil.copy(hostile_db, db)
    out = run(*args, "--db", str(db))
    assert out.exit_code in (0, 1), out.stderr
    assert _bad(out.stdout_bytes) == [] and _bad(out.stderr_bytes) == []
