"""`acp-relay setup` as a user runs it, on a fake HOME: real-looking Zed and JetBrains configs go in and come
back out byte for byte, and the command it writes records a session when started with an editor's bare PATH."""

from __future__ import annotations

import os
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import doc_page, doc_section, rows
from peers.scenario import NOTES, SDK_AGENT, assert_scenario, run_client
from support.editors import RELAY, SAMPLES, ZED_SETTINGS, acp, backups, config_path, entry, home_env

AGENT = sys.executable  # an absolute agent command that exists


def is_subsequence(small: str, big: str) -> bool:
    it = iter(big)
    return all(ch in it for ch in small)


def check_line_breaks(data: bytes, crlf: bool, bom: bool) -> None:
    assert data.startswith("\ufeff".encode()) == bom
    if crlf:
        assert b"\n" not in data.replace(b"\r\n", b""), "a bare LF in a CRLF file"


@pytest.mark.parametrize("sample", SAMPLES)
def test_setup_twice_wrap_unwrap_and_undo_give_back_the_file_byte_for_byte(tmp_path: Path, sample: str) -> None:
    editor, text, existing = SAMPLES[sample]
    home = tmp_path / "home"
    path = config_path(home, editor)
    path.parent.mkdir(parents=True)
    original = text.encode("utf-8")
    path.write_bytes(original)
    os.chmod(path, 0o644)
    crlf, bom = "\r\n" in text, text.startswith("\ufeff")
    db = str(home / ".local/state/acp-relay/relay.db")

    first = acp(home, "setup", editor, "--name", "Mine ✓", "--", AGENT, "--acp")
    assert first.returncode == 0, first.stderr
    after_setup = path.read_bytes()
    assert '"Mine ✓": {' in first.stdout
    assert first.stdout.startswith(f"--- {path} (before)\n+++ {path} (after)\n@@ ")
    assert is_subsequence(text, after_setup.decode()), "setup only adds: every byte that was there is still there"
    if "\t" in text:  # the diff shows the file's own indentation
        assert '+\t\t"Mine ✓": {\n' in first.stdout
    check_line_breaks(after_setup, crlf, bom)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    mine = entry(path, "Mine ✓")
    assert mine["command"] == RELAY and os.path.isabs(RELAY)
    assert mine["args"] == ["run", "--db", db, "--label", "Mine ✓", "--", AGENT, "--acp"]
    assert ("type" in mine) == (editor == "zed")
    [backup] = backups(path)
    assert backup.read_bytes() == original and stat.S_IMODE(backup.stat().st_mode) == 0o600

    again = acp(home, "setup", editor, "--name", "Mine ✓", "--", AGENT, "--acp")
    assert (again.returncode, again.stdout) == (0, f"nothing to change in {path}\n")
    assert path.read_bytes() == after_setup and len(backups(path)) == 1

    before_wrap = entry(path, existing)
    wrap = acp(home, "setup", editor, "--wrap", existing)
    assert wrap.returncode == 0, wrap.stderr
    after_wrap = path.read_bytes()
    check_line_breaks(after_wrap, crlf, bom)
    wrapped = entry(path, existing)
    assert wrapped["command"] == RELAY
    agent = [before_wrap["command"], *before_wrap["args"]]
    assert wrapped["args"] == ["run", "--db", db, "--label", existing, "--", *agent]
    assert wrapped.get("env") == before_wrap.get("env")
    assert acp(home, "setup", editor, "--wrap", existing).stdout == f"nothing to change in {path}\n"

    unwrap = acp(home, "setup", editor, "--unwrap", existing)
    assert unwrap.returncode == 0, unwrap.stderr
    assert path.read_bytes() == after_setup, "unwrap is the exact inverse of wrap"
    assert acp(home, "setup", editor, "--unwrap", existing).stdout == f"nothing to change in {path}\n"

    for expected in (after_wrap, after_setup, original):  # each undo takes back one change
        undo = acp(home, "setup", editor, "--undo")
        assert undo.returncode == 0, undo.stderr
        assert path.read_bytes() == expected
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    nothing = acp(home, "setup", editor, "--undo")
    assert nothing.returncode == 2 and nothing.stderr == f"acp-relay: setup: setup has no change of {path} to undo\n"


