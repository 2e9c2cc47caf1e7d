"""`acp-relay check` on recorded databases: output, --json keys, exit statuses, filters, show --frame."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
from check_helpers import TEXT, Script, record

from acp_relay.protocol.check.rules import RULES
from acp_relay.protocol.check.tck import REQUIREMENTS, tck_ids
from acp_relay.protocol.check.transport import TRANSPORT_RULES
from acp_relay.protocol.jsonrpc import A2C


def acp(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "acp_relay", *args], capture_output=True, text=True, timeout=60)


def broken_v2() -> Script:
    """A v2 turn with a schema error (prompt result), a lifecycle error (no running) and a warning."""
    s = Script(2)
    sid = s.new_session()
    rid = s.prompt_request(sid)
    s.respond(A2C, rid, {"messageId": "u1"})
    s.update(sid, sessionUpdate="user_message", messageId="u1", content=[TEXT])
    s.update(sid, sessionUpdate="agent_message_chunk", messageId="a1", content={"type": "text"})
    s.state(sid, "idle", stopReason="end_turn")
    s.update(sid, sessionUpdate="future_variant")
    return s


def test_human_output_exit_1_and_summary(tmp_path: Path) -> None:
    db = record(broken_v2(), tmp_path / "r.db")
    out = acp("check", "--db", str(db))
    assert out.returncode == 1, out.stderr
    lines = out.stdout.splitlines()
    assert lines[-1] == "2 errors, 1 warning, 0 info in 10 frames checked"
    body = lines[:-1]
    assert [ln.split()[2] for ln in body] == ["schema.params", "lifecycle.running", "schema.unknown-variant"]
    frames = [int(ln.split()[0]) for ln in body]
    assert frames == sorted(frames)
    assert (
        "params.update.content is missing the required field `text`" in body[0]
        and "[schema UpdateSessionNotification]" in body[0]
    )
    assert "[Prompt Lifecycle: 3. Agent Reports Output]" in body[1]
    # The frame number is the one `show --frame` takes, and show lists the finding under it.
    shown = acp("show", "--db", str(db), "--frame", str(frames[1]))
    assert shown.returncode == 0 and "lifecycle.running" in shown.stdout and "state_update" in shown.stdout


def test_json_lines_have_exactly_the_keys(tmp_path: Path) -> None:
    db = record(broken_v2(), tmp_path / "r.db")
    out = acp("check", "--db", str(db), "last", "--json")
    assert out.returncode == 1
    objs = [orjson.loads(line) for line in out.stdout.splitlines()]
    assert len(objs) == 3
    for o in objs:
        assert list(o) == ["frame", "session", "rule", "severity", "message", "spec", "tck"]
        assert isinstance(o["frame"], int) and o["session"] == "sess-1" and o["rule"] in RULES
        assert o["tck"] is None or o["tck"] in tck_ids(o["rule"], 2)  # the one requirement it breaks
    assert {o["rule"]: o["tck"] for o in objs}["lifecycle.running"] == "ACP-STATE-201"
    assert "2 errors" in out.stderr  # the summary is not on stdout


def test_filters_and_exit_status(tmp_path: Path) -> None:
    db = str(record(broken_v2(), tmp_path / "r.db"))
    only = acp("check", "--db", db, "--rule", "lifecycle.*")
    assert only.returncode == 1 and [ln.split()[2] for ln in only.stdout.splitlines()[:-1]] == ["lifecycle.running"]
    ignored = acp("check", "--db", db, "--ignore", "schema.params", "--ignore", "lifecycle.running")
    assert ignored.returncode == 0 and "0 errors, 1 warning" in ignored.stdout
    errors_only = acp("check", "--db", db, "--min-severity", "error", "--json")
    assert {orjson.loads(x)["severity"] for x in errors_only.stdout.splitlines()} == {"error"}
    assert acp("check", "--db", db, "--rule", "no.such-rule").returncode == 2
    assert acp("check", "--db", db, "--min-severity", "fatal").returncode == 2
    assert acp("check", "--db", db, "nosuchsession").returncode == 2
    assert acp("check", "--db", str(tmp_path / "missing.db")).returncode == 2
    (tmp_path / "junk.db").write_bytes(b"not a database at all" * 100)
    assert acp("check", "--db", str(tmp_path / "junk.db")).returncode == 5  # the database is unusable


def test_connection_all_and_default(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    clean = Script(1)
    clean.prompt(clean.new_session())
    record(clean, db)
    record(broken_v2(), db)
    assert acp("check", "--db", str(db), "--connection", "1").returncode == 0
    newest = acp("check", "--db", str(db))  # the newest connection
    assert newest.returncode == 1 and "10 frames" in newest.stdout
    every = acp("check", "--db", str(db), "--all")
    assert every.returncode == 1 and f"in {len(clean.frames) + 10} frames checked" in every.stdout


def test_connection_includes_frames_outside_sessions(tmp_path: Path) -> None:
    s = Script(2)
    s.line(A2C, b"Loading model...")
    s.new_session()
    db = record(s, tmp_path / "r.db")
    out = acp("check", "--db", str(db), "--connection", "last", "--json")
    assert [orjson.loads(x)["rule"] for x in out.stdout.splitlines()] == ["rpc.not-json"]
    assert orjson.loads(out.stdout.splitlines()[0])["session"] is None


def test_unanswered_only_once_the_connection_ended(tmp_path: Path) -> None:
    s = Script(2)
    sid = s.new_session()
    s.prompt_request(sid)
    running = record(s, tmp_path / "live.db", status="running")
    assert "protocol.unanswered" not in acp("check", "--db", str(running)).stdout
    ended = record(s, tmp_path / "ended.db")
    assert "protocol.unanswered" in acp("check", "--db", str(ended)).stdout


def test_rules_listing() -> None:
    out = acp("check", "--rules")
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    listed = {**RULES, **TRANSPORT_RULES}  # the message rules, then the remote transport's
    assert len(lines) == len(listed)
    for line, rule in zip(lines, listed.values(), strict=True):
        assert line.split()[:2] == [rule.id, rule.severity] and f"[{rule.spec}]  tck: " in line
    by_id = {ln.split()[0]: ln for ln in lines}
    assert by_id["protocol.session-ids"].endswith("tck: ACP-SESSION-001 (v1, v2), ACP-SESSION-002 (v1, v2)")
    assert by_id["rpc.blank-line"].endswith("tck: none")
    as_json = [orjson.loads(x) for x in acp("check", "--rules", "--json").stdout.splitlines()]
    assert [o["id"] for o in as_json] == list(listed)
    assert {o["id"]: o["tck"] for o in as_json}["protocol.agent-info"] == {"v1": ["ACP-INIT-004"]}


def test_coverage_listing() -> None:
    both = acp("check", "--coverage")
    assert both.returncode == 0
    lines = both.stdout.splitlines()
    assert len(lines) == len(REQUIREMENTS) + 2  # one line each, then one count per version
    assert lines[-2].startswith("v1: 56 kit requirements: ") and lines[-1].startswith("v2: 106 kit requirements: ")
    v1 = acp("check", "--coverage", "--protocol", "1").stdout.splitlines()
    assert all(ln.startswith("v1  ") for ln in v1[:-1]) and len(v1) == 57
    row = next(ln for ln in v1 if " ACP-INIT-004 " in ln)
    assert row.split()[2:5] == ["ADVISORY", "rule", "protocol.agent-info"]
    objs = [orjson.loads(x) for x in acp("check", "--coverage", "--json", "--protocol", "2").stdout.splitlines()]
    assert len(objs) == 106 and {o["protocol"] for o in objs} == {2}
    assert set(objs[0]) == {"id", "protocol", "tier", "status", "rules", "note"}
    bad = acp("check", "--protocol", "2")
    assert bad.returncode == 2 and bad.stderr.startswith("acp-relay: ")


def test_demo_session_checks_clean(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    assert acp("demo", "--db", str(db)).returncode == 0
    out = acp("check", "--db", str(db), "last")
    assert out.returncode == 0, out.stdout
    assert out.stdout.startswith("0 errors, 0 warnings, 0 info in ")


def test_subagent_child_session_view(tmp_path: Path) -> None:
    """A child session is announced in its parent's stream, outside the child's own view: not unknown."""
    s = Script(2)
    sid = s.new_session()
    s.update(sid, sessionUpdate="subagent_update", sessionId="child-1", title="Explorer")
    s.update("child-1", sessionUpdate="agent_message_chunk", messageId="c1", content=TEXT)
    s.update("child-9", sessionUpdate="agent_message_chunk", messageId="c2", content=TEXT)
    db = str(record(s, tmp_path / "r.db"))
    assert acp("check", "--db", db, "child-1").returncode == 0
    whole = acp("check", "--db", db, "--connection", "last", "--json")
    assert [orjson.loads(x)["session"] for x in whole.stdout.splitlines()] == ["child-9"]


def test_v2_draft_fixture_checks_without_errors() -> None:
    """tests/fixtures/replay_v2_draft.acp: a v2-draft conversation with notices, a compaction, a custom
    variant, a subagent, a permission request, terminal output and a cancelled turn, written to the seed."""
    from acp_relay.protocol.check.engine import check_frames

    path = Path(__file__).resolve().parent / "fixtures" / "replay_v2_draft.acp"
    lines = [x for x in path.read_bytes().split(b"\n") if x and not x.startswith(b"#")]
    found, n = check_frames((i, x[:3].decode(), x[4:], False, None) for i, x in enumerate(lines, 1))
    assert n == len(lines) > 30
    assert [(f.rule, f.severity) for f in found] == [("schema.extension", "info")]


def readme_rule_row(rule_id: str) -> str:
    """The rule table's row for a rule (docs/check.md): id, severity, description, spec, the kit's ids."""
    from acp_relay.render.findings import tck_text

    r = RULES[rule_id]
    kit = tck_text({v: ids for v in (1, 2) if (ids := tck_ids(r.id, v))}).replace("none", "-")
    return f"| `{r.id}` | {r.severity} | {r.description} | {r.spec} | {kit} |"


def test_readme_documents_every_rule() -> None:
    from helpers import doc_page

    section = doc_page("check.md")
    for rule in RULES:
        assert readme_rule_row(rule) in section, rule


def test_identical_findings_fold_and_rules_are_summed(tmp_path: Path) -> None:
    """Five blank lines in a row are one line with a count; the per-rule lines give count and first frame."""
    s = Script(2)
    sid = s.new_session()
    first = s.line(A2C, b"")
    for _ in range(4):
        last = s.line(A2C, b"")
    s.prompt(sid)
    s.line(A2C, b"")  # not consecutive with the others: its own line
    db = str(record(s, tmp_path / "r.db"))
    lines = acp("check", "--db", db).stdout.splitlines()
    blank = [ln for ln in lines if " rpc.blank-line " in ln]
    assert len(blank) == 2 and blank[0].split()[0] == str(first)
    assert f"blank line (and 4 more through frame {last})" in blank[0]
    assert lines[-2].split() == ["rpc.blank-line", "6", "findings,", "first", "at", "frame", str(first)]
    every = acp("check", "--db", db, "--all").stdout.splitlines()
    assert every[0].split()[1:3] == ["c1", "-"] and every[-2].endswith(f"first at frame {first} (c1)")
    assert len(acp("check", "--db", db, "--json").stdout.splitlines()) == 6  # JSON keeps one object each
