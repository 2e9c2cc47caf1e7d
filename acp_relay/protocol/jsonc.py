"""JSON with comments and trailing commas (Zed's settings.json): parse with positions, edit the text in place.

`acp-relay setup` changes one agent entry in a file people write by hand. Dumping a parsed copy would drop
their comments and reflow everything, so edits are splices into the original text: a value replaced, a
member or array items inserted or removed, with every other character (comments, order, spacing, CRLF, a
BOM) left as it was. Pure: text in, text out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from .words import counted

MAX_DEPTH = 200
INLINE_WIDTH = 72  # a flat array up to this long stays on one line, as settings files write them
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LITERALS = {"true": True, "false": False, "null": None}
_INLINE_WS = " \t"


class JsoncError(ValueError):
    """Text that is not JSON with comments, with the line and column (1-based) where reading stopped."""

    def __init__(self, message: str, text: str, pos: int) -> None:
        self.line = text.count("\n", 0, pos) + 1
        self.column = pos - (text.rfind("\n", 0, pos) + 1) + 1
        if self.line == 1 and text.startswith("\ufeff") and pos > 0:
            self.column -= 1  # a BOM is not a column anyone sees
        self.reason = message
        super().__init__(f"line {self.line}, column {self.column}: {message}")


@dataclass
class Node:
    """A value and where it is: text[start:end] is its source, comments around it excluded."""

    kind: str  # object | array | string | number | literal
    start: int
    end: int
    value: Any = None  # scalars only
    members: list[Member] = field(default_factory=list)  # objects
    items: list[Node] = field(default_factory=list)  # arrays

    def get(self, key: str) -> Node | None:
        """The value of member `key` of an object (the last one, as JSON parsers do), or None."""
        for member in reversed(self.members):
            if member.key == key:
                return member.value
        return None

    def plain(self) -> Any:
        """The value as json.loads would give it."""
        if self.kind == "object":
            return {m.key: m.value.plain() for m in self.members}
        if self.kind == "array":
            return [item.plain() for item in self.items]
        return self.value


@dataclass
class Member:
    key: str
    key_start: int
    value: Node


def parse(text: str) -> Node:
    """The one value `text` holds (a leading BOM, whitespace and comments around it allowed)."""
    parser = _Parser(text)
    i = parser.skip(1 if text.startswith("\ufeff") else 0)
    if i >= len(text):
        raise JsoncError("no value: the file is empty", text, i)
    node, i = parser.value(i, 0)
    i = parser.skip(i)
    if i < len(text):
        raise JsoncError(f"unexpected {_shown(text[i])} after the value", text, i)
    return node


def _shown(ch: str) -> str:
    return json.dumps(ch, ensure_ascii=False) if ch.isprintable() else f"U+{ord(ch):04X}"


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text

    def skip(self, i: int) -> int:
        """Past whitespace and comments."""
        text, n = self.text, len(self.text)
        while i < n:
            ch = text[i]
            if ch in " \t\r\n":
                i += 1
            elif text.startswith("//", i):
                j = text.find("\n", i)
                i = n if j < 0 else j + 1
            elif text.startswith("/*", i):
                j = text.find("*/", i + 2)
                if j < 0:
                    raise JsoncError("unterminated /* comment", text, i)
                i = j + 2
            else:
                break
        return i

    def value(self, i: int, depth: int) -> tuple[Node, int]:
        text = self.text
        if depth > MAX_DEPTH:
            raise JsoncError(f"nested deeper than {counted(MAX_DEPTH, 'level')}", text, i)
        if i >= len(text):
            raise JsoncError("unexpected end of file: a value was expected", text, i)
        ch = text[i]
        if ch == "{":
            return self.object(i, depth)
        if ch == "[":
            return self.array(i, depth)
        if ch == '"':
            value, end = self.string(i)
            return Node("string", i, end, value), end
        m = _NUMBER.match(text, i)
        if m and m.end() > i:
            number = m.group()
            parsed: float = float(number) if any(c in number for c in ".eE") else int(number)
            return Node("number", i, m.end(), parsed), m.end()
        for word, literal in _LITERALS.items():
            if text.startswith(word, i):
                return Node("literal", i, i + len(word), literal), i + len(word)
        raise JsoncError(f"unexpected {_shown(ch)}: a value was expected", text, i)

    def string(self, i: int) -> tuple[str, int]:
        text, j = self.text, i + 1
        while True:
            if j >= len(text):
                raise JsoncError("unterminated string", text, i)
            ch = text[j]
            if ch == '"':
                break
            if ch == "\\":
                j += 2
            elif ch < " ":
                raise JsoncError(f"control character {_shown(ch)} inside a string", text, j)
            else:
                j += 1
        try:
            value = json.loads(text[i : j + 1])
        except ValueError:
            raise JsoncError("bad escape in string", text, i) from None
        if "\\u" in text[i:j] and any("\ud800" <= c <= "\udfff" for c in value):
            raise JsoncError("a \\u escape of half a surrogate pair (not a character)", text, i)
        return value, j + 1

    def object(self, start: int, depth: int) -> tuple[Node, int]:
        text, node = self.text, Node("object", start, start)
        i = self.skip(start + 1)
        while True:
            if i < len(text) and text[i] == "}":
                node.end = i + 1
                return node, i + 1
            if i >= len(text) or text[i] != '"':
                what = "end of file" if i >= len(text) else _shown(text[i])
                raise JsoncError(f"unexpected {what}: a member name in quotes or }} was expected", text, i)
            key_start = i
            key, i = self.string(i)
            i = self.skip(i)
            if i >= len(text) or text[i] != ":":
                raise JsoncError(f"':' expected after the member name {json.dumps(key)}", text, i)
            value, i = self.value(self.skip(i + 1), depth + 1)
            node.members.append(Member(key, key_start, value))
            i = self.skip(i)
            if i < len(text) and text[i] == ",":
                i = self.skip(i + 1)
            elif i >= len(text) or text[i] != "}":
                raise JsoncError("',' or '}' expected after a member", text, i)

    def array(self, start: int, depth: int) -> tuple[Node, int]:
        text, node = self.text, Node("array", start, start)
        i = self.skip(start + 1)
        while True:
            if i < len(text) and text[i] == "]":
                node.end = i + 1
                return node, i + 1
            item, i = self.value(i, depth + 1)
            node.items.append(item)
            i = self.skip(i)
            if i < len(text) and text[i] == ",":
                i = self.skip(i + 1)
            elif i >= len(text) or text[i] != "]":
                raise JsoncError("',' or ']' expected after an array item", text, i)


# Editing: each function returns the new text, changed only where the edit is.


@dataclass(frozen=True)
class Style:
    """How the file writes what we add: one level of indentation and the line break."""

    indent: str = "  "
    newline: str = "\n"


def style_of(text: str, root: Node) -> Style:
    """The file's own indentation (from its first member on a line of its own) and line break."""
    newline = "\r\n" if "\r\n" in text else "\n"
    for member in root.members:
        lead = text[text.rfind("\n", 0, member.key_start) + 1 : member.key_start].lstrip("\ufeff")
        if lead and not lead.strip(_INLINE_WS):
            return Style(lead, newline)
    return Style("  ", newline)