def test_a_file_it_cannot_read_is_left_alone_and_the_error_says_where(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = config_path(home, "zed")
    path.parent.mkdir(parents=True)
    broken = ZED_SETTINGS.replace('"ui_font_size": 16,', '"ui_font_size": 16')
    path.write_text(broken)
    proc = acp(home, "setup", "zed", "--", AGENT)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        f"acp-relay: setup: {path}:15:3: ',' or '}}' expected after a member\n"
        "  hint: fix the file by hand; nothing was written\n"
    )
    assert path.read_text() == broken and backups(path) == []
    latin1 = b'{"agent_servers": {"caf\xe9": {}}}'
    path.write_bytes(latin1)
    proc = acp(home, "setup", "zed", "--wrap", "x")
    assert proc.returncode == 2 and f"{path}:1:24: not UTF-8 text" in proc.stderr
    assert path.read_bytes() == latin1


def test_dry_run_prints_the_diff_and_writes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = config_path(home, "jetbrains")
    path.parent.mkdir(parents=True)
    path.write_text(SAMPLES["jetbrains"][1])
    proc = acp(home, "setup", "jetbrains", "--wrap", "Claude Code", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert '-            "command": "/usr/local/bin/claude-code-acp",' in proc.stdout
    assert f'+            "command": "{RELAY}",' in proc.stdout
    assert proc.stdout.endswith("dry run: nothing written\n")
    assert path.read_text() == SAMPLES["jetbrains"][1] and backups(path) == []


def test_undo_refuses_a_file_changed_since_and_force_undoes_anyway(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = config_path(home, "zed")
    path.parent.mkdir(parents=True)
    path.write_text(ZED_SETTINGS)
    assert acp(home, "setup", "zed", "--wrap", "Claude Code").returncode == 0
    path.write_text(path.read_text() + "// edited by hand\n")
    proc = acp(home, "setup", "zed", "--undo")
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"acp-relay: setup: {path} changed since setup wrote it; not undoing\n  hint: ")
    assert path.read_text().endswith("// edited by hand\n")
    assert acp(home, "setup", "zed", "--undo", "--force").returncode == 0
    assert path.read_text() == ZED_SETTINGS


def test_a_missing_config_is_created_and_undo_removes_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = config_path(home, "jetbrains")
    proc = acp(home, "setup", "jetbrains", "--", AGENT, "--acp")
    assert proc.returncode == 0, proc.stderr
    assert "(backup" not in proc.stdout
    assert entry(path, f"{Path(AGENT).name} (recorded)")["command"] == RELAY
    assert path.read_text().startswith('{\n  "agent_servers": {\n')
    assert acp(home, "setup", "jetbrains", "--undo").returncode == 0
    assert not path.exists()


def test_zed_config_dir_and_a_symlinked_config_that_stays_a_link(tmp_path: Path) -> None:
    home = tmp_path / "home"
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "zed.json").write_text(ZED_SETTINGS)
    zed_dir = tmp_path / "zedcfg"
    zed_dir.mkdir()
    (zed_dir / "settings.json").symlink_to(dotfiles / "zed.json")
    env = home_env(home, ZED_CONFIG_DIR=str(zed_dir))
    proc = acp(home, "setup", "zed", "--wrap", "Claude Code", env=env)
    assert proc.returncode == 0, proc.stderr
    assert (zed_dir / "settings.json").is_symlink()
    assert entry(dotfiles / "zed.json", "Claude Code")["command"] == RELAY
    assert [p.name for p in backups(dotfiles / "zed.json")] != []
    assert acp(home, "setup", "zed", "--undo", env=env).returncode == 0
    assert (dotfiles / "zed.json").read_text() == ZED_SETTINGS and (zed_dir / "settings.json").is_symlink()


