"""The package's import rules, read from the source with `ast` (nothing is imported).

- protocol/ and fdio.py import nothing else of the package (fdio: descriptor I/O shared by commands);
- store/ imports only protocol; render/ only protocol and store;
- cli_support.py (cli.py's option groups and stderr/stdout plumbing) imports the shared layers, never a
  command, and no command imports it;
- every other top-level module or folder (record/ is `run`, show/, replay/, stats.py, demo.py, check/,
  rerun/, diff.py, share/ (export, import, info), search.py, view/, setup/, doctor/, and any future one) is a command: it
  imports protocol, store, render, fdio and the package root, never another command; only cli.py and
  __main__.py import commands. Each one in acp_relay/ is named in COMMANDS, so that a new shared module
  cannot pass as a command by being left out;
- there is no import cycle between modules (imports inside functions count too).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers import ROOT

ENTRY = {"cli", "__main__"}
# layer -> the layers it may import besides itself ("" is the package root, which only holds the version)
LAYERS: dict[str, set[str]] = {
    "": set(),
    "protocol": set(),
    "fdio": set(),
    "store": {"protocol"},
    "render": {"protocol", "store"},
    "cli_support": {"", "protocol", "store", "render", "fdio"},
}
COMMAND_MAY_IMPORT = {"", "protocol", "store", "render", "fdio"}
COMMANDS = {
    "record",
    "show",
    "replay",
    "stats",
    "demo",
    "check",
    "rerun",
    "diff",
    "share",
    "search",
    "view",
    "setup",  # acp-relay setup: editor configs written (protocol/jsonc edits them, protocol/editors knows them)
    "doctor",  # acp-relay doctor: what the configs start, checked
}


def module_name(path: Path, src: Path, package: str) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


def imports_of(path: Path, module: str, modules: set[str]) -> list[tuple[int, str]]:
    """The package modules `path` imports (each import resolved to a module file of the package)."""
    is_pkg = path.name == "__init__.py"
    package_parts = module.split(".") if is_pkg else module.split(".")[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package_parts[: len(package_parts) - node.level + 1]
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            # `from pkg import sub` imports the submodule when there is one, else a name of pkg
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:  # `import a.b.c` of a name: the module that holds it
                target = target.rpartition(".")[0]
            if target:
                found.append((node.lineno, target))
    return found


def layer_of(module: str, package: str) -> str:
    rest = module.removeprefix(package).lstrip(".")
    return rest.split(".")[0]


def check_layout(src: Path, package: str) -> list[str]:
    """Every broken rule and every cycle under `src` (the package's folder), one line each."""
    files = {module_name(p, src, package): p for p in sorted(src.rglob("*.py"))}
    modules = set(files)
    problems: list[str] = []
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        here = layer_of(module, package)
        graph[module] = set()
        for lineno, target in imports_of(path, module, modules):
            if target != module:
                graph[module].add(target)
            there = layer_of(target, package)
            if there == here or here in ENTRY:
                continue
            allowed = LAYERS.get(here, COMMAND_MAY_IMPORT)
            if there not in allowed:
                what = "command " + there if there not in LAYERS and there not in ENTRY else there or "the root"
                problems.append(f"{path.relative_to(src.parent)}:{lineno}: {module} imports {target} ({what})")
    problems += [f"import cycle: {' -> '.join(c)}" for c in find_cycles(graph)]
    return problems


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle for each strongly connected group of modules that has one (depth-first search)."""
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return cycles


def test_the_package_keeps_its_layers() -> None:
    assert check_layout(ROOT / "acp_relay", "acp_relay") == []


def test_every_layer_and_command_is_seen() -> None:
    layers = {
        layer_of(m, "acp_relay")
        for m in (module_name(p, ROOT / "acp_relay", "acp_relay") for p in (ROOT / "acp_relay").rglob("*.py"))
    }
    assert set(LAYERS) | ENTRY | COMMANDS <= layers
    # Every top-level module or folder is classified: a new one is a command only once it is named one.
    assert layers - set(LAYERS) - ENTRY - COMMANDS == set()


def write(root: Path, files: dict[str, str]) -> Path:
    src = root / "pkg"
    for name, text in files.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text)
    for folder in [src, *[p for p in src.rglob("*") if p.is_dir()]]:
        (folder / "__init__.py").touch()
    return src


def test_the_checker_accepts_a_good_tree(tmp_path: Path) -> None:
    src = write(
        tmp_path,
        {
            "protocol/a.py": "from . import b\n",
            "protocol/b.py": "import json\n",
            "store/q.py": "from ..protocol import a\nfrom ..protocol.b import x\n",
            "render/r.py": "from ..store.q import y\n",
            "fdio.py": "import os\n",
            "show/cmd.py": "from ..render import r\nfrom .. import fdio\nfrom .other import z\n",
            "show/other.py": "",
            "stats.py": "from pkg.store import q\nfrom . import __version__\n",
            "cli.py": "def f():\n    from .show import cmd\n    from . import stats\n",
        },
    )
    assert check_layout(src, "pkg") == []


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"protocol/a.py": "from ..store import q\n", "store/q.py": ""}, "pkg.protocol.a imports pkg.store.q (store)"),
        ({"protocol/a.py": "from .. import fdio\n", "fdio.py": ""}, "pkg.protocol.a imports pkg.fdio (fdio)"),
        ({"fdio.py": "import pkg.protocol.a\n", "protocol/a.py": ""}, "pkg.fdio imports pkg.protocol.a (protocol)"),
        ({"store/q.py": "from ..render.r import x\n", "render/r.py": ""}, "pkg.store.q imports pkg.render.r (render)"),
        ({"render/r.py": "def f():\n    from ..show import cmd\n", "show/cmd.py": ""}, "(command show)"),
        (
            {"stats.py": "from .show.cmd import run\n", "show/cmd.py": ""},
            "pkg.stats imports pkg.show.cmd (command show)",
        ),
        ({"show/cmd.py": "from .. import demo\n", "demo.py": ""}, "pkg.show.cmd imports pkg.demo (command demo)"),
        ({"record/x.py": "import pkg.cli\n", "cli.py": ""}, "pkg.record.x imports pkg.cli (cli)"),
        (
            {"check/c.py": "from ..cli_support import note\n", "cli_support.py": ""},
            "pkg.check.c imports pkg.cli_support (cli_support)",
        ),
        (
            {"cli_support.py": "from .search import run\n", "search.py": ""},
            "pkg.cli_support imports pkg.search (command search)",
        ),
        ({"view/v.py": "from ..share import info\n", "share/info.py": ""}, "(command share)"),
        ({"newcmd/a.py": "from ..replay import core\n", "replay/core.py": ""}, "(command replay)"),
        (
            {"protocol/a.py": "from . import b\n", "protocol/b.py": "from .a import x\n"},
            "import cycle: pkg.protocol.a -> pkg.protocol.b -> pkg.protocol.a",
        ),
    ],
)
def test_the_checker_finds_each_broken_rule(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    problems = check_layout(write(tmp_path, files), "pkg")
    assert len(problems) == 1 and expected in problems[0], problems
