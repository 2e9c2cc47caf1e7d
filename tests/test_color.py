"""--color auto|always|never on every command that prints for a person (the registry walked, so a command
added later is covered), NO_COLOR, and diff colored as `git diff` is: removed lines red, added green, the
`---`/`+++` lines bold, `@@ ... @@` cyan; color only from our own codes, never from a recording."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from support.cli import run, run_on_terminal
from support.databases import SHARED, shared_ids

from acp_relay.cli import cli

# What prints no report for a person on stdout, and why: every other command must take --color.
NOT_FOR_PEOPLE = {
    "run": "stdout is the agent's protocol",
    "serve": "a listener: nothing on stdout but the agents' traffic is recorded",
    "proxy": "a listener: nothing on stdout",
    "replay": "stdout is the recorded protocol",
    "export": "stdout is a document for tools (ndjson, acp-devtools)",
    "view": "writes an HTML page; stdout is its path",
    "otel follow": "hidden: started by `run --otlp`, prints nothing",
}
SGR = re.compile(r"\x1b\[[0-9;]*m")


def _commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    """Every command of the registry, subcommands of a group (otel export) by their full name."""
    ctx = click.Context(group)
    out = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        if isinstance(command, click.Group):
            out += _commands(command, f"{prefix}{name} ")
        else:
            out.append((prefix + name, command))
    return out


FOR_PEOPLE = [name for name, _ in _commands(cli) if name not in NOT_FOR_PEOPLE]


def test_the_exempt_commands_exist() -> None:
    """A command renamed or removed leaves no stale exemption behind."""
    assert set(NOT_FOR_PEOPLE) <= {name for name, _ in _commands(cli)}


@pytest.mark.parametrize("name", FOR_PEOPLE)
def test_every_command_for_people_takes_color(name: str) -> None:
    """The one option (cli_support.color_option): its three values, auto by default, NO_COLOR in its help."""
    command = dict(_commands(cli))[name]
    (param,) = [p for p in command.params if p.name == "color"]
    assert isinstance(param.type, click.Choice) and list(param.type.choices) == ["auto", "always", "never"]
    assert param.default == "auto" and "NO_COLOR" in (getattr(param, "help", "") or "")
    for value in ("auto", "always", "never"):
        r = run(*name.split(), "--color", value, "--help")
        assert r.exit_code == 0 and "--color" in r.stdout, (value, r.stderr)
    bad = run(*name.split(), "--color", "sometimes")  # checked before anything runs (before missing arguments)
    assert bad.exit_code == 2 and "invalid value for '--color'" in bad.stderr, bad.stderr


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_ids(tmp_path_factory.mktemp("color") / "shared.db")


def _diff(db: Path, *args: str) -> str:
    r = run("diff", "--db", str(db), f"{SHARED}@1", f"{SHARED}@2", *args)
    assert r.exit_code == 1, r.stderr
    return r.stdout


def test_diff_paints_what_changed_as_git_does(db: Path) -> None:
    lines = _diff(db, "--color", "always").splitlines()
    removed = [line for line in lines if line.startswith("\x1b[31m-")]
    added = [line for line in lines if line.startswith("\x1b[32m+")]
    assert removed and added, lines
    assert all(line.endswith("\x1b[0m") for line in removed + added)
    assert any(line.startswith("\x1b[1m--- ") for line in lines) and any(
        line.startswith("\x1b[1m+++ ") for line in lines
    )
    assert any(line.startswith("\x1b[36m@@ ") for line in lines), lines
    context = [line for line in lines if line.startswith(" ")]  # context lines stay plain, as in git
    assert context and not any(SGR.search(line) for line in context)
    plain = _diff(db, "--color", "never")
    assert "\x1b" not in plain and SGR.sub("", "\n".join(lines)) + "\n" == plain  # the same text either way


def test_no_color_when_piped_or_asked_not_to(db: Path) -> None:
    """auto: CliRunner's stdout is no terminal, so no command paints, NO_COLOR or not."""
    for args in (["diff", f"{SHARED}@1", f"{SHARED}@2"], ["stats", "last"], ["info", "last"], ["show", "last"]):
        for env in ({}, {"NO_COLOR": "1"}):
            r = run(*args, "--db", str(db), env=env)
            assert r.exit_code in (0, 1) and "\x1b" not in r.stdout, (args, env)
        assert "\x1b" not in run(*args, "--db", str(db), "--color", "never").stdout


