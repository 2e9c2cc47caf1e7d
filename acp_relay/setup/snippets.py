"""Editors whose agent config is code (Neovim's CodeCompanion in Lua, Emacs's agent-shell in Elisp): setup
prints a snippet to paste, with the same absolute command it would write into a JSON config."""

from __future__ import annotations

import re


def _lua_string(text: str) -> str:
    """A Lua double-quoted string literal (control characters and non-ASCII as decimal byte escapes)."""
    out = []
    for byte in text.encode("utf-8"):
        ch = chr(byte)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 32 <= byte < 127:
            out.append(ch)
        else:
            out.append(f"\\{byte:03d}")
    return '"' + "".join(out) + '"'


def _elisp_string(text: str) -> str:
    """An Emacs Lisp string literal (only the quote and backslash need escaping; newlines as \\n)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _identifier(name: str) -> str:
    """`name` as a Lua/Elisp-safe identifier: letters, digits and underscores."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "agent"


def neovim(name: str, argv: list[str]) -> str:
    """A CodeCompanion ACP adapter that starts `argv` (an existing adapter extended with our command)."""
    command = ", ".join(_lua_string(a) for a in argv)
    key = _identifier(name)
    return (
        f"-- acp-relay: {name} recorded (paste into your CodeCompanion setup)\n"
        'require("codecompanion").setup({\n'
        f"  adapters = {{ acp = {{ {key} = function()\n"
        '    return require("codecompanion.adapters").extend("gemini_cli", {\n'
        f"      name = {_lua_string(key)},\n"
        f"      commands = {{ default = {{ {command} }} }},\n"
        "    })\n"
        "  end } },\n"
        "})\n"
    )


def emacs(name: str, argv: list[str]) -> str:
    """The agent-shell command list for `argv`, to give an agent config as its command."""
    key = _identifier(name).replace("_", "-")
    items = "\n        ".join(_elisp_string(a) for a in argv)
    return (
        f";; acp-relay: {name} recorded (paste into your init file)\n"
        f"(defconst acp-relay-{key}-command\n"
        f"  '({items}))\n"
        ";; then use it as the command of the agent-shell config you start, for example:\n"
        f";; (setq agent-shell-google-gemini-command acp-relay-{key}-command)\n"
    )
