"""The rerun->diff CI recipe (docs/ci.md), run as written against an agent that makes up a random session id on
every `session/new` (as real agents do), so no step of the recipe can lean on ids repeating.

The recipe's text is read from docs/ci.md. Its two steps that need a person are played by programs: the
editor talking to `acp-relay run` is the SDK client, and `my-agent`, `my-agent-released` and `./my-agent`
are the SDK test agent with SDK_AGENT_RANDOM_IDS=1 (`./my-agent` with SDK_AGENT_VARIANT when the test wants a
changed agent). `acp-relay` on PATH is this checkout's.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, doc_section

PEERS = ROOT / "tests" / "peers"


def recipe_blocks() -> list[str]:
    """The sh blocks of docs/ci.md's "Catch behaviour changes with rerun and diff" section, in order."""
    section = doc_section("ci.md", "## Catch behaviour changes with rerun and diff")
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    assert len(blocks) == 2, blocks
    return blocks


def _script(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def _workplace(tmp_path: Path, variant: bool) -> tuple[Path, dict[str, str]]:
    """A project folder (the recipe's $PWD) with the agents and `acp-relay` it names on PATH."""
    project = tmp_path / "project"
    (project / "tests" / "acp" / "workspace").mkdir(parents=True)
    (project / "tests" / "acp" / "workspace" / "notes.txt").write_text("some notes\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    agent = f'SDK_AGENT_RANDOM_IDS=1 exec "{sys.executable}" "{PEERS / "sdk_agent.py"}" "$@"\n'
    _script(bin_dir / "acp-relay", f'exec "{sys.executable}" -m acp_relay "$@"\n')
    _script(bin_dir / "my-agent", agent)
    _script(bin_dir / "my-agent-released", agent)
    _script(project / "my-agent", ("export SDK_AGENT_VARIANT=1\n" if variant else "") + agent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACP_RELAY", "SDK_AGENT"))}
    env |= {
        "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
        "RUNNER_TEMP": str(tmp_path),
        "GITHUB_SHA": "0123abc",
        "PWD": str(project),
    }
    return project, env


def _as_the_editor(script: str, project: Path) -> str:
    """The recipe's `acp-relay run ... -- my-agent --acp` line with the SDK client as the person's editor."""
    notes = project / "tests" / "acp" / "workspace" / "notes.txt"
    client = f'"{sys.executable}" "{PEERS / "sdk_client.py"}" --file "{notes}" -- '
    return re.sub(r"^acp-relay run ", lambda m: client + m.group(0), script, flags=re.M)


def _sh(script: str, project: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", script], cwd=project, env=env, capture_output=True, text=True, timeout=300)


def _differing_layers(stdout: str) -> set[str]:
    """The layers diff's verdict line names (`...: differ in conversation, timing`), none for `...: same`."""
    (verdict,) = [line for line in stdout.splitlines() if line.startswith("A ") and "  B " in line]
    if ": differ in " not in verdict:
        assert verdict.endswith(": same") or ": same " in verdict, verdict
        return set()
    return set(verdict.split(": differ in ", 1)[1].split(", "))


@pytest.mark.parametrize("changed", [False, True], ids=["same-agent", "changed-agent"])
def test_the_readme_ci_recipe_works_on_an_agent_with_random_session_ids(tmp_path: Path, changed: bool) -> None:
    once, ci = recipe_blocks()
    project, env = _workplace(tmp_path, variant=changed)
    done = _sh("set -eu\n" + _as_the_editor(once, project), project, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (project / "tests" / "acp" / "baseline.db").exists()
    run = _sh(ci, project, env)
    out = run.stdout + run.stderr
    assert "Traceback" not in out
    # The verdict is read from the layers diff names, never from the clock: `--max-slowdown 3` compares two
    # runs' latencies, which a loaded machine stretches past x3 (seen: session/new 0.6 ms against 3.0 ms, a
    # turn 5 ms against 56 ms), so timing may differ in either case; no other layer may but the changed one.
    differing = _differing_layers(run.stdout)
    assert differing - {"timing"} == ({"conversation"} if changed else set()), out
    assert run.returncode == (1 if differing else 0), out
    if changed:
        assert "+agent: Hello from the changed agent." in run.stdout, out  # diff shows the changed answer