def line_indent(text: str, pos: int) -> str:
    """The spaces and tabs that start the line holding `pos`."""
    start = text.rfind("\n", 0, pos) + 1
    line = text[start:pos].lstrip("\ufeff")
    return line[: len(line) - len(line.lstrip(_INLINE_WS))]


def render(value: Any, style: Style, base: str = "") -> str:
    """`value` as JSON laid out the way settings files are: objects one member a line, short flat arrays inline."""
    if isinstance(value, dict) and value:
        inner = base + style.indent
        members = [f"{inner}{_scalar(k)}: {render(v, style, inner)}" for k, v in value.items()]
        return "{" + style.newline + ("," + style.newline).join(members) + style.newline + base + "}"
    if isinstance(value, list) and value:
        flat = "[" + ", ".join(_scalar(v) for v in value) + "]"
        if len(flat) <= INLINE_WIDTH and all(not isinstance(v, dict | list) for v in value):
            return flat
        inner = base + style.indent
        items = [inner + render(v, style, inner) for v in value]
        return "[" + style.newline + ("," + style.newline).join(items) + style.newline + base + "]"
    return "{}" if isinstance(value, dict) else "[]" if isinstance(value, list) else _scalar(value)


def _scalar(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def splice(text: str, edits: list[tuple[int, int, str]]) -> str:
    """Replace text[start:end] by each new string (non-overlapping edits, applied back to front)."""
    for start, end, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        text = text[:start] + new + text[end:]
    return text


def replace_value(text: str, node: Node, source: str) -> str:
    """`node`'s source replaced by `source` (JSON text); everything around it kept."""
    return splice(text, [(node.start, node.end, source)])


def set_member(text: str, obj: Node, key: str, value: Any, style: Style) -> str:
    """Member `key` of `obj` set to `value`: its value replaced when it is there, else a member added last."""
    for member in reversed(obj.members):
        if member.key == key:
            return replace_value(text, member.value, render(value, style, line_indent(text, member.key_start)))
    return insert_member(text, obj, key, value, style)


def insert_member(text: str, obj: Node, key: str, value: Any, style: Style) -> str:
    """A member added after the last one of `obj`, on its own line when the members are on theirs, with
    the object's trailing-comma habit kept; comments stay with the member they follow."""
    parser = _Parser(text)

    def source(indent: str) -> str:
        return f"{_scalar(key)}: {render(value, style, indent)}"

    if not obj.members:
        base = line_indent(text, obj.start)
        inner = base + style.indent
        close = "" if "\n" in text[obj.start : obj.end] else style.newline + base
        return splice(text, [(obj.start + 1, obj.start + 1, style.newline + inner + source(inner) + close)])
    last = obj.members[-1]
    q = last.value.end
    k = parser.skip(q)
    trailing = text[k] == ","
    lead = text[text.rfind("\n", 0, last.key_start) + 1 : last.key_start].lstrip("\ufeff")
    if not lead.strip(_INLINE_WS):
        eol = _line_end_after(text, k + 1 if trailing else q)
        if eol is not None:
            edits = [(eol, eol, style.newline + lead + source(lead) + ("," if trailing else ""))]
            if not trailing:
                edits.append((q, q, ","))
            return splice(text, edits)
    indent = line_indent(text, last.key_start)
    if trailing:
        return splice(text, [(k + 1, k + 1, " " + source(indent) + ",")])
    return splice(text, [(q, q, ", " + source(indent))])


def _line_end_after(text: str, i: int) -> int | None:
    """Where the line break ending `i`'s line starts, if only spaces, tabs and comments come before it."""
    n = len(text)
    while i < n:
        if text[i] in _INLINE_WS:
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            if j < 0:
                return None
            return j - 1 if text[j - 1] == "\r" else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0 or "\n" in text[i:j]:
                return None
            i = j + 2
        elif text.startswith("\r\n", i) or text[i] == "\n":
            return i
        else:
            return None
    return None


def insert_items(text: str, arr: Node, sources: list[str], style: Style) -> str:
    """Items (JSON source texts) put in front of `arr`'s items, separated the way the array already is."""
    if not sources:
        return text
    if not arr.items:
        return splice(text, [(arr.start + 1, arr.start + 1, ", ".join(sources))])
    first = arr.items[0]
    between = text[first.end : arr.items[1].start] if len(arr.items) > 1 else ""
    if between and re.fullmatch(r"[ \t\r\n]*,[ \t\r\n]*", between):
        sep = between
    else:
        lead = text[text.rfind("\n", 0, first.start) + 1 : first.start]
        own_line = "\n" in text[arr.start : first.start] and not lead.strip(_INLINE_WS)
        sep = "," + style.newline + lead if own_line else ", "
    return splice(text, [(first.start, first.start, "".join(s + sep for s in sources))])


def remove_items(text: str, arr: Node, count: int) -> str:
    """The first `count` items of `arr` taken out (with what separates them from the rest)."""
    if count <= 0:
        return text
    items = arr.items
    if count < len(items):
        return splice(text, [(items[0].start, items[count].start, "")])
    end = items[-1].end
    k = _Parser(text).skip(end)
    if text[k] == ",":
        end = k + 1
    return splice(text, [(items[0].start, end, "")])
