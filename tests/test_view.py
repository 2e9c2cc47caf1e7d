"""`acp-relay view`: the page file (safe embedding, private file, CSP) and, in headless Chromium, the page itself."""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from browser import Page, chromium, screenshot_dir
from fixtures.recordings import BASE, S1, S2, j, text, upd
from helpers import ROOT
from support.cli import run as cli_run

from acp_relay.render.transcript import transcript_lines, transcript_parts
from acp_relay.store import db as dbmod
from acp_relay.store.queries import open_db, resolve_view
from acp_relay.store.scripted import ConnectionWriter
from acp_relay.view.command import embed_json

XSS = ("<script>window.__pwned=1</script>", '<img src=x onerror="window.__pwned=1">')


@pytest.fixture(scope="module")
def xss_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session whose recorded bytes try to inject markup everywhere the page shows recorded text."""
    path = tmp_path_factory.mktemp("xss") / "xss.db"
    conn = dbmod.connect(path)
    conn.execute("BEGIN")
    w = ConnectionWriter(conn, started_at=BASE, argv=[XSS[1]], label=XSS[0])
    sid = "s-" + XSS[0]
    steps: list[tuple[float, str, bytes]] = [
        (0.0, "c2a", j(id=0, method="initialize", params={"protocolVersion": 1, "clientInfo": {"name": XSS[0]}})),
        (0.1, "a2c", j(id=0, result={"protocolVersion": 1, "agentInfo": {"name": XSS[1], "version": XSS[0]}})),
        (0.2, "c2a", j(id=1, method="session/new", params={"cwd": XSS[1], "mcpServers": []})),
        (0.3, "a2c", j(id=1, result={"sessionId": sid})),
        (0.4, "c2a", j(id=2, method="session/prompt", params={"sessionId": sid, "prompt": [text(XSS[0])]})),
        (0.5, "a2c", upd(sid, sessionUpdate="agent_message_chunk", content=text(XSS[0]))),
        (0.6, "a2c", upd(sid, sessionUpdate="agent_message_chunk", content=text(XSS[1]))),
        (0.7, "a2c", upd(sid, sessionUpdate="tool_call", toolCallId=XSS[1], title=XSS[0], status="pending")),
        (0.8, "a2c", j(id=XSS[0], method=XSS[1], params={"sessionId": sid, XSS[0]: XSS[1]})),
        (0.9, "a2c", b"</script><script>window.__pwned=1</script><!-- " + XSS[1].encode() + b"\n"),
        (0.95, "a2c", upd(sid, sessionUpdate="agent_thought_chunk", content=text("evil\u202etxt.exe \x1b[31mred"))),
        (1.0, "a2c", j(id=2, result={"stopReason": XSS[0]})),
    ]
    for t, s, data in steps:
        w.feed(s, data, t)
    w.close(ended_mono=1.1, exit_code=0, closed_by="editor_eof")
    conn.execute("COMMIT")
    conn.close()
    return path


def view(db: Path, *args: str, out: Path | None = None) -> Path:
    argv = ["view", "--db", str(db), *args] + (["-o", str(out)] if out else ["--no-open"])
    r = cli_run(*argv)
    assert r.exit_code == 0, r.output
    return Path(r.stdout.strip())


def embedded(html: Path) -> dict[str, Any]:
    body = html.read_text(encoding="utf-8")
    m = re.search(r'<script type="application/json" id="data">(.*?)</script>', body, re.S)
    assert m, "no data block"
    return json.loads(m.group(1))


# -- the file ---------------------------------------------------------------------------------------------
def test_default_file_is_private_and_printed(fixture_db: Path) -> None:
    path = view(fixture_db, S1)
    try:
        assert path.name.startswith("acp-relay-view-") and path.suffix == ".html"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        page = path.read_text(encoding="utf-8")
        assert '<meta http-equiv="Content-Security-Policy"' in page
        m = re.search(r'Content-Security-Policy" content="([^"]*)"', page)
        assert m is not None
        csp = m.group(1)
        assert "default-src &#x27;none&#x27;" in csp and "unsafe-inline" not in csp and "connect-src" in csp
    finally:
        path.unlink()


def test_output_option_and_errors(fixture_db: Path, tmp_path: Path) -> None:
    out = view(fixture_db, "--connection", "2", out=tmp_path / "c2.html")
    assert out == tmp_path / "c2.html"
    assert embedded(out)["header"]["connection"] == 2
    r = cli_run("view", "--db", str(fixture_db), "nope", "--no-open")
    assert r.exit_code == 2 and "acp-relay: view: no session matches 'nope'" in r.stderr
    r = cli_run("view", "--db", str(tmp_path / "none.db"), "--no-open")
    assert r.exit_code == 2 and "no database at" in r.stderr
    r = cli_run("view", "--db", str(fixture_db), "-o", str(tmp_path / "no" / "such" / "dir.html"))
    assert r.exit_code == 2 and "acp-relay: view: cannot write the page" in r.stderr


def test_default_session_is_last(fixture_db: Path, tmp_path: Path) -> None:
    data = embedded(view(fixture_db, out=tmp_path / "last.html"))
    assert data["header"]["session"] == S2


def test_raw_bytes_are_embedded_once_and_exactly(xss_db: Path, tmp_path: Path) -> None:
    html = view(xss_db, "--connection", "1", out=tmp_path / "x.html")
    page = html.read_bytes()
    start = page.index(b'id="data">') + len(b'id="data">')
    block = page[start : page.index(b"</script>", start)]
    assert b"<" not in block  # nothing recorded can end the block or open a comment
    data = embedded(html)
    conn = open_db(xss_db)
    raw = [r[0] for r in conn.execute("SELECT raw FROM frames ORDER BY id")]
    assert data["frames"]["raw"] == [r.decode() for r in raw]
    assert len(page) <= 1.5 * sum(len(r) + 1 for r in raw) + 300_000
    assert embed_json({"a": "</script>"}) == b'{"a":"\\u003c/script>"}'


def test_invalid_utf8_keeps_its_exact_bytes(tmp_path: Path) -> None:
    path = tmp_path / "bytes.db"
    conn = dbmod.connect(path)
    conn.execute("BEGIN")
    w = ConnectionWriter(conn, started_at=BASE, argv=["agent"])
    w.feed("c2a", j(id=0, method="initialize", params={"protocolVersion": 1}), 0.0)
    w.feed("a2c", b'{"jsonrpc":"2.0","id":0,"result":{"x":"\xff\xfe"}}\n', 0.1)
    w.close(ended_mono=0.2, exit_code=0, closed_by="editor_eof")
    conn.execute("COMMIT")
    conn.close()
    data = embedded(view(path, "--connection", "1", out=tmp_path / "b.html"))
    import base64

    raw64 = data["frames"]["raw64"]
    assert base64.b64decode(raw64["1"]) == b'{"jsonrpc":"2.0","id":0,"result":{"x":"\xff\xfe"}}'


def test_transcript_sections_are_show_transcript(fixture_db: Path) -> None:
    conn = open_db(fixture_db)
    for sid in (S1, S2):
        v = resolve_view(conn, sid)
        flat = [line for _, lines in transcript_parts(conn, v) for line in lines]
        assert flat == transcript_lines(conn, v)


# -- in the browser ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser() -> Any:
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def shots() -> Path:
    path = screenshot_dir()
    print(f"\nview screenshots: {path}", file=sys.stderr)
    return path


@pytest.fixture(scope="module")
def v1_html(fixture_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return view(fixture_db, S1, out=tmp_path_factory.mktemp("v1") / "v1.html")


@pytest.fixture
def v1_page(v1_html: Path, browser: Any) -> Any:
    page = Page(browser, v1_html)  # a fresh page per test: no state carried from one to the next
    yield page
    page.close()


def test_page_shows_the_session(v1_page: Any, fixture_db: Path) -> None:
    p = v1_page
    assert p.text_content("#count") == "30 frames"
    assert "Zed 0.200.0" in p.text_content("#who") and "fixture-agent 1.2.3" in p.text_content("#who")
    facts = p.text_content("#facts")
    assert "protocol v1" in facts and "frames 30" in facts and "turns 2" in facts and "exit 0" in facts
    assert p.texts("#caps .chip.ag") == ["loadSession"]
    assert p.errors == []


def test_transcript_pane_is_the_transcript(v1_page: Any, fixture_db: Path) -> None:
    conn = open_db(fixture_db)
    expected = [line for line in transcript_lines(conn, resolve_view(conn, S1)) if line]
    shown = [line for text in v1_page.texts("#tlines .tsec") for line in text.split("\n") if line]
    assert shown == expected  # the page sets turns apart with a margin instead of a blank line
    v1_page.click("#tlines .tsec.link >> text=Tool call call_1")
    assert "tool_call call_1" in v1_page.text_content("#pbody h3")


def test_chunk_run_expands_on_click(v1_page: Any) -> None:
    p = v1_page
    head = p.locator(".row.run").first
    assert "agent_message_chunk ×2" in head.text_content()
    assert "I'll read the file first." in head.text_content()
    assert p.locator(".row.member").count() == 0
    head.click()
    assert p.locator(".row.member").count() == 2
    assert "I'll read the file first." in p.text_content("#pbody pre.joined")
    p.locator(".row.run").first.click()  # selected and open: a second click closes it
    assert p.locator(".row.member").count() == 0


def test_request_and_response_highlight_each_other(v1_page: Any) -> None:
    p = v1_page
    request = p.locator(".row:has(.what:text-is('session/prompt #2'))")
    response = p.locator(".row:has(.what:text-is('result of session/prompt #2'))")
    request.click()
    assert "sel" in request.get_attribute("class") and "partner" in response.get_attribute("class")
    assert "2.00 s" in response.text_content()  # latency on the response
    response.click()
    assert "sel" in response.get_attribute("class") and "partner" in request.get_attribute("class")
    p.click("#pbody .partnerlink")
    assert "sel" in request.get_attribute("class")


def test_filter_narrows_the_rows(v1_page: Any) -> None:
    p = v1_page
    p.fill("#filter", "method:session/prompt")
    p.wait_text("#count", "4 of 30 frames")
    whats = p.texts("#rows .row .what")
    assert len(whats) == 4 and all("session/prompt" in w for w in whats)
    p.fill("#filter", "")
    p.select_option("#kind", "e")
    p.wait_text("#count", "1 of 30 frames")
    p.select_option("#kind", "")
    p.fill("#filter", "parser.py dir:a2c")
    p.wait_text("#count", "4 of 30 frames")
    assert all(" a " in c for c in p.eval_on_selector_all("#rows .row", "e => e.map(x => x.className)"))
    p.fill("#filter", "")
    p.wait_text("#count", "30 frames")


def test_keyboard_moves_and_opens(v1_page: Any) -> None:
    p = v1_page
    p.click("#rows .row >> nth=0")
    p.keyboard.press("j")
    p.keyboard.press("j")
    assert p.text_content("#rows .row.sel .what") == "session/new #1"
    p.keyboard.press("k")
    assert p.text_content("#rows .row.sel .what") == "result of initialize #0"
    assert p.text_content("#pbody h3").startswith("result of initialize #0")
    p.keyboard.press("]")
    assert p.text_content("#turnpos") == "turn 1 of 2"
    for _ in range(8):
        p.keyboard.press("j")
        if p.locator(".row.run.sel").count():
            break
    p.keyboard.press("Enter")
    assert p.locator(".row.member").count() == 2
    p.keyboard.press("Enter")
    assert p.locator(".row.member").count() == 0


def test_recorded_markup_stays_inert(xss_db: Path, tmp_path: Path, browser: Any) -> None:
    html = view(xss_db, "--connection", "1", out=tmp_path / "xss.html")
    p = Page(browser, html)
    try:
        for i in range(p.locator("#rows .row").count()):
            p.locator("#rows .row").nth(i).click()
        p.locator(".row.run").first.click()
        assert p.evaluate("typeof window.__pwned") == "undefined"
        assert p.locator("img").count() == 0 and p.locator("script").count() == 2
        assert XSS[0] in p.text_content("#who") and XSS[1] in p.text_content("#who")
        assert XSS[1] in p.text_content("#tlines")
        assert "evil\\u202etxt.exe" in p.text_content("#tlines")  # a bidi override is shown, not obeyed
        shown = p.text_content("#head") + p.text_content("#main")  # what the page displays (not its data block)
        assert "\u202e" not in shown and "\x1b" not in shown
        assert p.errors == []
        assert all(url.startswith("file://") for url in p.requests), p.requests
    finally:
        p.close()


def test_no_network_and_screenshots(fixture_db: Path, tmp_path: Path, browser: Any, shots: Path) -> None:
    from acp_relay.demo.command import run_demo

    demo = tmp_path / "demo.db"
    assert run_demo(demo) == 0
    pages = {
        "v1-demo": view(demo, out=tmp_path / "demo.html"),
        "v2-fixture": view(fixture_db, S2, out=tmp_path / "v2.html"),
    }
    for name, html in pages.items():
        for scheme in ("light", "dark"):
            p = Page(browser, html, scheme)
            try:
                p.locator(".row.run").first.click() if p.locator(".row.run").count() else None
                p.locator("#rows .row:not(.run):not(.gap)").nth(4).click()
                p.screenshot(path=str(shots / f"{name}-{scheme}.png"))
                assert p.requests == [html.resolve().as_uri()]
                assert p.errors == []
            finally:
                p.close()
    assert len(list(shots.glob("*.png"))) >= 4
    if not os.environ.get("ACP_RELAY_SCREENSHOTS"):
        print(f"screenshots in {shots}", file=sys.stderr)


def test_check_hook_joins_its_findings(fixture_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With `check` installed, its summary joins the header and its findings the frames (a stand-in here)."""
    import importlib.machinery
    import types
    from dataclasses import dataclass

    @dataclass
    class Found:
        frame: int | None
        severity: str
        rule: str
        message: str

    import acp_relay.store.transport  # noqa: F401  (real and loaded before the stand-in package goes in)

    seen: list[tuple[int, Any, bool]] = []

    def verdict(frames: Any, *, version: Any, ended: bool, **transport: Any) -> tuple[list[Found], int]:
        frames = list(frames)
        seen.append((len(frames), version, ended))
        assert set(transport) == {"known", "events", "answers"}  # what `check` reads besides the frames
        assert all(isinstance(f[2], bytes) for f in frames)
        return [Found(frames[0][0], "error", "x.rule", "bad <b>"), Found(None, "warning", "y.rule", "all")], len(frames)

    engine = types.ModuleType("acp_relay.protocol.check.verdict")
    engine.verdict = verdict  # type: ignore[attr-defined]
    render = types.ModuleType("acp_relay.render.findings")
    render.summary_line = lambda found, n: f"{len(found)} findings in {n} frames"  # type: ignore[attr-defined]
    package = types.ModuleType("acp_relay.protocol.check")
    package.__spec__ = importlib.machinery.ModuleSpec("acp_relay.protocol.check", None, is_package=True)
    monkeypatch.setitem(sys.modules, "acp_relay.protocol.check", package)
    monkeypatch.setitem(sys.modules, "acp_relay.protocol.check.verdict", engine)
    monkeypatch.setitem(sys.modules, "acp_relay.render.findings", render)
    data = embedded(view(fixture_db, S1, out=tmp_path / "checked.html"))
    assert seen == [(30, 1, True)]
    assert "check" not in embedded(view(fixture_db, S1, "--no-check", out=tmp_path / "unchecked.html"))["header"]
    monkeypatch.setattr("acp_relay.view.data.CHECK_AUTO_FRAMES", 10)
    skipped = embedded(view(fixture_db, S1, out=tmp_path / "big.html"))["header"]["check"]["summary"]
    assert skipped == "not run on 30 frames (view --check runs it)"
    view(fixture_db, S1, "--check", out=tmp_path / "forced.html")
    assert len(seen) == 2
    assert data["header"]["check"] == {
        "summary": "2 findings in 30 frames",
        "errors": 1,
        "connection": ["warning y.rule: all"],
    }
    assert data["frames"]["flags"]["0"] == ["error x.rule: bad <b>"]


