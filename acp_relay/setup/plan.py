"""The three changes setup makes to an editor's config text: add an entry, wrap one, unwrap one.

Pure: text in, text out (or a PlanError saying why not). Each is a few splices into the file's own text
(protocol/jsonc), so what is not the entry's command and args keeps its every byte; and wrapping puts the
relay's arguments in front of the entry's own args items, so that unwrapping takes exactly them out again.
"""

from __future__ import annotations

import json
from typing import Any

from ..protocol import jsonc
from ..protocol.editors import SERVERS_KEY, Editor, entries, entry_of, relay_args, servers_of, wrapped
from ..protocol.errors import UserError


class PlanError(UserError):
    """A change that cannot be made to this file (not an object, no such entry...); the caller names the file."""


def parse(text: str) -> jsonc.Node:
    """The file's tree; an empty (or blank) file counts as `{}` since editors create them that way."""
    if not text.strip("\ufeff \t\r\n"):
        return jsonc.parse(text + "{}")
    return jsonc.parse(text)


def _servers(text: str) -> tuple[jsonc.Node, jsonc.Node | None]:
    root = parse(text)
    try:
        return root, servers_of(root)
    except ValueError as exc:
        raise PlanError(str(exc)) from None


def _entry(text: str, name: str) -> jsonc.Node:
    _root, servers = _servers(text)
    node = servers.get(name) if servers else None
    if node is None:
        names = ", ".join(json.dumps(e.name, ensure_ascii=False) for e in entries(_root)) or "none"
        raise PlanError(f"no agent entry {json.dumps(name, ensure_ascii=False)} (entries: {names})")
    if node.kind != "object":
        raise PlanError(f"the entry {json.dumps(name, ensure_ascii=False)} is not an object")
    return node


def new_entry(editor: Editor, command: str, args: list[str]) -> dict[str, Any]:
    """The entry setup writes, keys in the order the editor's docs show them."""
    entry: dict[str, Any] = {"type": editor.entry_type} if editor.entry_type else {}
    entry.update(command=command, args=args)
    return entry


def add_entry(text: str, editor: Editor, name: str, command: str, args: list[str]) -> str:
    """Entry `name` set to run `command args`: added, or its command and args brought up to date."""
    if not text.strip("\ufeff \t\r\n"):
        text = text + "{}"
    root, servers = _servers(text)
    style = jsonc.style_of(text, root)
    want = new_entry(editor, command, args)
    if servers is None:
        return jsonc.insert_member(text, root, SERVERS_KEY, {name: want}, style)
    node = servers.get(name)
    if node is None:
        return jsonc.insert_member(text, servers, name, want, style)
    if node.kind != "object":
        raise PlanError(f"the entry {json.dumps(name, ensure_ascii=False)} is not an object")
    for key, value in want.items():
        node = _entry(text, name)
        have = node.get(key)
        if have is None or have.plain() != value:
            text = jsonc.set_member(text, node, key, value, style)
    return text


def wrap_entry(text: str, name: str, relay: str, db: str, label: str) -> str:
    """Entry `name` started through `relay run --db DB --label LABEL --`, its command, args and env kept.
    An entry already wrapped only gets `relay` as its command (an old relative or moved path fixed)."""
    node = _entry(text, name)
    style = jsonc.style_of(text, parse(text))
    entry = entry_of(name, node)
    done = wrapped(entry)
    command = node.get("command")
    if done and command is not None:  # wrapped (so it has a command): only an old or relative path to fix
        return (
            text
            if entry.command == relay
            else jsonc.replace_value(text, command, json.dumps(relay, ensure_ascii=False))
        )
    if command is None or command.kind != "string" or not entry.command:
        raise PlanError(
            f"the entry {json.dumps(name, ensure_ascii=False)} has no command to wrap",
            hint="built-in agents are started by the editor itself; add your own entry with `setup EDITOR -- AGENT`",
        )
    prefix = [json.dumps(a, ensure_ascii=False) for a in relay_args(db, label)] + [text[command.start : command.end]]
    args = node.get("args")
    if args is None:
        text = jsonc.insert_member(text, node, "args", [], style)
        args = _entry(text, name).get("args")
    elif entry.args is None:
        raise PlanError(f"the args of {json.dumps(name, ensure_ascii=False)} are not a list of strings")
    assert args is not None
    text = jsonc.insert_items(text, args, prefix, style)
    command = _entry(text, name).get("command")
    assert command is not None
    return jsonc.replace_value(text, command, json.dumps(relay, ensure_ascii=False))


def unwrap_entry(text: str, name: str) -> str:
    """Entry `name` back to starting its agent directly: the exact inverse of wrap_entry's splices."""
    node = _entry(text, name)
    done = wrapped(entry_of(name, node))
    if done is None:
        return text
    if not done.agent:
        raise PlanError(f"the entry {json.dumps(name, ensure_ascii=False)} has nothing after `--` to unwrap to")
    args = node.get("args")
    assert args is not None
    agent_source = text[args.items[done.agent_index].start : args.items[done.agent_index].end]
    text = jsonc.remove_items(text, args, done.agent_index + 1)
    command = _entry(text, name).get("command")
    assert command is not None
    return jsonc.replace_value(text, command, agent_source)
