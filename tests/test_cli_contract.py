"""One tool, one grammar: every command that takes a session walks the same matrix (a good session, ID@N,
-c N, an ambiguous id, a missing session, a missing database, a bad flag, --json parse), and every failure
is one `acp-relay: COMMAND: message` line on stderr with the status from the exit-code table, never click's
`Error:` and never a traceback."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import Result
from helpers import doc_section
from support.cli import run
from support.databases import SHARED, UUID, shared_ids

from acp_relay.cli import cli
from acp_relay.protocol.errors import ANSWER, EXIT_CODES, OK, USAGE

# command -> (arguments before SESSION, arguments after it, the statuses a good run may end with)
COMMANDS: dict[str, tuple[list[str], list[str], set[int]]] = {
    "show": ([], [], {OK}),
    "stats": ([], [], {OK}),
    "check": ([], [], {OK, ANSWER}),
    "info": ([], [], {OK}),
    "view": ([], ["--no-open", "-o", "{tmp}/page.html", "--force"], {OK}),  # twice to one path
    "export": ([], ["--format", "ndjson"], {OK}),
    "replay": ([], ["--speed", "fast"], {OK}),
    "search": (["words", "--session"], [], {OK}),
    "delete": ([], [], {OK}),
}
WITH_CONNECTION = {"show", "stats", "check", "info", "view", "export", "replay", "search"}
JSON = {"show", "stats", "check", "info", "view", "search", "delete"}


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_ids(tmp_path_factory.mktemp("contract") / "shared.db")


@pytest.fixture
def db(source: Path, tmp_path: Path) -> Path:
    """A copy per test: delete changes it."""
    copy = tmp_path / "relay.db"
    shutil.copy(source, copy)
    return copy


def invoke(command: str, db: Path, tmp: Path, *session: str) -> Result:
    before, after, _ = COMMANDS[command]
    args = [a.replace("{tmp}", str(tmp)) for a in [*before, *session, *after]]
    return run(command, "--db", str(db), *args, input=b"")


def assert_diagnostic(r: Result, command: str, status: int, *words: str) -> None:
    assert r.exit_code == status, (r.exit_code, r.stderr)
    first = r.stderr.splitlines()[0] if r.stderr else ""
    assert first.startswith(f"acp-relay: {command}: "), r.stderr
    assert "Error:" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    for word in words:
        assert word in first, (word, r.stderr)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_unique_id_and_a_unique_prefix_work(command: str, db: Path, tmp_path: Path) -> None:
    for session in (UUID, UUID[:6]):
        r = invoke(command, db, tmp_path, session)
        assert r.exit_code in COMMANDS[command][2], (session, r.exit_code, r.stderr)
        assert "Traceback" not in r.stderr
        if command == "delete":
            break  # it is gone now


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_id_at_n_names_the_session_in_connection_n(command: str, db: Path, tmp_path: Path) -> None:
    r = invoke(command, db, tmp_path, f"{SHARED}@2")
    assert r.exit_code in COMMANDS[command][2], r.stderr
    assert "is in connections" not in r.stderr
    assert invoke(command, db, tmp_path, f"{SHARED}@4").exit_code == USAGE  # not there
    bad = invoke(command, db, tmp_path, "last@9")
    assert_diagnostic(bad, command, USAGE, "no connection 9")


@pytest.mark.parametrize("command", sorted(WITH_CONNECTION))
def test_dash_c_names_a_whole_connection(command: str, db: Path, tmp_path: Path) -> None:
    before, after, good = COMMANDS[command]
    if command == "search":
        before = ["words"]
    r = run(
        command, "--db", str(db), *before, "-c", "2", *[a.replace("{tmp}", str(tmp_path)) for a in after], input=b""
    )
    assert r.exit_code in good, r.stderr
    bad = run(command, "--db", str(db), *before, "-c", "x", input=b"")
    assert_diagnostic(bad, command, USAGE, "connection number or `last`")
    clash = run(command, "--db", str(db), *before, *([] if command == "search" else [f"{SHARED}@1"]), "-c", "2")
    if command != "search":
        assert_diagnostic(clash, command, USAGE, "connection 1", "--connection says 2")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_id_in_several_connections_is_an_error_naming_them(command: str, db: Path, tmp_path: Path) -> None:
    r = invoke(command, db, tmp_path, SHARED)
    assert_diagnostic(r, command, USAGE, "s1 is in connections 1, 2, 3: say s1@N")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_missing_session_and_a_missing_database_are_usage_errors(command: str, db: Path, tmp_path: Path) -> None:
    assert_diagnostic(invoke(command, db, tmp_path, "nope"), command, USAGE, "no session matches 'nope'")
    missing = invoke(command, tmp_path / "none.db", tmp_path, UUID)
    assert_diagnostic(missing, command, USAGE, "no database at")
    assert not (tmp_path / "none.db").exists()


@pytest.mark.parametrize("command", cli.list_commands(click.Context(cli)))  # every command, those added later too
def test_a_bad_flag_is_a_usage_error_in_the_house_form(command: str, tmp_path: Path) -> None:
    r = run(command, "--bogus", "x", "--", "true")
    assert_diagnostic(r, command, USAGE, "no such option")
    assert f"see `acp-relay {command} --help`" in r.stderr


@pytest.mark.parametrize("command", sorted(JSON))
def test_json_is_json_lines(command: str, db: Path, tmp_path: Path) -> None:
    r = invoke(command, db, tmp_path, UUID, "--json")
    assert r.exit_code in COMMANDS[command][2], r.stderr
    lines = r.stdout.splitlines()
    assert lines or command == "check"  # a clean check prints no finding
    for line in lines:
        assert isinstance(json.loads(line), dict | list), line


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["show", "last", "--json", "--raw"], "do not combine"),
        (["show", "last", "--transcript", "--json"], "do not combine"),
        (["show", "--raw", "--transcript"], "do not combine"),
        (["show", "last", "--limit", "2", "--tail", "2"], "do not combine"),
        (["show", "last", "--transcript", "--tail", "2"], "--transcript shows a whole session"),
        (["check", "--all", "last"], "--all checks every connection"),
    ],
)
def test_conflicting_flags_are_usage_errors(args: list[str], words: str, db: Path) -> None:
    r = run(args[0], "--db", str(db), *args[1:])
    assert_diagnostic(r, args[0], USAGE, words)


def test_diff_refuses_a_session_compared_with_itself(db: Path) -> None:
    for a, b in ((UUID, "last"), (f"{SHARED}@2", f"{SHARED}@2"), (UUID[:5], UUID)):
        r = run("diff", "--db", str(db), a, b)
        assert_diagnostic(r, "diff", USAGE, "are both session")
    assert run("diff", "--db", str(db), f"{SHARED}@1", f"{SHARED}@2").exit_code == ANSWER  # "one" vs "two"
    assert_diagnostic(run("diff", "--db", str(db), SHARED, "last"), "diff", USAGE, "say s1@N")


def test_rerun_refuses_before_it_starts_anything(db: Path) -> None:
    before = db.stat().st_size, db.read_bytes()
    for args, words in (
        ([SHARED, "--", "true"], "say s1@N"),
        (["nope", "--", "true"], "no session matches"),
        ([UUID, "--bogus", "--", "true"], "no such option"),
        ([UUID, "--timeout", "soon", "--", "true"], "invalid value for '--timeout'"),
        ([UUID, "--label", "x", "my-agent", "--acp"], "no such option '--acp'"),
    ):
        r = run("rerun", "--db", str(db), *args)
        assert_diagnostic(r, "rerun", USAGE, words)
    assert (db.stat().st_size, db.read_bytes()) == before  # no connection written for a usage error


def test_run_rejects_unknown_options_before_the_agent(tmp_path: Path) -> None:
    r = run("run", "--db", str(tmp_path / "x.db"), "--lable", "zed", "--", "cat")
    assert_diagnostic(r, "run", USAGE, "no such option '--lable'")
    r = run("run", "--db", str(tmp_path / "x.db"), "-x", "cat")
    assert_diagnostic(r, "run", USAGE, "no such option '-x'")
    assert not (tmp_path / "x.db").exists()


# -- the README's page of it ------------------------------------------------------------------------------
def _readme_section() -> str:
    return doc_section("README.md", "## One grammar for every command")


def test_the_readme_exit_code_table_is_the_contract() -> None:
    rows = re.findall(r"^\| (\d+(?:\+N)?) \| (.+) \|$", _readme_section(), re.M)
    assert [status for status, _ in rows] == [str(code) + ("+N" if code == 128 else "") for code, _ in EXIT_CODES]


def test_the_readme_grammar_example_runs_as_shown(source: Path, tmp_path: Path) -> None:
    block = re.findall(r"```console\n(.*?)```", _readme_section(), re.S)[0]
    steps = re.split(r"^\$ ", block, flags=re.M)[1:]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "acp-relay").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m acp_relay "$@"\n')
    (bin_dir / "acp-relay").chmod(0o755)
    env = {**os.environ, "ACP_RELAY_DB": str(source), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    status = 0
    for step in steps:
        command, _, expected = step.partition("\n")
        if command == "echo $?":
            got = f"{status}\n"
        else:
            done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, env=env, timeout=60)
            status, got = done.returncode, done.stdout + done.stderr
        assert got == expected, (command, got)


def test_no_command_prints_the_help_and_subcommands_name_themselves() -> None:
    """`acp-relay` alone printed its whole help folded into one `acp-relay: usage: ...` line; a subgroup's
    command (`otel export`) named itself `export`."""
    alone = run()
    assert alone.exit_code == USAGE and alone.stdout.startswith("Usage: acp-relay [OPTIONS] COMMAND"), alone.stdout
    assert "\n  show " in alone.stdout and "acp-relay: " not in alone.stderr
    nested = run("otel", "export", "--bogus")
    assert_diagnostic(nested, "otel export", USAGE, "no such option '--bogus'")
    assert "see `acp-relay otel export --help`" in nested.stderr


def assert_hint(r: Result) -> None:
    """A usage error with a natural next step says it on the second line (the first says what was wrong)."""
    lines = r.stderr.splitlines()
    assert len(lines) == 2 and lines[1].startswith("  hint: ") and len(lines[1]) > len("  hint: "), r.stderr


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_session_usage_error_says_what_to_do_next(
    command: str, db: Path, tmp_path: Path, fixture_db: Path
) -> None:
    """`search` with a missing database and `replay` with an ambiguous id said no hint; every error of the
    session grammar does (missing database, ambiguous prefix, no such session, an id in several connections,
    no such connection)."""
    before, after, _ = COMMANDS[command]
    ambiguous = run(
        command, "--db", str(fixture_db), *before, "sess", *[a.replace("{tmp}", str(tmp_path)) for a in after]
    )
    assert_diagnostic(ambiguous, command, USAGE, "matches several sessions")
    assert_hint(ambiguous)
    for r in (
        invoke(command, tmp_path / "none.db", tmp_path, UUID),
        invoke(command, db, tmp_path, "nope"),
        invoke(command, db, tmp_path, SHARED),
        invoke(command, db, tmp_path, "last@9"),
    ):
        assert r.exit_code == USAGE
        assert_hint(r)


@pytest.mark.parametrize(
    "args",
    [
        ["prune", "{db}", "--older-than", "1d"],
        ["otel", "export", "{db}", "--all", "--file", "-"],
        ["diff", "{db}", "a", "b"],
        ["rerun", "{db}", "last", "--", "true"],
        ["show", "{db}"],
        ["stats", "{db}"],
        ["search", "{db}", "words"],
        ["check", "{db}", "--all"],
    ],
    ids=lambda args: " ".join(a for a in args if a != "{db}"),
)
def test_a_missing_database_says_how_to_get_one(args: list[str], tmp_path: Path) -> None:
    where = args.index("{db}")
    r = run(*args[:where], "--db", str(tmp_path / "none.db"), *args[where + 1 :], input=b"")
    assert_diagnostic(r, " ".join(args[:where]), USAGE, "no database at")
    assert_hint(r)
    assert not (tmp_path / "none.db").exists()