def test_real_check_when_installed(fixture_db: Path, tmp_path: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("acp_relay.protocol.check") is None:
        pytest.skip("`acp-relay check` is not in this tree")
    data = embedded(view(fixture_db, S1, out=tmp_path / "real.html"))
    assert "frames checked" in data["header"]["check"]["summary"]


def test_every_frame_of_a_connection_opens(fixture_db: Path, tmp_path: Path, browser: Any) -> None:
    """Batches, invalid lines, a child session, v2 updates: j through all of them, each shown in the panel."""
    html = view(fixture_db, "--connection", "2", out=tmp_path / "c2.html")
    n = embedded(html)["frames"]["n"]
    p = Page(browser, html)
    try:
        p.click("#rows .row >> nth=0")
        headings = {p.text_content("#pbody h3")}
        for _ in range(n + 2):
            p.keyboard.press("j")
            headings.add(p.text_content("#pbody h3"))
        assert any(h.startswith("batch of 2") for h in headings), headings
        assert {"(invalid_utf8)", "(blank)"} <= headings, headings
        assert any(h.startswith("agent_message_chunk") for h in headings), headings
        p.click("#rows .row:has(.what:text-is('(invalid_utf8)'))")
        assert "\\x" in p.text_content("#pbody pre.raw")  # bytes that are not UTF-8 shown as \xNN
        p.keyboard.press("Escape")
        assert p.is_visible("#pempty")
        assert p.errors == []
    finally:
        p.close()


def test_opens_the_browser_only_by_default(fixture_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import webbrowser

    opened: list[str] = []

    def fake_open(url: str) -> bool:
        opened.append(url)
        return True

    monkeypatch.setattr(webbrowser, "open", fake_open)
    r = cli_run("view", "--db", str(fixture_db), S1)
    assert r.exit_code == 0, r.output
    path = Path(r.stdout.strip())
    try:
        assert opened == [path.resolve().as_uri()]
    finally:
        path.unlink()
    view(fixture_db, S1, out=tmp_path / "quiet.html")
    view(fixture_db, S1).unlink()  # --no-open
    assert len(opened) == 1


def test_only_the_rows_on_screen_exist(tmp_path: Path, browser: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 3,000-frame chunk stream: one row until opened, then 3,000 rows of which only a screenful is drawn."""
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    import gen_db

    gen_db.generate_sessions(tmp_path / "big.db", 3000)
    html = view(tmp_path / "big.db", "flood", out=tmp_path / "flood.html")
    p = Page(browser, html)
    try:
        assert p.text_content("#count") == "3,000 frames"
        assert p.locator("#rows .row").count() < 20
        p.locator(".row.run").click()
        assert p.locator(".row.member").count() < 80
        p.evaluate("() => { const s = document.getElementById('scroller'); s.scrollTop = s.scrollHeight; }")
        p.wait_for_selector("#rows .row:has(.what:text-is('result of session/prompt #2'))")
        assert p.locator("#rows .row").count() < 80
        assert p.errors == []
    finally:
        p.close()


def test_latency_badges_survive_uuid_ids_and_the_version_is_said_once(tmp_path: Path, browser: Any) -> None:
    """UUID request ids pushed the latency badge out of its row; a clientInfo title that carries the version
    printed it twice ("WebStorm 2026.1.2 2026.1.2")."""
    path = tmp_path / "uuid.db"
    conn = dbmod.connect(path)
    conn.execute("BEGIN")
    w = ConnectionWriter(conn, started_at=BASE, argv=["agent"])
    sid = "9c1d6a8e-52f4-4b0e-8a77-3f2e1d0c9b8a"
    client = {"name": "webstorm", "title": "WebStorm 2026.1.2", "version": "2026.1.2"}
    rid = "5e0c1f4a-7b2d-4c8e-9f1a-2b3c4d5e6f70"
    steps: list[tuple[float, str, bytes]] = [
        (0.0, "c2a", j(id=0, method="initialize", params={"protocolVersion": 1, "clientInfo": client})),
        (0.1, "a2c", j(id=0, result={"protocolVersion": 1, "agentInfo": {"name": "ag", "version": "1"}})),
        (0.2, "c2a", j(id=1, method="session/new", params={"cwd": "/w", "mcpServers": []})),
        (0.3, "a2c", j(id=1, result={"sessionId": sid})),
        (0.4, "c2a", j(id=rid, method="session/prompt", params={"sessionId": sid, "prompt": [text("hi " * 80)]})),
        (1.4, "a2c", j(id=rid, result={"stopReason": "end_turn"})),
    ]
    for t, s, data in steps:
        w.feed(s, data, t)
    w.close(ended_mono=1.5, exit_code=0, closed_by="editor_eof")
    conn.execute("COMMIT")
    conn.close()
    page = Page(browser, view(path, out=tmp_path / "uuid.html"))
    try:
        who = page.text_content("#who")
        assert "WebStorm 2026.1.2" in who and "2026.1.2 2026.1.2" not in who
        for narrow in (1440, 900):
            page.page.set_viewport_size({"width": narrow, "height": 860})
            badges = page.page.eval_on_selector_all(
                ".row .lat",
                "els => els.map(b => { const l = b.parentElement.getBoundingClientRect(),"
                " r = b.getBoundingClientRect(); return [b.textContent, r.left >= l.left - 1 && r.right <= l.right + 1, l.left, l.right, r.left, r.right, b.parentElement.parentElement.className]; })",
            )
            assert badges and all(b[1] for b in badges), (narrow, badges)
            assert "1.00 s" in [b[0] for b in badges]
        assert page.errors == []
    finally:
        page.close()


def _remote_recording(path: Path, events: list[dict[str, Any]]) -> Path:
    """A recorded Streamable-HTTP connection (a session with a turn) and its transport events as given."""
    from check_helpers import Script, record

    s = Script(1)
    s.prompt(s.new_session())
    record(s, path)
    conn = dbmod.connect(path)
    for n, e in enumerate(events):
        conn.execute(
            "INSERT INTO transport_events (connection_id, ts, mono, event, side, method, status, acp_connection_id, "
            "acp_session_id, details) VALUES (1, 0, ?, ?, ?, ?, ?, 'c1', ?, ?)",
            (n * 0.001, e["event"], e.get("side", "agent"), e.get("method"), e.get("status"), e.get("session"),
             json.dumps(e.get("details", {}))),
        )  # fmt: skip
    conn.commit()
    conn.close()
    return path


_JSON = [["Content-Type", "application/json"]]
_TRANSPORT_CASES = {
    "http1-and-ws-close": [  # the issue's: 0 warnings in view where check said 2
        {"event": "http", "method": "POST", "status": 200, "details": {"rpc": "initialize", "sent": _JSON,
         "headers": [["acp-connection-id", "c1"]], "http": "HTTP/1.1"}},
        {"event": "ws_close", "status": 1006},
    ],
    "errors-and-a-session-stream": [
        {"event": "http", "method": "POST", "status": 202, "details": {"rpc": "initialize", "sent": _JSON}},
        {"event": "http", "method": "POST", "status": 202, "details": {"rpc": "session/prompt", "sent": _JSON}},
        {"event": "sse_open", "method": "GET", "status": 200, "session": "sess-1",
         "details": {"sent": [["Accept", "application/json"]]}},
    ],
}  # fmt: skip


@pytest.mark.parametrize("case", _TRANSPORT_CASES)
def test_views_check_says_what_check_says(tmp_path: Path, case: str) -> None:
    """view's check summary, error count and findings come from the same verdict as `check`: the transport
    rules (and what they soften or attribute to the relay) included (issue 30 item 18)."""
    from acp_relay.check.command import compute as check_compute
    from acp_relay.check.command import summary
    from acp_relay.view.command import compute as view_compute

    db = _remote_recording(tmp_path / "remote.db", _TRANSPORT_CASES[case])
    conn = open_db(db)
    try:
        for session, connection in ((None, "1"), ("last", None)):
            checked = check_compute(conn, session, connection)
            assert any(f.rule.startswith("transport.") for f in checked.findings)
            page = view_compute(conn, session, connection, check=True).data
            said = page["header"]["check"]
            assert said["summary"] == summary(checked)
            assert said["errors"] == sum(f.severity == "error" for f in checked.findings)
            wide = sorted(f"{f.severity} {f.rule}: {f.message}" for f in checked.findings if f.frame is None)
            assert sorted(said["connection"]) == wide
    finally:
        conn.close()


# -- narrow windows (issue 31 item 7) ---------------------------------------------------------------------
_UUID = "0193a5b2-7c4d-7e8f-9a0b-1c2d3e4f5a6b"
_AGENT = {"name": "claude-code-acp-adapter-for-the-editor", "version": "0.12.3-beta.4+build.20261203"}


@pytest.fixture(scope="module")
def one_turn_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One turn: a single chunk under a UUID message id, a v1 plan, a v2 plan_update, a long agent name."""
    path = tmp_path_factory.mktemp("narrow") / "one.db"
    conn = dbmod.connect(path)
    conn.execute("BEGIN")
    w = ConnectionWriter(conn, started_at=BASE, argv=["agent"])
    sid = "4b7e2c1a-9d3f-4e5a-8b6c-7d8e9f0a1b2c"
    entries = [{"content": "Read parser.py", "priority": "high", "status": "in_progress"}]
    steps: list[tuple[float, str, bytes]] = [
        (0.0, "c2a", j(id=0, method="initialize", params={"protocolVersion": 1, "clientInfo": {"name": "Zed"}})),
        (0.1, "a2c", j(id=0, result={"protocolVersion": 1, "agentInfo": _AGENT})),
        (0.2, "c2a", j(id=1, method="session/new", params={"cwd": "/w", "mcpServers": []})),
        (0.3, "a2c", j(id=1, result={"sessionId": sid})),
        (0.4, "c2a", j(id=2, method="session/prompt", params={"sessionId": sid, "prompt": [text("go")]})),
        (0.5, "a2c", upd(sid, sessionUpdate="plan", entries=entries)),
        (0.6, "a2c", upd(sid, sessionUpdate="agent_message_chunk", messageId=_UUID, content=text("Only chunk here"))),
        (0.7, "a2c", upd(sid, sessionUpdate="plan_update", plan={"type": "items", "planId": "p-1", "entries": [
            {"content": "Fix the split", "priority": "medium", "status": "pending"}]})),
        (0.8, "a2c", j(id=2, result={"stopReason": "end_turn"})),
    ]  # fmt: skip
    for t, s, data in steps:
        w.feed(s, data, t)
    w.close(ended_mono=0.9, exit_code=0, closed_by="editor_eof")
    conn.execute("COMMIT")
    conn.close()
    return view(path, out=path.with_suffix(".html"))


# A text shown in full: its own box not scrolled, inside its row's label and the viewport, at least 3em wide.
_SHOWN = """els => els.map(e => { const r = e.getBoundingClientRect(), l = e.parentElement.getBoundingClientRect();
  return [e.textContent, e.scrollWidth <= e.clientWidth + 1 || r.width >= 40, r.width > 0 && r.left >= l.left - 1
          && r.right <= l.right + 1 && r.right <= innerWidth]; })"""


@pytest.mark.parametrize("width", [800, 1280, 1920])
def test_narrow_windows_show_everything(one_turn_html: Path, browser: Any, shots: Path, width: int) -> None:
    """At 800 px the frame panel was cut off, a lone chunk showed only its UUID, plans showed nothing, the lane
    title was cut and the bar said "(1 turns)". Every defect is collected, so a failure names them all."""
    p = Page(browser, one_turn_html)
    wrong: list[Any] = []
    try:
        p.page.set_viewport_size({"width": width, "height": 860})
        # the page lays itself out again on the resize event, which comes after the new size: wait for the
        # size, then for two frames (the resize handler's draw, then its paint) before measuring anything
        p.page.wait_for_function(f"window.innerWidth === {width}")
        p.page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(0))))")
        chunk = p.locator(".row:has(.what:has-text('agent_message_chunk'))")
        shown = chunk.locator(".pv").evaluate_all(_SHOWN)
        if [s[0] for s in shown] != ["Only chunk here"] or not all(s[1] and s[2] for s in shown):
            wrong.append(("chunk text", shown))
        shown = p.locator(".row:has(.what:has-text('plan'))").locator(".pv").evaluate_all(_SHOWN)
        if [s[0] for s in shown] != ["[in_progress] Read parser.py", "[pending] Fix the split"]:
            wrong.append(("plan entries", shown))
        elif not all(s[2] for s in shown):
            wrong.append(("plan entries hidden", shown))
        for lane in ("#lane-editor", "#lane-agent"):
            cut = p.locator(lane).evaluate("e => [e.scrollWidth <= e.clientWidth, e.title, e.textContent]")
            if not (cut[0] or (_AGENT["name"] in cut[1] and _AGENT["version"] in cut[1])):
                wrong.append(("lane title cut", lane, cut))
        if p.text_content("#turnpos") != "before turn 1 (1 turn)":
            wrong.append(("plural", p.text_content("#turnpos")))
        chunk.click()
        assert p.text_content("#pbody h3").startswith("agent_message_chunk")
        box = p.locator("#panel").bounding_box()
        if not (box and box["x"] >= 0 and box["y"] >= 0 and box["x"] + box["width"] <= width):
            wrong.append(("panel outside the viewport", box))
        elif box["y"] + box["height"] > 860:
            wrong.append(("panel below the viewport", box))
        p.screenshot(path=str(shots / f"one-turn-{width}.png"))
        assert wrong == [] and p.errors == [], (width, wrong, p.errors)
    finally:
        p.close()


def test_one_frame_is_one_frame(tmp_path: Path, browser: Any) -> None:
    """Counts agree with their noun everywhere the page says one: the frame count and the window title."""
    path = tmp_path / "lone.db"
    conn = dbmod.connect(path)
    conn.execute("BEGIN")
    w = ConnectionWriter(conn, started_at=BASE, argv=["agent"])
    w.feed("c2a", j(id=0, method="initialize", params={"protocolVersion": 1}), 0.0)
    w.close(ended_mono=0.1, exit_code=0, closed_by="editor_eof")
    conn.execute("COMMIT")
    conn.close()
    p = Page(browser, view(path, "--connection", "1", out=tmp_path / "lone.html"))
    try:
        assert p.text_content("#count") == "1 frame"
        assert p.title().endswith(" · 1 frame") and p.text_content("#turnpos") == "no turns"
        assert p.errors == []
    finally:
        p.close()