def test_list_shows_each_config_and_which_entries_are_recorded(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = config_path(home, "zed")
    path.parent.mkdir(parents=True)
    path.write_text(ZED_SETTINGS)
    assert acp(home, "setup", "zed", "--name", "Mine", "--", AGENT).returncode == 0
    proc = acp(home, "setup", "--list")
    db = home / ".local/state/acp-relay/relay.db"
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (
        f"zed  {path}\n"
        '  "Claude Code"  not recorded  npx @zed-industries/claude-code-acp\n'
        f"  \"Mine\"  recorded  label 'Mine', db {db}: {AGENT}\n"
        f"jetbrains  {config_path(home, 'jetbrains')}  (no file)\n"
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["setup"], "name an editor"),
        (["setup", "vim", "--", "x"], "unknown editor 'vim'; name an editor: zed, jetbrains, neovim, emacs"),
        (["doctor", "neovim"], "doctor reads the configs of: zed, jetbrains"),
        (["setup", "zed"], "give exactly one of"),
        (["setup", "zed", "--wrap", "Nope"], 'no agent entry "Nope" (entries: "Claude Code")'),
        (["setup", "neovim", "--undo"], "config is code"),
    ],
)
def test_usage_errors_exit_2_with_one_line(tmp_path: Path, args: list[str], says: str) -> None:
    home = tmp_path / "home"
    path = config_path(home, "zed")
    path.parent.mkdir(parents=True)
    path.write_text(ZED_SETTINGS)
    proc = acp(home, *args)
    assert proc.returncode == 2 and proc.stderr.startswith(f"acp-relay: {args[0]}: ") and says in proc.stderr
    assert "Traceback" not in proc.stderr
    assert path.read_text() == ZED_SETTINGS


def test_neovim_and_emacs_get_a_snippet_with_absolute_paths(tmp_path: Path) -> None:
    home = tmp_path / "home"
    db = str(home / ".local/state/acp-relay/relay.db")
    nvim = acp(home, "setup", "neovim", "--name", "My Agent", "--", AGENT, "--acp")
    assert nvim.returncode == 0, nvim.stderr
    argv = [RELAY, "run", "--db", db, "--label", "My Agent", "--", AGENT, "--acp"]
    assert "commands = { default = { " + ", ".join(f'"{a}"' for a in argv) + " } }," in nvim.stdout
    assert "my_agent = function()" in nvim.stdout
    emacs = acp(home, "setup", "emacs", "--name", "My Agent", "--", AGENT, "--acp")
    assert emacs.returncode == 0, emacs.stderr
    assert "(defconst acp-relay-my-agent-command\n  '(" + "\n        ".join(f'"{a}"' for a in argv) + "))" in (
        emacs.stdout
    )
    assert not (home / ".config").exists()


def test_the_written_command_records_a_session_with_an_editors_bare_environment(tmp_path: Path) -> None:
    """The Python SDK client plays the editor: it starts the entry's command exactly as written, under
    `env -i PATH=/usr/bin:/bin HOME=$FAKE` (a desktop launcher's environment), and the relay records it."""
    home = tmp_path / "home"
    proc = acp(home, "setup", "zed", "--name", "SDK agent", "--", sys.executable, str(SDK_AGENT))
    assert proc.returncode == 0, proc.stderr
    written = entry(config_path(home, "zed"), "SDK agent")
    command = ["env", "-i", "PATH=/usr/bin:/bin", f"HOME={home}", written["command"], *written["args"]]
    notes = tmp_path / "notes.txt"
    notes.write_text(NOTES)
    result = run_client([str(c) for c in command], notes, tmp_path)
    assert_scenario(result, NOTES)
    db = home / ".local/state/acp-relay/relay.db"
    [(label, status, exit_code, frames)] = rows(db, "SELECT label, status, exit_code, frames FROM connections")
    assert (label, status, exit_code) == ("SDK agent", "ended", 0) and frames > 10
    assert rows(db, "SELECT session_id FROM sessions") == [("sess-1",)]
    doctor = acp(home, "doctor", "zed")
    assert doctor.returncode == 0, doctor.stdout
    assert re.search(
        rf'^ok    zed "SDK agent": last connection 1 at [-0-9 :]+: ended, exit 0, {frames} frames$', doctor.stdout, re.M
    )


