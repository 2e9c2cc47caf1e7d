"""What the setup and doctor tests share: a fake HOME, the installed acp-relay run in it, config samples."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from acp_relay.protocol import jsonc

# The console script of this venv: what `pipx install` gives a user, and what setup writes into configs.
_BESIDE = Path(sys.executable).parent / "acp-relay"
RELAY = str(_BESIDE) if _BESIDE.exists() else os.path.abspath(shutil.which("acp-relay") or _BESIDE)

ZED_SETTINGS = """\
// Zed settings
//
// For information on how to configure Zed, see the Zed
// documentation: https://zed.dev/docs/configuring-zed
//
// To see all of Zed's default settings without changing your
// custom settings, run `zed: open default settings` from the
// command palette (cmd-shift-p / ctrl-shift-p)
{
  "telemetry": {
    "diagnostics": false,
    "metrics": false
  },
  "ui_font_size": 16,
  "buffer_font_size": 15,
  "theme": {
    "mode": "system",
    "light": "One Light",
    "dark": "One Dark"
  },
  // Agents started over ACP
  "agent_servers": {
    "Claude Code": {
      "type": "custom",
      "command": "npx",
      "args": ["@zed-industries/claude-code-acp"],
      "env": { "ANTHROPIC_LOG": "debug" }, // remove when done
    },
  },
  /* formatting */
  "format_on_save": "on",
}
"""

JETBRAINS_ACP = """\
{
    "default_mcp_settings": {},
    "agent_servers": {
        "Claude Code": {
            "command": "/usr/local/bin/claude-code-acp",
            "args": [
                "--verbose"
            ],
            "env": {
                "ANTHROPIC_LOG": "debug"
            }
        }
    }
}
"""

# Unicode names and comments, Windows line breaks and a byte order mark: what a config edited on another
# system may hold.
ZED_UNICODE = (
    '\ufeff// réglages de Zed ✓\r\n{\r\n\t"agent_servers": {\r\n\t\t"Gémeaux «ü» ✓": {\r\n'
    '\t\t\t"type": "custom",\r\n\t\t\t"command": "gemini",\r\n\t\t\t"args": ["--experimental-acp"], // 実験\r\n'
    "\t\t},\r\n\t},\r\n}\r\n"
)
JETBRAINS_CRLF = JETBRAINS_ACP.replace("Claude Code", "Agent ✓").replace("\n", "\r\n")
SAMPLES = {
    "zed": ("zed", ZED_SETTINGS, "Claude Code"),
    "zed-unicode-crlf-bom": ("zed", "\ufeff" + ZED_UNICODE.lstrip("\ufeff"), "Gémeaux «ü» ✓"),
    "jetbrains": ("jetbrains", JETBRAINS_ACP, "Claude Code"),
    "jetbrains-crlf-bom": ("jetbrains", "\ufeff" + JETBRAINS_CRLF, "Agent ✓"),
}


def config_path(home: Path, editor: str) -> Path:
    return home / (".config/zed/settings.json" if editor == "zed" else ".jetbrains/acp.json")


def home_env(home: Path, **extra: str) -> dict[str, str]:
    """A user's environment with nothing of ours in it: HOME is the fake one, no XDG_* or ACP_RELAY_*."""
    return {"PATH": os.environ["PATH"], "HOME": str(home), **extra}


def acp(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [RELAY, *args],
        env=env or home_env(home),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def entry(path: Path, name: str) -> dict[str, Any]:
    """An agent entry of a config file, as the editor reads it."""
    servers = jsonc.parse(path.read_text(encoding="utf-8")).get("agent_servers")
    assert servers is not None
    node = servers.get(name)
    assert node is not None, f"no entry {name!r} in {path}"
    value = node.plain()
    assert isinstance(value, dict)
    return value


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".acp-relay-*.bak"))
