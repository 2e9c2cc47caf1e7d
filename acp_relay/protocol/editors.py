"""What acp-relay knows of editors' agent configs: where each file is, how an agent entry looks, and how
to tell an entry that `acp-relay run` wraps (with its options and the agent after `--`) from one it does not.

Pure (paths come from an environment mapping, entries from a parsed JSONC tree): `setup` writes with it and
`doctor` reads with it, and neither may import the other.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from .basedirs import needed_base_dir
from .jsonc import Node

SERVERS_KEY = "agent_servers"
RELAY_NAME = "acp-relay"
# The PATH a desktop session hands to an editor started from its menu (no shell profile read): what a bare
# command name in an editor's config has to resolve with.
DESKTOP_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Editor:
    key: str
    title: str
    config: str  # "file": a JSON-with-comments file we edit; "snippet": the config is code, we print it
    entry_type: str | None = None  # zed's agent entries say "type": "custom"

    def config_path(self, env: Mapping[str, str]) -> str | None:
        """The editor's agent config file, from the environment the way the editor finds it."""
        if self.key == "zed":
            if env.get("ZED_CONFIG_DIR"):
                return os.path.join(env["ZED_CONFIG_DIR"], "settings.json")
            config = needed_base_dir(env, "XDG_CONFIG_HOME", ".config", "Zed's settings")
            return os.path.join(config, "zed", "settings.json")
        if self.key == "jetbrains":
            return needed_base_dir(env, None, ".jetbrains/acp.json", "JetBrains' acp.json")
        return None


EDITORS: dict[str, Editor] = {
    "zed": Editor("zed", "Zed", "file", "custom"),
    "jetbrains": Editor("jetbrains", "JetBrains", "file"),
    "neovim": Editor("neovim", "Neovim (CodeCompanion)", "snippet"),
    "emacs": Editor("emacs", "Emacs (agent-shell)", "snippet"),
}
FILE_EDITORS = [e for e in EDITORS.values() if e.config == "file"]


@dataclass(frozen=True)
class Entry:
    """One member of agent_servers, as far as starting a process goes."""

    name: str
    node: Node
    command: str | None
    args: list[str] | None  # None: no args, or args that are not all strings
    env: dict[str, str] = field(default_factory=dict)  # only the pairs a process environment can hold


@dataclass(frozen=True)
class Wrapped:
    """An entry whose command is `acp-relay run [OPTIONS] -- AGENT...`."""

    relay: str
    db: str | None
    label: str | None
    agent: list[str]
    agent_index: int  # where the agent command is in args


def servers_of(root: Node) -> Node | None:
    """The agent_servers object, None when the file has none; ValueError when it is not an object."""
    if root.kind != "object":
        raise ValueError("the top level is not an object")
    servers = root.get(SERVERS_KEY)
    if servers is not None and servers.kind != "object":
        raise ValueError(f'"{SERVERS_KEY}" is not an object')
    return servers


def entries(root: Node) -> list[Entry]:
    """Every agent entry of the file, in file order (members that are not objects left out)."""
    servers = servers_of(root)
    found = []
    for member in servers.members if servers else []:
        if member.value.kind == "object":
            found.append(entry_of(member.key, member.value))
    return found


def entry_of(name: str, node: Node) -> Entry:
    value = node.plain()
    command = value.get("command")
    args = value.get("args")
    env = value.get("env")
    return Entry(
        name,
        node,
        command if isinstance(command, str) else None,
        args if isinstance(args, list) and all(isinstance(a, str) for a in args) else None,
        {k: v for k, v in env.items() if _env_name_ok(k) and _text_ok(v)} if isinstance(env, dict) else {},
    )


MAX_FAULTS = 20  # a hostile file may hold thousands: the first ones say what is wrong


def faults(entry: Entry) -> list[str]:
    """What in the entry no process can be started with: exec takes strings without NUL bytes, and an
    environment name that is empty or holds `=` cannot be set. Each a sentence naming the field; the editor
    cannot start the entry (or starts it without that part), and doctor must not try to either."""
    value = entry.node.plain()
    found: list[str | None] = []
    if value.get("command") is not None:
        found.append(_text_fault("command", value["command"]))
    args, env = value.get("args"), value.get("env")
    if isinstance(args, list):
        found += [_text_fault(f"args[{i}]", a) for i, a in enumerate(args)]
    elif args is not None:
        found.append(f"args is {_kind(args)}, not a list")
    if isinstance(env, dict):
        for k, v in env.items():
            quoted = json.dumps(k)  # a NUL or control shown as \u0000, never raw
            if not _env_name_ok(k):
                found.append(f"env name {quoted} cannot be set in a process environment (empty, or holds = or NUL)")
            found.append(_text_fault(f"env {quoted}", v))
    elif env is not None:
        found.append(f"env is {_kind(env)}, not an object")
    said = [f for f in found if f]
    return said if len(said) <= MAX_FAULTS else [*said[:MAX_FAULTS], f"and {len(said) - MAX_FAULTS} more"]


def _env_name_ok(name: str) -> bool:
    return bool(name) and "=" not in name and "\0" not in name


def _text_ok(value: object) -> bool:
    return isinstance(value, str) and "\0" not in value


def _text_fault(what: str, value: object) -> str | None:
    if not isinstance(value, str):
        return f"{what} is {_kind(value)}, not a string"
    return f"{what} holds a NUL byte" if "\0" in value else None


def _kind(value: object) -> str:
    """What a parsed JSON value is, as a finding says it."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return "a number"
    return "an object" if isinstance(value, dict) else "a list" if isinstance(value, list) else "a string"


def relay_args(db: str, label: str) -> list[str]:
    """What goes in front of the agent command in a wrapped entry's args."""
    return ["run", "--db", db, "--label", label, "--"]


def wrapped(entry: Entry) -> Wrapped | None:
    """The acp-relay options and agent of an entry that runs `acp-relay run ... --`, else None."""
    args = entry.args
    if not entry.command or os.path.basename(entry.command) != RELAY_NAME or not args or args[0] != "run":
        return None
    options: dict[str, str] = {}
    i = 1
    while i < len(args) and args[i] != "--":  # an option's value may itself be "--" (a label, say)
        name, eq, value = args[i].partition("=")
        if name in ("--db", "--label", "--redact") and not eq and i + 1 < len(args):
            value, i = args[i + 1], i + 1
        options.setdefault(name, value)
        i += 1
    if i >= len(args):
        return None
    return Wrapped(entry.command, options.get("--db"), options.get("--label"), args[i + 1 :], i + 1)