def readme_blocks(after: str) -> tuple[str, str]:
    """The first ```jsonc and ```console blocks after `after` in the setup page (docs/setup.md)."""
    readme = doc_page("setup.md")
    found = []
    for fence in ("```jsonc\n", "```console\n"):
        start = readme.index(fence, readme.index(after)) + len(fence)
        found.append(readme[start : readme.index("```\n", start)])
    return found[0], found[1]


def run_session(session: str, home: Path, env: dict[str, str]) -> str:
    """Each `$ acp-relay ...` line of `session` run, with what it printed; paths shown as the README does."""
    shown = ""
    for line in re.findall(r"^\$ (acp-relay .*)$", session, re.M):
        out = subprocess.run(
            [RELAY, *shlex.split(line)[1:]], env=env, capture_output=True, text=True, encoding="utf-8", timeout=120
        )
        shown += f"$ {line}\n{out.stdout}{out.stderr}"
    shown = shown.replace(RELAY, "/home/me/.local/bin/acp-relay").replace(str(home), "/home/me")
    return re.sub(r"acp-relay-\d{8}T\d{6}(-\d+)?\.bak", "acp-relay-20261201T093000.bak", shown)


def test_the_readme_setup_example(tmp_path: Path) -> None:
    """The setup page (docs/setup.md) leads with this session: run on a fake HOME, paths shown as /home/me."""
    home = tmp_path / "me"
    bin_dir = home / ".local/bin"
    bin_dir.mkdir(parents=True)
    for name in ("my-agent", "claude-code-acp"):
        (bin_dir / name).write_text("#!/bin/sh\nexec cat\n")
        os.chmod(bin_dir / name, 0o755)
    path = config_path(home, "zed")
    path.parent.mkdir(parents=True)
    settings, session = readme_blocks("<!-- setup example -->")
    path.write_text(settings)
    assert run_session(session, home, home_env(home, PATH=f"{bin_dir}:{os.environ['PATH']}")) == session


def test_the_readmes_hand_edit_snippets_use_absolute_paths() -> None:
    """An editor started from a desktop menu has PATH=/usr/bin:/bin: a bare `acp-relay` does not start there."""
    section = doc_section("README.md", "### Editing the config by hand")
    commands = re.findall(r'"command": "([^"]*)"', section)
    lists = re.findall(r'default = \{ "([^"]*)"|`\("([^"]*)"', section)
    firsts = commands + [a or b for a, b in lists]
    assert len(firsts) == 4 and all(c.startswith("/") for c in firsts), firsts
    for snippet in re.findall(r'"--", "([^"]*)"', section):
        assert snippet.startswith("/"), snippet


def test_an_argument_that_is_not_utf8_is_refused_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc = subprocess.run(
        [RELAY.encode(), b"setup", b"jetbrains", b"--", b"/bin/echo", b"caf\xe9"],
        env=home_env(home),
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr == b"acp-relay: setup: cannot write '\\udce9' into a UTF-8 config file\n"
    assert not config_path(home, "jetbrains").exists()


def test_wrapping_an_entry_no_process_can_start_with_says_each_fault_in_a_line(tmp_path: Path) -> None:
    """Setup keeps the user's env as it is, but says what of it no process can be given (issue 30 item 12)."""
    home = tmp_path / "home"
    path = config_path(home, "zed")
    path.parent.mkdir(parents=True)
    env = {"A=B": "1", "OK": "fine", "N": ["x"], "V": "a\u0000b"}
    path.write_text(__import__("json").dumps({"agent_servers": {"J": {"command": AGENT, "env": env}}}))
    proc = acp(home, "setup", "zed", "--wrap", "J")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    said = [line for line in proc.stderr.splitlines() if 'entry "J"' in line]
    assert [line.split('entry "J": ', 1)[1] for line in said] == [
        'env name "A=B" cannot be set in a process environment (empty, or holds = or NUL)',
        'env "N" is a list, not a string',
        'env "V" holds a NUL byte',
    ]
    assert '"A=B": "1"' in path.read_text()  # kept: the file is the user's
