"""The README is the front door and docs/ holds the reference: the README stays short, links every page,
shows every command `acp-relay --help` lists, and no link in either leads nowhere. The examples each page
shows are run by the tests of the command they belong to (grep for `doc_page` and `doc_section`)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from helpers import ROOT, doc_page, doc_section
from support.editors import RELAY

DOCS = ROOT / "docs"
PAGES = sorted(p.name for p in DOCS.glob("*.md"))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _help(*words: str) -> str:
    done = subprocess.run([RELAY, *words, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@cache
def commands() -> tuple[tuple[str, ...], ...]:
    """Every command `acp-relay --help` lists, a group's own commands (`otel export`) in place of the group."""
    found: list[tuple[str, ...]] = []

    def walk(*path: str) -> None:
        text = _help(*path)
        listed = text.split("\nCommands:\n", 1)
        if len(listed) == 1:
            found.append(path)
            return
        for name in re.findall(r"^  (\S+)", listed[1], re.M):
            walk(*path, name)

    walk()
    return tuple(found)


def _prose(text: str) -> str:
    """The text without its fenced blocks and inline code, where a `](...)` is an example, not a link."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(text: str) -> set[str]:
    return {_slug(h) for h in re.findall(r"^#+ (.*)$", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M), re.M)}


def test_the_readme_is_a_front_door() -> None:
    lines = doc_page("README.md").count("\n")
    assert lines <= 650, f"README.md has {lines} lines: move reference text to a page under docs/"


def test_every_page_under_docs_is_linked_from_the_readme() -> None:
    linked = {t.split("#", 1)[0] for t in LINK.findall(_prose(doc_page("README.md")))}
    assert PAGES and [p for p in PAGES if f"docs/{p}" not in linked] == []


@pytest.mark.parametrize("page", ["README.md", *PAGES])
def test_every_relative_link_leads_somewhere(page: str) -> None:
    """A link names a file that exists and, with `#anchor`, a heading of that file (docs/view.png included)."""
    base = ROOT if page == "README.md" else DOCS
    broken = []
    for target in LINK.findall(_prose(doc_page(page))):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        file = (base / path).resolve() if path else base / page
        missing = not file.is_file()
        if missing or (anchor and file.suffix == ".md" and anchor not in _anchors(file.read_text())):
            broken.append(target)
    assert broken == []


def test_the_link_checker_sees_a_broken_link() -> None:
    """What the test above reads: links in prose, with their anchors; code is left alone."""
    text = "[a](docs/run.md#nowhere) and `[b](x.md)`\n```\n[c](y.md)\n```\n# One `grammar`, two\n"
    assert LINK.findall(_prose(text)) == ["docs/run.md#nowhere"]
    assert _anchors(text) == {"one-grammar-two"}
    assert _slug("`acp-relay otel export` and `run --otlp`") == "acp-relay-otel-export-and-run---otlp"


def test_the_readme_and_docs_name_every_command() -> None:
    """`acp-relay --help` has at least the 21 commands the issue counted; each has a page and a README example."""
    readme_code = "\n".join(re.findall(r"^```\w*\n(.*?)^```", doc_page("README.md"), re.S | re.M))
    assert len(commands()) >= 21, commands()
    for words in commands():
        assert (DOCS / f"{words[0]}.md").is_file(), words
        pattern = rf"^(\$ )?acp-relay {re.escape(' '.join(words))}( |$)"
        assert re.search(pattern, readme_code, re.M), f"no example of `acp-relay {' '.join(words)}` in README.md"


def _examples() -> list[str]:
    block = doc_section("README.md", "## Examples").split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.startswith("acp-relay ")]


def _name(line: str) -> str:
    return line.split("#", 1)[0].strip()


@pytest.mark.parametrize("line", _examples(), ids=_name)
def test_each_readme_example_names_real_options(line: str) -> None:
    """Each line of the README's examples, with --help put in before any `--` (so nothing starts): click
    refuses an unknown command or option (exit 2) before --help is looked at."""
    words = shlex.split(line, comments=True)[1:]
    end = next((i for i, w in enumerate(words) if w in ("|", ">", "<", "&", ";")), len(words))
    words = words[:end]
    cut = words.index("--") if "--" in words else len(words)
    done = subprocess.run([RELAY, *words[:cut], "--help", *words[cut:]], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("Usage: acp-relay "), (line, done.stderr)


def test_the_example_check_refuses_an_unknown_option() -> None:
    done = subprocess.run([RELAY, "show", "last", "--transcipt", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--transcipt" in done.stderr


def test_bash_completion_as_the_readme_loads_it(tmp_path: Path) -> None:
    """The README's bash line, sourced into bash with the installed acp-relay on PATH, completes commands,
    a group's commands, options and an option's choices."""
    line = next(x for x in doc_section("README.md", "## Shell completion").splitlines() if "bash_source" in x)
    load = line.split("#", 1)[0].strip()
    assert load == 'eval "$(_ACP_RELAY_COMPLETE=bash_source acp-relay)"', load
    script = (
        load
        + '\ncomplete_words() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); '
        + '_acp_relay_completion acp-relay; echo "${COMPREPLY[*]}"; }\n'
        + "complete_words acp-relay rer\ncomplete_words acp-relay otel ''\n"
        + "complete_words acp-relay check --min-sev\ncomplete_words acp-relay check --min-severity ''\n"
    )
    env = {**os.environ, "PATH": f"{Path(RELAY).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert done.stdout.splitlines() == ["rerun", "export", "--min-severity", "info warning error"], done.stderr


def _shell_line(shell: str) -> str:
    """The README's line that loads the completion for `shell`, without its comment."""
    section = doc_section("README.md", "## Shell completion")
    return next(x for x in section.splitlines() if f"={shell}_source " in x).split("#", 1)[0].strip()


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_get_their_scripts(shell: str) -> None:
    """The scripts the README's zsh and fish lines load hand back to acp-relay to complete."""
    assert f"_ACP_RELAY_COMPLETE={shell}_source acp-relay" in _shell_line(shell)
    env = {**os.environ, "_ACP_RELAY_COMPLETE": f"{shell}_source"}
    done = subprocess.run([RELAY], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0 and f"_ACP_RELAY_COMPLETE={shell}_complete" in done.stdout, done.stdout


def test_zsh_completion_as_the_readme_loads_it(tmp_path: Path) -> None:
    """In zsh after compinit (compadd and _describe, which only run inside a completion, print instead)."""
    if not shutil.which("zsh"):
        pytest.skip("zsh is not installed")
    script = (
        f"autoload -Uz compinit && compinit -u -d {tmp_path}/zcompdump\n{_shell_line('zsh')}\n"
        + '_describe() { print -l -- "${completions_with_descriptions[@]%%:*}"; }\n'
        + 'compadd() { print -l -- "${completions[@]}"; }\n'
        + "words=(acp-relay rer); CURRENT=2; _acp_relay_completion\n"
        + "words=(acp-relay check --min-severity ''); CURRENT=4; _acp_relay_completion\n"
    )
    env = {**os.environ, "PATH": f"{Path(RELAY).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["zsh", "-f", "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert done.stdout.splitlines() == ["rerun", "info", "warning", "error"], done.stderr


def test_fish_completion_as_the_readme_loads_it(tmp_path: Path) -> None:
    """The README's fish line writes the script where fish looks; fish's own `complete -C` then completes."""
    if not shutil.which("fish"):
        pytest.skip("fish is not installed")
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / ".config"),
        "PATH": f"{Path(RELAY).parent}{os.pathsep}{os.environ['PATH']}",
    }
    (tmp_path / ".config" / "fish" / "completions").mkdir(parents=True)
    wrote = subprocess.run(["sh", "-c", _shell_line("fish")], env=env, capture_output=True, timeout=60)
    assert wrote.returncode == 0, wrote.stderr
    script = 'complete -C "acp-relay rer"; complete -C "acp-relay check --min-severity "'
    done = subprocess.run(["fish", "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert [x.split("\t")[0] for x in done.stdout.splitlines()] == ["rerun", "error", "info", "warning"], done


# Commands whose README example reads the database (or writes a file of its own) and starts no agent.
READERS = {"show", "stats", "check", "info", "search", "view", "export", "prune", "recover"}


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("readme") / "demo.db"
    done = subprocess.run([RELAY, "demo", "--db", str(db)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return db


@pytest.mark.parametrize("line", [x for x in _examples() if x.split()[1] in READERS], ids=_name)
def test_the_readme_examples_that_only_read_run_on_the_demo(line: str, demo_db: Path, tmp_path: Path) -> None:
    """Run as written on the demo's database, in a fresh folder for what they write: exit 0, or 1 where 1 is the
    answer (`search` finds nothing, `check` finds an error); never a usage error."""
    words = shlex.split(line, comments=True)[1:]
    env = {**os.environ, "ACP_RELAY_DB": str(demo_db)}
    done = subprocess.run([RELAY, *words], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    allowed = {0, 1} if words[0] in ("search", "check") else {0}
    assert done.returncode in allowed, (line, done.returncode, done.stderr)
    assert done.stdout or words[0] in ("search", "view", "export"), line
    if "-o" in words:
        assert (tmp_path / words[words.index("-o") + 1]).stat().st_size > 0, line


def test_the_python_api_page_example_runs_on_the_demo(demo_db: Path, tmp_path: Path) -> None:
    """docs/python-api.md's example, as written, in a folder holding the demo's database as demo.db: it
    prints the demo session's figures (6 frames of updates among them, one turn, no finding)."""
    [code] = re.findall(r"```python\n(.*?)```", doc_page("python-api.md"), re.S)
    shutil.copy(demo_db, tmp_path / "demo.db")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    first, variants, checked = done.stdout.splitlines()
    assert re.fullmatch(r"\d+ frames, 1 turn\(s\)", first), first
    assert "'agent_message_chunk': 4" in variants and "'tool_call': 1" in variants, variants
    assert re.fullmatch(r"0 finding\(s\) in \d+ frames", checked), checked
