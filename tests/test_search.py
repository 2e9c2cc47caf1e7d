"""`acp-relay search`: what is indexed, incremental indexing at search time, filters, output and exit codes."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import Result
from fixtures.recordings import BASE, V1, j, upd
from helpers import rows
from support.cli import run as cli_run

from acp_relay.protocol.searchtext import MARKERS, message_text
from acp_relay.render.frames import Style
from acp_relay.store import db as dbmod
from acp_relay.store.scripted import ConnectionWriter
from acp_relay.store.search import search, update_index

S1, S2 = "sess-v1-alpha", "sess-v2-beta"


@pytest.fixture
def fixture_db(fixture_db: Path, tmp_path: Path) -> Path:
    """A fresh copy of the shared fixture database per test: searching writes the index into it."""
    path = tmp_path / "f.db"
    shutil.copyfile(fixture_db, path)
    return path


def run(*args: str) -> Result:
    return cli_run("search", *args)


def matched(db: Path, *args: str) -> list[int]:
    r = run("--db", str(db), "--json", *args)
    assert r.exit_code in (0, 1), r.output
    return [json.loads(x)["frame"] for x in r.output.splitlines()]


# -- what people read ---------------------------------------------------------------------------------------
def test_message_text_takes_what_people_read_and_leaves_machinery_out() -> None:
    def u(**update: object) -> dict:
        return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": update}}

    text = {"type": "text", "text": "hello"}
    assert message_text({"params": {"prompt": [text, {"type": "image", "data": "AAAA"}]}}, "session/prompt") == "hello"
    assert message_text(u(sessionUpdate="agent_thought_chunk", content=text), "session/update") == "hello"
    assert message_text(u(sessionUpdate="agent_message", content=[text]), "session/update") == "hello"
    call = u(
        sessionUpdate="tool_call", title="Run tests", content=[{"type": "diff", "path": "a.py", "newText": "x = 1"}]
    )
    assert message_text(call, "session/update") == "Run tests\na.py\nx = 1"
    plan = u(sessionUpdate="plan_update", plan={"type": "items", "planId": "p", "entries": [{"content": "Step one"}]})
    assert message_text(plan, "session/update") == "Step one"
    assert (
        message_text(u(sessionUpdate="terminal_output_chunk", terminalId="t", data="b2sK"), "session/update") == "ok\n"
    )
    assert message_text({"id": 1, "result": {"output": "PASSED", "truncated": False}}, "terminal/output") == "PASSED"
    assert message_text({"id": 1, "error": {"code": -1, "message": "Boom", "data": "detail"}}, "x") == "Boom\ndetail"
    assert message_text(u(sessionUpdate="usage_update", used=1, size=2), "session/update") == ""
    assert (
        message_text(u(sessionUpdate="available_commands_update", availableCommands=[{"name": "x"}]), "session/update")
        == ""
    )
    assert message_text({"params": {"clientCapabilities": {}}}, "initialize") == ""
    assert (
        message_text(
            u(sessionUpdate="agent_message_chunk", content={"type": "text", "text": "a\ue000b"}), "session/update"
        )
        == "ab"
    )
    assert MARKERS[0] not in message_text({"error": {"message": MARKERS[0]}}, None)


def test_search_finds_each_kind_of_text(fixture_db: Path) -> None:
    conn = dbmod.connect(fixture_db)
    update_index(conn)

    def hit(q: str) -> list[str | None]:
        return [f.update_kind or f.method for f, _ in search(conn, q)]

    assert hit("failing") == ["session/prompt"]  # prompt
    assert hit("commas") == ["agent_thought_chunk"]  # thought
    assert hit('"Fix the split"') == ["plan"]  # plan entry
    assert "agent_message_chunk" in hit("pytest")  # agent message
    assert hit("Method not found") == ["session/set_mode", None]  # errors (the second in a batch)
    assert "tool_call_update" in hit("split")  # tool call content
    assert hit("Indexing") == ["notice"]
    assert "terminal_output_chunk" in hit("b.py")  # terminal output, decoded
    assert hit("initialize") == []  # method names are not text
    conn.close()


def test_index_is_brought_up_to_date_when_a_search_runs(fixture_db: Path) -> None:
    assert matched(fixture_db, "commas")
    assert rows(fixture_db, "SELECT last_frame_id FROM search_progress WHERE id = 1") == rows(
        fixture_db, "SELECT max(id) FROM frames"
    )
    before = rows(fixture_db, "SELECT count(*) FROM search_text")[0][0]
    # a relay records more: nothing is indexed at write time...
    conn = dbmod.connect(fixture_db)
    conn.execute("BEGIN")
    w = ConnectionWriter(conn, started_at=BASE + 9000, argv=["late-agent"])
    w.feed("c2a", j(id=0, method="session/new", params={"cwd": "/", "mcpServers": []}), 0.1)
    w.feed("a2c", j(id=0, result={"sessionId": "late"}), 0.2)
    w.feed("a2c", upd("late", sessionUpdate="agent_message_chunk", content={"type": "text", "text": "zanzibar"}), 0.3)
    w.close(ended_mono=1.0)
    conn.execute("COMMIT")
    conn.close()
    assert rows(fixture_db, "SELECT count(*) FROM search_text")[0][0] == before
    # ...and the next search indexes exactly the new frames
    (late,) = matched(fixture_db, "zanzibar")
    assert rows(fixture_db, "SELECT count(*) FROM search_text")[0][0] == before + 1
    assert rows(fixture_db, "SELECT session_id FROM frames WHERE id = ?", late) == [("late",)]
    assert matched(fixture_db, "commas")  # the old matches are still there, not indexed twice
    assert rows(fixture_db, "SELECT count(*) - count(DISTINCT frame_id) FROM search_text") == [(0,)]


def test_deleted_newest_frames_are_forgotten(fixture_db: Path) -> None:
    assert matched(fixture_db, "bye") == [] or True
    assert matched(fixture_db, "three modules")
    conn = sqlite3.connect(fixture_db)
    top = conn.execute("SELECT max(id) FROM frames").fetchone()[0]
    conn.execute("DELETE FROM frames WHERE connection_id = (SELECT max(id) FROM connections)")  # the crash
    conn.execute("DELETE FROM batch_messages WHERE frame_id NOT IN (SELECT id FROM frames)")
    conn.execute("DELETE FROM frames WHERE connection_id = 2 AND seq > 20")
    conn.commit()
    conn.close()
    assert matched(fixture_db, "three modules")  # still found where it survives
    progress = rows(fixture_db, "SELECT last_frame_id FROM search_progress WHERE id = 1")[0][0]
    assert progress < top and progress == rows(fixture_db, "SELECT max(id) FROM frames")[0][0]


# -- the command ---------------------------------------------------------------------------------------------
def test_exit_codes_and_filters(fixture_db: Path) -> None:
    assert run("--db", str(fixture_db), "commas").exit_code == 0
    assert run("--db", str(fixture_db), "nowhere_to_be_found").exit_code == 1
    r = run("--db", str(fixture_db / "missing.db"), "x")
    assert r.exit_code == 2 and "no database" in r.output
    r = run("--db", str(fixture_db), "x", "--session", "no-such-session")
    assert r.exit_code == 2 and "no session matches" in r.output
    assert run("--db", str(fixture_db), "   ").exit_code == 2
    assert len(matched(fixture_db, "the")) > 3
    assert len(matched(fixture_db, "the", "--limit", "2")) == 2
    s1 = matched(fixture_db, "the", "--session", S1)
    s2 = matched(fixture_db, "the", "--session", "sess-v2-b")  # a prefix
    assert s1 and s2 and not set(s1) & set(s2)
    assert matched(fixture_db, "the", "--method", "session/prompt") == matched(
        fixture_db, "the", "--method", "*/prompt"
    )
    assert len(matched(fixture_db, "Method", "--method", "session/set_*")) == 1


def test_fts_syntax_and_plain_words_both_work(fixture_db: Path) -> None:
    assert matched(fixture_db, "pars*")  # prefix
    assert matched(fixture_db, "commas OR zanzibar") == matched(fixture_db, "commas")
    assert matched(fixture_db, "split NOT commas")
    assert run("--db", str(fixture_db), 'parser.py"').exit_code == 0  # a stray quote: searched as words
    assert run("--db", str(fixture_db), "line-2").exit_code in (0, 1)


def test_output_is_show_lines_with_session_and_highlight_on_a_terminal_only(fixture_db: Path) -> None:
    plain = run("--db", str(fixture_db), "commas")
    first, snippet = plain.output.splitlines()[:2]
    assert first.startswith(S1 + "  ") and "agent_thought_chunk" in first and "\x1b[" not in plain.output
    assert snippet.strip() == "The parser splits on commas."
    colored = run("--db", str(fixture_db), "commas", "--color", "always")
    assert "\x1b[1;31mcommas\x1b[0m" in colored.output
    rec = json.loads(run("--db", str(fixture_db), "commas", "--json").output.splitlines()[0])
    assert rec["session"] == S1 and rec["update"] == "agent_thought_chunk" and rec["snippet"].endswith("commas.")


def test_recorded_escapes_cannot_drive_the_terminal(tmp_path: Path) -> None:
    path = tmp_path / "evil.db"
    conn = dbmod.connect(path)
    conn.execute("BEGIN")
    w = ConnectionWriter(conn, started_at=BASE, argv=["evil"])
    w.feed("c2a", j(id=0, method="session/new", params={"cwd": "/", "mcpServers": []}), 0.1)
    w.feed("a2c", j(id=0, result={"sessionId": "evil"}), 0.2)
    nasty = "beware \x1b]0;pwned\x07 \x1b[2J \u202e gotcha"
    w.feed("a2c", upd("evil", sessionUpdate="agent_message_chunk", content={"type": "text", "text": nasty}), 0.3)
    w.close(ended_mono=1.0)
    conn.execute("COMMIT")
    conn.close()
    for color in ("never", "always"):
        out = run("--db", str(path), "gotcha", "--color", color).output
        assert "\x1b]" not in out and "\x1b[2J" not in out and "\u202e" not in out and "\x07" not in out


def test_search_module_does_not_run_at_record_time(fixture_db: Path) -> None:
    """The relay's databases carry no index until someone searches."""
    assert not rows(fixture_db, "SELECT name FROM sqlite_master WHERE name LIKE 'search%'")
    assert Style() and V1