def test_auto_paints_a_terminal_unless_no_color(db: Path) -> None:
    for args in (["diff", f"{SHARED}@1", f"{SHARED}@2"], ["stats", "last"], ["info", "last"]):
        status, out = run_on_terminal(*args, "--db", str(db), columns=160)
        assert status in (0, 1) and SGR.search(out), (args, out)
        status, out = run_on_terminal(*args, "--db", str(db), columns=160, env={"NO_COLOR": "1"})
        assert status in (0, 1) and "\x1b" not in out, (args, out)
        status, out = run_on_terminal(*args, "--db", str(db), "--color", "never", columns=160)
        assert "\x1b" not in out, (args, out)


def test_stats_and_info_headings_only_in_color(db: Path) -> None:
    stats = run("stats", "last", "--db", str(db), "--color", "always").stdout
    assert "\x1b[1mMETHOD" in stats
    info = run("info", "last", "--db", str(db), "--color", "always").stdout
    assert "\x1b[1mCAPABILITY" in info


def test_recorded_escapes_never_ride_inside_our_colors(tmp_path: Path) -> None:
    """A session whose text holds an SGR sequence, an OSC and a C1 CSI, diffed in color: the only escape
    sequences on stdout are the diff's own codes; the recorded ones are removed or shown as text."""
    from support.databases import one_turn

    from acp_relay.store import db as dbmod
    from acp_relay.store.scripted import ConnectionWriter

    path = tmp_path / "evil.db"
    conn = dbmod.connect(path)
    for sid, words in (("e1", "plain words"), ("e2", "\x1b[32mgreen\x1b[0m \x1b]52;c;eA==\x07 \x9b31m red")):
        w = ConnectionWriter(conn, started_at=1_767_225_600.0, argv=["agent"])
        for i, (direction, line) in enumerate(one_turn(sid, words)):
            w.line(direction, line, 0.01 * (i + 1))
        w.close(ended_mono=1)
    conn.close()
    out = run("diff", "--db", str(path), "e1", "e2", "--color", "always").stdout
    assert "\x1b[32m+agent: green" in out and "\\x9b31m red" in out, out
    assert "\x07" not in out and "\x9b" not in out
    ours = {"\x1b[1m", "\x1b[31m", "\x1b[32m", "\x1b[36m", "\x1b[0m"}
    assert set(re.findall(r"\x1b\[[0-9;]*m", out)) <= ours and out.count("\x1b") == len(SGR.findall(out))
    plain = run("diff", "--db", str(path), "e1", "e2", "--color", "never").stdout
    added = [line for line in plain.splitlines() if line.startswith("+") and not line.startswith("+++ ")]
    assert added and out.count("\x1b[32m") == len(added)  # one green per added line: none from the recording


def test_each_line_of_a_layer_has_its_kind() -> None:
    """diff's colors come from the kind each layer gives a line where it makes it (protocol/diff), not from
    the line's first characters: a removed line, an added one, a hunk header, a slower timing row."""
    from test_diff_engine import _session

    from acp_relay.protocol.diff import compare
    from acp_relay.protocol.diff.compare import ADDED, HEADER, HUNK, PLAIN, REMOVED, SLOWER

    a, b = _session("hello world"), _session("hello there", stop="refusal", slow=0.5)
    layers = {x.name: x for x in compare(a, b, max_slowdown=2)}
    for layer in layers.values():
        assert len(layer.kinds) == len(layer.lines), layer.name
    conv = dict(zip(layers["conversation"].lines, layers["conversation"].kinds, strict=True))
    assert conv["-agent: hello world"] == REMOVED and conv["+agent: hello there"] == ADDED
    assert conv["+stop: refusal"] == ADDED and conv[" user: hi"] == PLAIN
    assert [k for k in conv.values() if k in (HEADER, HUNK)] == [HEADER, HEADER, HUNK]
    timing = dict(zip(layers["timing"].lines, layers["timing"].kinds, strict=True))
    slower = [line for line, k in timing.items() if k == SLOWER]
    assert slower and slower == [line for line in timing if line.endswith("slower than x2")]
    assert any(line.startswith("turn 1 duration") for line in slower)
