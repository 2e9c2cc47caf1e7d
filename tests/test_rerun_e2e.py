"""`acp-relay rerun` and `acp-relay diff` as processes, against the real SDK agent and a scripted v2 agent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import rows
from rerun_support import SDK_AGENT, V2_AGENT, acp_relay, record_v1, record_v2

NOTES = "the notes\nsecond line\n"


@pytest.fixture
def v1(db: Path, tmp_path: Path) -> tuple[Path, str]:
    notes = tmp_path / "notes.txt"
    notes.write_text(NOTES)
    return db, record_v1(db, tmp_path, notes)


def rerun(db: Path, session: str, *agent: str, env: dict[str, str] | None = None, extra: tuple[str, ...] = ()):
    return acp_relay(
        "rerun",
        "--db",
        str(db),
        session,
        "--timeout",
        "15",
        "--json",
        *extra,
        "--",
        *agent,
        env={**os.environ, **(env or {})},
    )


def test_rerun_same_agent_then_diff_is_the_same(v1: tuple[Path, str]) -> None:
    db, sid = v1
    r = rerun(db, f"{sid}@1", *SDK_AGENT)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    read = {"turn": 1, "n": 1, "kind": "read", "title": "Read notes", "rule": "kind+place"}
    answered = {"answered_by": "recording", "answer": "allow-once"}
    permissions = [{**read, **answered}]
    assert out == {"session": sid, "connection": 2, "turns": 2, "completed": 2, "exit": 0, "permissions": permissions}
    assert rows(db, "SELECT label, exit_code FROM connections WHERE id = 2") == [(f"rerun of {sid}", 0)]
    # the live agent asked for permission and read the file: answered from the recording
    kinds = rows(
        db, "SELECT direction, method, kind FROM frames WHERE connection_id = 2 AND kind != 'notification' ORDER BY seq"
    )
    assert ("c2a", "session/request_permission", "response") in kinds and (
        "c2a",
        "fs/read_text_file",
        "response",
    ) in kinds
    # the recorded cancel came after the first update of turn 2, as recorded
    seqs = rows(db, "SELECT method, update_kind, rpc_id FROM frames WHERE connection_id = 2 ORDER BY seq")
    cancel = [i for i, r in enumerate(seqs) if r[0] == "session/cancel"]
    assert len(cancel) == 1 and seqs[cancel[0] - 1][1] == "agent_message_chunk"

    d = acp_relay("diff", "--db", str(db), f"{sid}@1", f"{sid}@2")
    assert d.returncode == 0, d.stdout + d.stderr
    assert d.stdout.startswith(f"A {sid}@1") and "same" in d.stdout.splitlines()[0]
    j = json.loads(acp_relay("diff", "--db", str(db), f"{sid}@1", f"{sid}@2", "--json").stdout)
    assert j["same"] and j["exit"] == 0
    assert {k: j[k]["same"] for k in ("conversation", "protocol", "metadata", "timing")} == dict.fromkeys(
        ("conversation", "protocol", "metadata", "timing"), True
    )


def test_rerun_against_a_variant_differs_in_turn_one(v1: tuple[Path, str]) -> None:
    db, sid = v1
    r = rerun(db, f"{sid}@1", *SDK_AGENT, env={"SDK_AGENT_VARIANT": "1"})
    assert r.returncode == 0, r.stderr
    d = acp_relay("diff", "--db", str(db), f"{sid}@1", f"{sid}@2")
    assert d.returncode == 1, d.stdout + d.stderr
    assert "differ in conversation" in d.stdout.splitlines()[0]
    assert "@@ turn 1" in d.stdout or "@@ -1,6 +1,6 @@ turn 1" in d.stdout
    assert "-agent: Hello from the SDK agent." in d.stdout and "+agent: Hello from the changed agent." in d.stdout
    j = json.loads(acp_relay("diff", "--db", str(db), f"{sid}@1", f"{sid}@2", "--json").stdout)
    assert j["conversation"]["turns_changed"] == ["turn 1"] and j["exit"] == 1
    assert j["protocol"]["same"] and j["metadata"]["same"]
    ignored = acp_relay("diff", "--db", str(db), f"{sid}@1", f"{sid}@2", "--ignore", "conversation")
    assert ignored.returncode == 0, ignored.stdout


def test_a_turn_that_never_ends_gives_3(v1: tuple[Path, str]) -> None:
    db, sid = v1
    r = acp_relay(
        "rerun",
        "--db",
        str(db),
        f"{sid}@1",
        "--timeout",
        "1.5",
        "--",
        *SDK_AGENT,
        env={**os.environ, "SDK_AGENT_HANG_AT_TURN": "1"},
    )
    assert r.returncode == 3, r.stderr
    assert "turn 1 did not end within 1.5s" in r.stderr
    assert r.stdout.startswith(f"rerun of {sid}@1: timed out, 0/2 turns (connection 2); session {sid}")
    assert rows(db, "SELECT count(*) FROM frames WHERE connection_id = 2 AND method = 'session/prompt'")[0][0] == 1


def test_an_agent_that_dies_in_turn_two_gives_4_with_turn_one_recorded(v1: tuple[Path, str]) -> None:
    db, sid = v1
    r = rerun(db, f"{sid}@1", *SDK_AGENT, env={"SDK_AGENT_DIE_AT_TURN": "2"})
    assert r.returncode == 4, r.stderr
    out = json.loads(r.stdout)
    assert out == {
        "session": sid,
        "connection": 2,
        "turns": 2,
        "completed": 1,
        "exit": 4,
        "permissions": out["permissions"],
    }
    assert [p["rule"] for p in out["permissions"]] == ["kind+place"]
    assert "exit status 3" in r.stderr and "dying in turn 2" in r.stderr
    # turn 1 is recorded in full: its prompt was answered
    answered = rows(
        db,
        "SELECT count(*) FROM frames WHERE connection_id = 2 AND method = 'session/prompt' AND kind = 'response'",
    )
    assert answered[0][0] == 1


def test_v2_cancelled_turn_reruns_with_the_cancel_at_its_point(db: Path, tmp_path: Path) -> None:
    sid = record_v2(db, tmp_path)
    r = rerun(db, f"{sid}@1", *V2_AGENT)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["completed"] == 2
    for cid in (1, 2):
        frames = rows(db, "SELECT direction, method, update_kind FROM frames WHERE connection_id = ? ORDER BY seq", cid)
        prompts = [i for i, f in enumerate(frames) if f[1] == "session/prompt" and f[0] == "c2a"]
        cancel = next(i for i, f in enumerate(frames) if f[1] == "session/cancel")
        between = [f[2] for f in frames[prompts[1] : cancel] if f[1] == "session/update"]
        assert between == ["user_message", "state_update", "agent_message_chunk"], (cid, between)
    d = acp_relay("diff", "--db", str(db), f"{sid}@1", f"{sid}@2")
    assert d.returncode == 0, d.stdout
    assert "stop: cancelled" in acp_relay("diff", "--db", str(db), f"{sid}@1", f"{sid}@2", "--json").stdout or True


def test_usage_errors_give_2(v1: tuple[Path, str], tmp_path: Path) -> None:
    db, sid = v1
    assert acp_relay("diff", "--db", str(db), "nope", f"{sid}@1").returncode == 2
    assert acp_relay("diff", "--db", str(db), f"{sid}@1", f"{sid}@1", "--ignore", "bogus").returncode == 2
    assert acp_relay("rerun", "--db", str(db), "nope", "--", *SDK_AGENT).returncode == 2
    assert acp_relay("rerun", "--db", str(db), f"{sid}@1", "--answer", "maybe", "--", *SDK_AGENT).returncode == 2
    other = tmp_path / "other.db"
    record_v1(other, tmp_path, tmp_path / "notes.txt")
    cross = acp_relay("diff", "--db", str(db), f"{sid}@1", "last", "--db-b", str(other))
    assert cross.returncode == 0, cross.stdout + cross.stderr


def _permission_answers(db: Path, cid: int) -> list[str]:
    """The option ids the editor side of connection CID chose, in order."""
    sql = "SELECT raw FROM frames WHERE connection_id = ? AND method = 'session/request_permission' AND kind = ? ORDER BY seq"
    return [json.loads(b)["result"]["outcome"].get("optionId", "cancelled") for (b,) in rows(db, sql, cid, "response")]


@pytest.mark.parametrize("answer", [[], ["--answer", "allow"]])
def test_a_title_with_a_path_and_a_time_gets_its_recorded_answer(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: list[str]
) -> None:
    """The agent's permission title holds the file's path and the time, so the rerun's title differs from the
    recorded one exactly there: the recorded "allow-once" is found by the tool's kind and place (by title it
    was "reject-once"), the agent reads the file as it did, and both reports say the rule."""
    monkeypatch.setenv("SDK_AGENT_STAMP_TITLES", "1")
    notes = tmp_path / "notes.txt"
    notes.write_text(NOTES)
    sid = record_v1(db, tmp_path, notes)
    titles = rows(db, "SELECT raw FROM frames WHERE method = 'session/request_permission' AND kind = 'request'")
    assert str(notes) in json.loads(titles[0][0])["params"]["toolCall"]["title"]
    r = rerun(db, f"{sid}@1", *SDK_AGENT)
    assert r.returncode == 0, r.stderr
    live = rows(
        db,
        "SELECT raw FROM frames WHERE connection_id = 2 AND method = 'session/request_permission' AND kind = 'request'",
    )
    assert (
        json.loads(live[0][0])["params"]["toolCall"]["title"] != json.loads(titles[0][0])["params"]["toolCall"]["title"]
    )
    assert _permission_answers(db, 1) == _permission_answers(db, 2) == ["allow-once"]
    (perm,) = json.loads(r.stdout)["permissions"]
    assert (perm["kind"], perm["rule"], perm["answered_by"], perm["answer"]) == (
        "read",
        "kind+place",
        "recording",
        "allow-once",
    )
    assert (
        "permission 1 (read)" in r.stderr and "matched by kind and place; answered allow-once (recording)" in r.stderr
    )
    text = acp_relay("rerun", "--db", str(db), f"{sid}@1", *answer, "--", *SDK_AGENT)
    assert text.returncode == 0, text.stderr
    assert "; permissions: 1 by kind+place; session " in text.stdout
    assert _permission_answers(db, 3) == ["allow-once"]


def test_the_documented_demo_rerun_is_the_same(tmp_path: Path) -> None:
    """docs/rerun.md's example: the demo agent's permission request names only its tool call (kind and
    title were in the tool_call update before it, the title holding a temp path): found by kind and place."""
    db = tmp_path / "rr.db"
    assert acp_relay("demo", "--db", str(db)).returncode == 0
    agent = (sys.executable, "-m", "acp_relay.demo.command", "agent")
    r = rerun(db, "last", *agent)
    assert r.returncode == 0, r.stderr
    (perm,) = json.loads(r.stdout)["permissions"]
    assert (perm["kind"], perm["rule"], perm["answer"]) == ("read", "kind+place", "allow")
    assert perm["title"].startswith("Read /") and perm["title"].endswith("/notes.txt")
    d = acp_relay("diff", "--db", str(db), "demo-session-1@1", "last")
    assert d.returncode == 0 and d.stdout.split(": ")[-1].strip() == "same", d.stdout


@pytest.mark.parametrize("agent", ["./nonexistent-agent", "not-executable"])
def test_an_agent_that_cannot_start_records_nothing_and_says_one_line(
    fixture_db: Path, tmp_path: Path, agent: str
) -> None:
    """The baseline database gains no failed connection, and the reason is one clean line (a literal `\\n`
    joined the relay's stderr to it)."""
    import shutil

    db = tmp_path / "x.db"
    shutil.copy(fixture_db, db)
    if agent == "not-executable":
        agent = str(tmp_path / agent)
        Path(agent).write_text("#!/bin/sh\n")
    before = rows(db, "SELECT id, status FROM connections ORDER BY id")
    r = subprocess.run(
        [sys.executable, "-m", "acp_relay", "rerun", "--db", str(db), "last@1", "--", agent],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert r.returncode == 4, r.stderr
    assert rows(db, "SELECT id, status FROM connections ORDER BY id") == before
    said = r.stderr.splitlines()
    assert all(line.startswith("acp-relay: rerun: ") and "\\n" not in line for line in said), r.stderr
    assert "cannot start" in said[-1] and r.stdout.endswith("agent failed, 0/2 turns; no session started\n")


def test_an_agent_that_exits_says_its_last_words_on_one_line(fixture_db: Path, tmp_path: Path) -> None:
    import shutil

    db = tmp_path / "x.db"
    shutil.copy(fixture_db, db)
    script = "import sys; sys.stderr.write('first\\nsecond\\x1b[31m\\nlast words\\n'); sys.exit(3)"
    r = acp_relay("rerun", "--db", str(db), "last@1", "--", sys.executable, "-c", script)
    assert r.returncode == 4, r.stderr
    said = r.stderr.splitlines()
    assert all(line.startswith("acp-relay: rerun: ") and "\\n" not in line for line in said), r.stderr
    assert "exit status 3" in said[-1] and said[-1].endswith("last words") and "\x1b" not in r.stderr