def test_text_split_across_streamed_chunks_is_found_with_its_frames(tmp_path: Path) -> None:
    """`p` + `ong` streamed as two chunks: no frame holds `pong`, the message does. It is reported as the
    message with the frames it came in; a word one chunk holds whole is still reported as that frame."""
    path = tmp_path / "split.db"
    conn = dbmod.connect(path)
    w = ConnectionWriter(conn, started_at=BASE, argv=["agent"])
    sid = "s-split"
    w.line("c2a", j(id=1, method="session/new", params={"cwd": "/w", "mcpServers": []}).rstrip(b"\n"), 0.1)
    w.line("a2c", j(id=1, result={"sessionId": sid}).rstrip(b"\n"), 0.2)
    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "ping?"}]}
    w.line("c2a", j(id=2, method="session/prompt", params=prompt).rstrip(b"\n"), 0.3)
    for n, piece in enumerate(["The answer is p", "ong, and ", "whole words too."]):
        chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": piece}}
        w.line("a2c", upd(sid, **chunk).rstrip(b"\n"), 0.4 + n / 10)
    w.line("a2c", upd(sid, sessionUpdate="tool_call", toolCallId="c1", title="grep").rstrip(b"\n"), 0.8)
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "after the tool: p"}}
    w.line("a2c", upd(sid, **chunk).rstrip(b"\n"), 0.9)
    w.close(ended_mono=1.0)
    conn.close()
    r = run("--db", str(path), "--json", "pong")
    assert r.exit_code == 0, r.output
    (hit,) = [json.loads(x) for x in r.output.splitlines()]
    assert hit["frames"] == [4, 5, 6] and hit["session_id"] == sid and "pong" in hit["snippet"]
    assert matched(path, "whole") == [6]  # one chunk holds it: the frame
    text = run("--db", str(path), "pong").output
    assert "agent_message_chunk (frames 4-6, 3 chunks joined)" in text
    assert run("--db", str(path), "ong", "--json").exit_code == 0  # the second chunk's own word
    r = run("--db", str(path), "--json", "pafter")  # a tool call in between ends the message
    assert r.exit_code == 1, r.output
