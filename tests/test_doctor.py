"""`acp-relay doctor` on a fake HOME: ok for a good setup, FAIL (exit 1) for each thing that stops an editor
from recording: a missing agent, a relative acp-relay path, an unwritable database directory, a bad database."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from support.editors import RELAY, ZED_SETTINGS, acp, config_path, home_env

from acp_relay.store import db as dbmod

AGENT = sys.executable
FREE = re.compile(r"[0-9.]+ [KMGT]?B free")


def doctor(home: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, list[dict[str, str]]]:
    """Run doctor twice, as text and as JSON Lines; the two must say the same, line for line."""
    text = acp(home, "doctor", *args, env=env)
    js = acp(home, "doctor", "--json", *args, env=env)
    assert text.stderr == "" and js.stderr == "", text.stderr + js.stderr
    assert text.returncode == js.returncode
    checks = [json.loads(line) for line in js.stdout.splitlines()]
    lines = text.stdout.splitlines()
    assert len(lines) == len(checks)
    for line, check in zip(lines, checks, strict=True):  # the disk's free space moves between the two runs
        said = f"{check['status']:<4}  {check['subject']}: {check['message']}"
        assert FREE.sub("free", line).startswith(FREE.sub("free", said))
        assert check["status"] in ("ok", "warn", "FAIL")
    assert text.returncode == (1 if any(c["status"] == "FAIL" for c in checks) else 0)
    return text.returncode, checks


def failed(checks: list[dict[str, str]]) -> list[tuple[str, str]]:
    return [(c["check"], c["message"]) for c in checks if c["status"] == "FAIL"]


def setup_home(tmp_path: Path, *agent: str, db: Path | None = None) -> Path:
    home = tmp_path / "home"
    path = config_path(home, "zed")
    path.parent.mkdir(parents=True)
    path.write_text(ZED_SETTINGS)
    proc = acp(home, "setup", "zed", "--name", "Mine", *(["--db", str(db)] if db else []), "--", *agent)
    assert proc.returncode == 0, proc.stderr
    return home


def recorded_db(path: Path) -> None:
    """A database with one finished connection in it, as a relay leaves it."""
    conn = dbmod.connect(path)
    conn.execute(
        "INSERT INTO connections (started_at, ended_at, argv, label, status, exit_code, frames) "
        "VALUES (1764581400, 1764581460, '[]', 'Mine', 'ended', 0, 12)"
    )
    conn.close()


def test_a_good_setup_is_ok_and_says_the_last_connection(tmp_path: Path) -> None:
    home = setup_home(tmp_path, AGENT, "--acp")
    recorded_db(home / ".local/state/acp-relay/relay.db")
    status, checks = doctor(home, "zed")
    assert status == 0 and failed(checks) == []
    by = {(c["subject"], c["check"]): c for c in checks}
    assert by[('zed "Mine"', "relay")]["message"] == f"acp-relay {RELAY} (version 0.1.0)"
    assert by[('zed "Mine"', "agent")]["message"] == f"agent {AGENT}"
    db = home / ".local/state/acp-relay/relay.db"
    assert by[(f"database {db}", "db")]["status"] == "ok"
    assert "quick_check ok" in by[(f"database {db}", "db")]["message"]
    assert by[(f"database {db}", "db-dir")]["message"] == f"{db.parent} (0700)"
    assert "free on its disk" in by[(f"database {db}", "disk")]["message"]
    assert by[('zed "Mine"', "last")]["message"].endswith(": ended, exit 0, 12 frames")


def test_a_missing_agent_fails(tmp_path: Path) -> None:
    home = setup_home(tmp_path, "no-such-agent-anywhere", "--acp")
    status, checks = doctor(home)
    assert status == 1
    assert failed(checks) == [
        ("agent", "agent 'no-such-agent-anywhere' is not on the editor's PATH "
         "(/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)")
    ]  # fmt: skip


def test_an_agent_only_on_the_shells_path_fails_with_the_absolute_path_as_hint(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "only-here").write_text("#!/bin/sh\nexec cat\n")
    os.chmod(bin_dir / "only-here", 0o755)
    home = tmp_path / "home"
    path = config_path(home, "jetbrains")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"agent_servers": {"A": {"command": RELAY, "args": ["run", "--", "only-here"]}}}))
    env = home_env(home, PATH=f"{bin_dir}:{os.environ['PATH']}")
    status, checks = doctor(home, "jetbrains", env=env)
    [agent] = [c for c in checks if c["check"] == "agent"]
    assert status == 1 and agent["status"] == "FAIL"
    assert agent["hint"] == f"it is {bin_dir}/only-here on your shell's PATH: write that absolute path"


def test_a_relative_acp_relay_path_fails_and_wrap_fixes_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = config_path(home, "zed")
    path.parent.mkdir(parents=True)
    hand_written = ZED_SETTINGS.replace(
        '"command": "npx",\n      "args": [',
        f'"command": "acp-relay",\n      "args": ["run", "--label", "zed", "--", "{AGENT}", ',
    )
    path.write_text(hand_written)
    status, checks = doctor(home, "zed")
    assert status == 1
    assert failed(checks) == [
        ("relay", "acp-relay is written as 'acp-relay', which the editor looks up on its own PATH")
    ]
    [relay] = [c for c in checks if c["check"] == "relay"]
    assert relay["hint"] == 'acp-relay setup zed --wrap "Claude Code" writes the absolute path'
    assert acp(home, "setup", "zed", "--wrap", "Claude Code").returncode == 0
    assert doctor(home, "zed")[0] == 0


def test_an_unwritable_database_directory_fails(tmp_path: Path) -> None:
    db = tmp_path / "locked" / "relay.db"
    home = setup_home(tmp_path, AGENT, db=db)
    db.parent.mkdir(mode=0o500)
    try:
        status, checks = doctor(home, "zed")
    finally:
        db.parent.chmod(0o700)
    assert status == 1
    assert failed(checks) == [("db-dir", f"{db.parent} is not writable (mode 0500)")]


def test_a_database_directory_that_cannot_be_created_fails(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    db = tmp_path / "afile" / "state" / "relay.db"
    home = setup_home(tmp_path, AGENT, db=db)
    status, checks = doctor(home, "zed")
    assert status == 1 and failed(checks) == [
        ("db-dir", f"{db.parent} cannot be created: {tmp_path / 'afile'} is not writable")
    ]


def damage_header(path: Path) -> None:
    path.write_bytes(b"this is not an SQLite database at all" * 200)


def damage_pages(path: Path) -> None:
    """A real database whose table pages are overwritten: the header still says SQLite."""
    recorded_db(path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("CREATE TABLE filler (x)")
    conn.executemany("INSERT INTO filler VALUES (?)", [("x" * 500,) for _ in range(400)])
    conn.commit()
    conn.close()
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    for offset in range(page * 2, len(data) - page, page * 3):
        data[offset : offset + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [damage_header, damage_pages])
def test_a_corrupt_database_fails(tmp_path: Path, damage: object) -> None:
    home = setup_home(tmp_path, AGENT)
    db = home / ".local/state/acp-relay/relay.db"
    damage(db)  # type: ignore[operator]
    status, checks = doctor(home, "zed")
    assert status == 1
    [(check, message)] = failed(checks)
    assert check == "db" and (message.startswith("cannot be opened: ") or message.startswith("damaged: "))
    last = [c for c in checks if c["check"] == "last"]
    assert last and all(c["message"] == "no connection recorded yet" for c in last)


def test_a_relay_marked_running_whose_process_is_gone_is_a_warning(tmp_path: Path) -> None:
    home = setup_home(tmp_path, AGENT)
    db = home / ".local/state/acp-relay/relay.db"
    gone = subprocess.Popen(["true"])
    gone.wait()
    conn = dbmod.connect(db)
    conn.execute(
        "INSERT INTO connections (started_at, argv, label, status, relay_pid, recorder_pid) "
        "VALUES (1764581400, '[]', 'Mine', 'running', ?, ?)",
        (gone.pid, gone.pid),
    )
    conn.close()
    status, checks = doctor(home, "zed")
    assert status == 0
    [stale] = [c for c in checks if c["check"] == "stale"]
    assert (stale["status"], stale["message"]) == ("warn", "1 connection marked running whose relay is gone (1)")


def test_a_config_it_cannot_parse_fails_with_line_and_column(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = config_path(home, "zed")
    path.parent.mkdir(parents=True)
    path.write_text('{\n  "agent_servers": {,}\n}\n')
    status, checks = doctor(home)
    assert status == 1
    assert failed(checks) == [("config", f'{path}:2:21: unexpected ",": a member name in quotes or }} was expected')]


def test_another_acp_relay_version_is_a_warning(tmp_path: Path) -> None:
    other = tmp_path / "old" / "acp-relay"
    other.parent.mkdir()
    other.write_text("#!/bin/sh\necho 'acp-relay, version 0.0.1'\n")
    other.chmod(0o755)
    home = tmp_path / "home"
    path = config_path(home, "jetbrains")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"agent_servers": {"A": {"command": str(other), "args": ["run", "--", AGENT]}}}))
    status, checks = doctor(home, "jetbrains")
    [relay] = [c for c in checks if c["check"] == "relay"]
    assert status == 0 and relay["status"] == "warn"
    assert relay["message"] == f"{other} is version 0.0.1, this doctor 0.1.0"


# What an editor's config may hold that no process can be started with (issue 30 item 12): each a field
# doctor must name in a FAIL line of its own, without a traceback, and setup must handle in one line.
_JUNK = [
    ("env", {"A=B": "1"}, 'env name "A=B"'),
    ("env", {"A\u0000B": "1"}, 'env name "A\\u0000B"'),
    ("env", {"": "1"}, 'env name ""'),
    ("env", {"TOKEN": "x\u0000y"}, 'env "TOKEN" holds a NUL byte'),
    ("env", {"PATH": "/bin\u0000/usr/bin"}, 'env "PATH" holds a NUL byte'),
    ("env", {"HOME": "\u0000", "XDG_STATE_HOME": "/s\u0000"}, 'env "XDG_STATE_HOME" holds a NUL byte'),
    ("env", {"DEPTH": 3}, 'env "DEPTH" is a number, not a string'),
    ("env", {"NESTED": {"a": [1, {"b": None}]}}, 'env "NESTED" is an object, not a string'),
    ("env", ["A=1"], "env is a list, not an object"),
    ("args", ["--flag", 7], "args[1] is a number, not a string"),
    ("args", "--acp", "args is a string, not a list"),
    ("args", ["--x\u0000y"], "args[7] holds a NUL byte"),  # wrapped: run --db DB --label NAME -- AGENT first
]


@pytest.mark.parametrize(("field", "value", "says"), _JUNK, ids=[f"{f}-{i}" for i, (f, _v, _s) in enumerate(_JUNK)])
def test_an_entry_no_process_can_start_with_is_a_finding_not_a_traceback(
    tmp_path: Path, field: str, value: object, says: str
) -> None:
    home = tmp_path / "home"
    path = config_path(home, "zed")
    path.parent.mkdir(parents=True)
    entry: dict[str, object] = {"type": "custom", "command": AGENT, "args": ["--acp"], field: value}
    path.write_text(json.dumps({"agent_servers": {"Junk": entry}}))
    for args in (["--list"], ["zed", "--wrap", "Junk"], ["zed", "--unwrap", "Junk"], ["zed", "--wrap", "Junk"]):
        proc = acp(home, "setup", *args)
        assert "Traceback" not in proc.stderr and proc.returncode in (0, 2), proc.stderr
        assert "\u0000" not in proc.stdout + proc.stderr
    wrapped_ok = field != "args" or isinstance(value, list) and all(isinstance(a, str) for a in value)
    status, checks = doctor(home, "zed")
    assert status == (1 if wrapped_ok else 0)
    entry_lines = [c for c in checks if c["check"] == "entry"]
    said = [c["message"] for c in entry_lines]
    assert any(says in m for m in said), said
    assert {c["status"] for c in entry_lines} == {"FAIL" if wrapped_ok else "warn"}
    assert all(c["subject"] == 'zed "Junk"' for c in entry_lines)
    if wrapped_ok:  # the rest of the checks still ran, with what of the env a process can be given
        assert {c["check"] for c in checks} >= {"config", "entry", "relay", "agent", "db-dir"}


def test_a_database_path_with_a_nul_byte_is_a_finding(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = config_path(home, "jetbrains")
    path.parent.mkdir(parents=True)
    args = ["run", "--db", str(tmp_path / "d\u0000b" / "x.db"), "--", AGENT]
    path.write_text(json.dumps({"agent_servers": {"A": {"command": RELAY, "args": args}}}))
    status, checks = doctor(home, "jetbrains")
    assert status == 1
    bad = [(c["check"], c["message"]) for c in checks if c["status"] == "FAIL"]
    assert ("entry", "args[2] holds a NUL byte") in bad
    assert [c for c in checks if c["check"] == "db" and c["status"] == "ok"] == []


def test_doctor_reads_any_entry_without_raising(tmp_path: Path) -> None:
    """Whatever JSON an entry's command, args and env hold (NUL bytes, `=`, numbers, nesting), doctor's checks
    come out as lines: the class of item 12, in process (the relay a shell script that says its version)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from test_jsonc import KEYS, VALUES

    from acp_relay.doctor import checks, diagnose

    text = KEYS | st.sampled_from(["A=B", "", "\u0000", "PATH", "HOME", "XDG_STATE_HOME", "ACP_RELAY_DB"])
    junk = VALUES | text | st.lists(text, max_size=3) | st.dictionaries(text, VALUES | text, max_size=3)
    shaped = st.lists(text, max_size=4).map(lambda rest: ["run", *rest, "--", *rest])

    def mostly(shape: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
        """`shape` three times in four, any JSON else (a plain `|` would make the shape one branch of many)."""
        return st.integers(0, 3).flatmap(lambda i: junk if i == 0 else shape)

    relay = tmp_path / "bin" / "acp-relay"
    relay.parent.mkdir()
    relay.write_text("#!/bin/sh\necho 'acp-relay, version 0.1.0'\n")
    relay.chmod(0o755)
    home = tmp_path / "home"
    path = config_path(home, "jetbrains")
    path.parent.mkdir(parents=True)

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(mostly(st.just(str(relay))), mostly(shaped), mostly(st.dictionaries(text, text, max_size=3)))
    def check(command: object, args: object, env: object) -> None:
        path.write_text(json.dumps({"agent_servers": {"E": {"command": command, "args": args, "env": env}}}))
        checks._versions.clear()  # each run of doctor starts with none known
        for found in diagnose("jetbrains", home_env(home)):
            assert found.status in ("ok", "warn", "FAIL") and isinstance(found.message, str)

    check()
