"""The four layers of `acp-relay diff`, in order: conversation, protocol, metadata, timing (pure).

Each layer gives a `Layer`: whether the two sessions differ there, the lines a person reads and a JSON
form. Lines hold recorded text as it is: the command escapes them for the terminal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .. import vocab
from ..content import blocks_plain, percentile
from ..jsonrpc import get
from ..materialize import Entry, SessionState
from ..words import counted
from .align import MAX_EDITS, intern, opcodes, unified
from .session import SessionDigest, Token

LAYERS = ("conversation", "protocol", "metadata", "timing")
PARTS = ("thoughts", "tools", "plans", "permissions")  # parts of the conversation --ignore can leave out
IGNORABLE = LAYERS + PARTS
CONTEXT = 3
SLOWDOWN_FLOOR = 0.05  # seconds: a slower value must also be this much slower to count (scheduler noise)

# variant -> the part of the conversation (--ignore) its tokens belong to; None: always compared.
_VARIANT_PART: dict[str, str | None] = vocab.variant_table(
    "diff.compare: --ignore part",
    {
        vocab.AGENT_THOUGHT_CHUNK: "thoughts",
        vocab.AGENT_THOUGHT: "thoughts",
        **dict.fromkeys(vocab.family(vocab.Family.TOOL) | vocab.family(vocab.Family.TERMINAL), "tools"),
        **dict.fromkeys(vocab.family(vocab.Family.PLAN), "plans"),
        vocab.USER_MESSAGE_CHUNK: None,
        vocab.AGENT_MESSAGE_CHUNK: None,
        vocab.USER_MESSAGE: None,
        vocab.AGENT_MESSAGE: None,
        vocab.STATE_UPDATE: None,
        vocab.CURRENT_MODE_UPDATE: None,
        vocab.CONFIG_OPTION_UPDATE: None,
        vocab.AVAILABLE_COMMANDS_UPDATE: None,
        vocab.SESSION_INFO_UPDATE: None,
        vocab.USAGE_UPDATE: None,
        vocab.QUOTA_UPDATE: None,
        vocab.NOTICE: None,
        vocab.COMPACTION_UPDATE: None,
        vocab.COMPACTION_SUMMARY_CHUNK: None,
        vocab.SUBAGENT_UPDATE: None,
        vocab.SESSION_MESSAGE: None,
        vocab.SESSION_MESSAGE_CHUNK: None,
    },
)
_PART_METHODS = {"tools": ("fs/", "terminal/"), "permissions": (vocab.REQUEST_PERMISSION,)}
_PART_KINDS = {
    "thoughts": {vocab.AGENT_THOUGHT},
    "tools": {"tool_call", "terminal", "client_request"},
    "plans": {"plan"},
    "permissions": {"permission"},
}


# What each line of a layer is, for the command to color as `git diff` does (lines hold recorded text, so
# the kind is said where the line is made, never guessed from its first characters).
HEADER, HUNK, REMOVED, ADDED, SLOWER, PLAIN = "header", "hunk", "removed", "added", "slower", ""
_HUNK_LINE = {"-": REMOVED, "+": ADDED, " ": PLAIN}  # align.unified's prefixes


@dataclass
class Layer:
    name: str
    differs: bool
    lines: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    ignored: bool = False
    kinds: list[str] = field(default_factory=list)  # one per line: HEADER, HUNK, REMOVED, ADDED, SLOWER, PLAIN

    def to_json(self) -> dict[str, Any]:
        if self.ignored:
            return {"ignored": True}
        return {"same": not self.differs, **self.data}


def _word(value: Any) -> str:
    """A status as the peer spelled it (`completed`), JSON only for what is not a string."""
    return value if isinstance(value, str) else _json(value)


def _items(lo: int, hi: int) -> str:
    """The items lo+1..hi of a side, as a hunk header says them: `items 3-5`, `item 3`, `none after item 12`."""
    if hi <= lo:
        return f"none after item {lo}" if lo else "none at the start"
    return f"item {hi}" if hi == lo + 1 else f"items {lo + 1}-{hi}"


def _json(value: Any) -> str:
    """Canonical JSON (sorted keys): metadata compares by value, whatever order a peer wrote its keys in."""
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=repr)
    except (TypeError, ValueError):
        return repr(value)


# ---- conversation ---------------------------------------------------------------------------------------
def _body(label: str, text: str) -> list[str]:
    lines = text.rstrip("\n").split("\n")  # as the transcript shows it: a trailing newline is no line
    return [f"{label}: {lines[0]}".rstrip()] + [f"  {line}".rstrip() for line in lines[1:]]


def _tool_lines(e: Entry) -> list[str]:
    f = e.fields
    out = [f"tool: {f.get('title') or ''} [{f.get('kind') or '?'}] {f.get('status') or ''}".rstrip()]
    for item in e.content:
        if isinstance(item, dict) and item.get("type") == "content":
            out += _body("  content", blocks_plain([item.get("content")]))
        elif isinstance(item, dict) and item.get("type") == "diff":
            out.append(f"  diff {item.get('path')}")
            out += _body("  new", str(item.get("newText")))
        elif isinstance(item, dict) and item.get("type") == "terminal":
            out.append("  terminal")
        else:
            out.append(f"  {_json(item)}")
    return out


def _entry_lines(e: Entry, state: SessionState) -> list[str]:
    f = e.fields
    if e.kind in (vocab.AGENT_MESSAGE, vocab.AGENT_THOUGHT, vocab.SESSION_MESSAGE):
        return _body(
            {vocab.AGENT_MESSAGE: "agent", vocab.AGENT_THOUGHT: "thought"}.get(e.kind, "session message"),
            blocks_plain(e.content),
        )
    if e.kind == "tool_call":
        return _tool_lines(e)
    if e.kind == "terminal":
        code = f.get("exitStatus")
        return [f"terminal: {f.get('command') or ''} exit {_json(code)}"]
    if e.kind == "plan":
        if e.removed:
            return ["plan: removed"]
        items = f.get("entries") if isinstance(f.get("entries"), list) else []
        return (
            ["plan:"] + [f"  [{_word(get(i, 'status'))}] {get(i, 'content')}" for i in items]
            if items
            else [f"plan: {_json({k: v for k, v in f.items() if k != 'planId'})}"]
        )
    if e.kind == "permission":
        call = state.entry("tool_call", str(f.get("toolCallId")))  # the request may name the call by id only
        title = f.get("title") or get(f.get("toolCall"), "title") or (call.fields.get("title") if call else None)
        if "error" in f:
            answer = "error"
        elif f.get("outcome") == "selected":
            answer = f"selected {f.get('optionKind') or f.get('optionId')}"
        else:
            answer = str(f.get("outcome") or "no answer")
        return [f"permission: {title or ''} -> {answer}".replace(":  ->", ": ->")]
    if e.kind == "client_request":
        answer = "error" if "error" in f else ("answered" if "result" in f else "no answer")
        return [f"request: {f.get('method')} -> {answer}"]
    if e.kind == "compaction":
        return [f"compaction: {f.get('status')}"]
    if e.kind == "subagent":
        return [f"child session: {f.get('title') or f.get('name') or ''}".rstrip()]
    if e.kind == "notice":
        return [f"notice {f.get('severity')}: {f.get('title')}"]
    if e.kind == vocab.USER_MESSAGE:
        return _body("user message", blocks_plain(e.content))
    return [f"{e.kind} update {e.variant}: {_json(e.raw_update)}"]


def conversation_lines(state: SessionState, ignore: frozenset[str] = frozenset()) -> tuple[list[str], list[str]]:
    """(lines, the section of each line): per turn, what a person sees, without ids or times."""
    skip = set().union(*(_PART_KINDS[p] for p in PARTS if p in ignore))
    by_turn: dict[int | None, list[Entry]] = {}
    for e in state.entries:
        if e.kind not in skip and not e.live_only:
            by_turn.setdefault(e.turn, []).append(e)
    lines: list[str] = []
    sections: list[str] = []

    def add(new: list[str], section: str) -> None:
        lines.extend(new)
        sections.extend([section] * len(new))

    add([_entry_lines(e, state)[0] for e in by_turn.get(None, [])], "before the first turn")
    for turn in state.turns:
        name = f"turn {turn.index}"
        add([f"=== {name} ==="], name)
        add(_body("user", blocks_plain(turn.prompt)), name)
        for e in by_turn.get(turn.index, []):
            if e.kind == vocab.USER_MESSAGE and blocks_plain(e.content) == blocks_plain(turn.prompt):
                continue  # v2 agents echo the prompt; the prompt is already shown
            add(_entry_lines(e, state), name)
        add([f"stop: {turn.stop_reason if turn.ended else 'not ended'}"], name)
    return lines, sections


def conversation_layer(a: SessionDigest, b: SessionDigest, ignore: frozenset[str]) -> Layer:
    la, sa = conversation_lines(a.state, ignore)
    lb, sb = conversation_lines(b.state, ignore)
    hunks, gave_up = unified(la, lb, lambda i: sa[i] if sa else "", lambda j: sb[j] if sb else "", context=CONTEXT)
    out = [f"--- {a.name}", f"+++ {b.name}"] if hunks else []
    kinds = [HEADER] * len(out)
    for h in hunks:
        out.append(h.header())
        out += h.lines
        kinds += [HUNK] + [_HUNK_LINE[line[0]] for line in h.lines]
    turns = sorted({h.section for h in hunks}, key=_section_order)
    return Layer(
        "conversation",
        bool(hunks),
        out,
        {
            "turns_changed": turns,
            "hunks": [{"section": h.section, "header": h.header(), "lines": h.lines} for h in hunks],
        }
        | ({"approximate": True} if gave_up else {}),
        kinds=kinds,
    )


def _section_order(section: str) -> tuple[int, str]:
    tail = section.rsplit(" ", 1)[-1]
    return (int(tail), section) if tail.isdigit() else (0, section)


# ---- protocol -------------------------------------------------------------------------------------------
def _kept(token: Token, ignore: frozenset[str]) -> bool:
    _, _, method, variant = token
    if variant is not None and _VARIANT_PART.get(variant) in ignore:
        return False
    return method is None or not any(method.startswith(_PART_METHODS[p]) for p in _PART_METHODS if p in ignore)


def runs(tokens: list[Token], turns: list[int], ignore: frozenset[str]) -> tuple[list[tuple[Token, int]], list[int]]:
    """Consecutive equal tokens as one (token, count): a streamed answer is one item, its length a count."""
    items: list[tuple[Token, int]] = []
    where: list[int] = []
    for tok, turn in zip(tokens, turns, strict=True):
        if not _kept(tok, ignore):
            continue
        if items and items[-1][0] == tok and where[-1] == turn:
            items[-1] = (tok, items[-1][1] + 1)
        else:
            items.append((tok, 1))
            where.append(turn)
    return items, where


def tokenblocks_plain(item: tuple[Token, int]) -> str:
    (direction, kind, method, variant), count = item
    arrow = "editor -> agent" if direction == "c2a" else "agent -> editor"
    text = f"{arrow} {kind} {method or ''}".rstrip() + (f" {variant}" if variant else "")
    return text + (f" x{count}" if count > 1 else "")


def _turn_name(turn: int) -> str:
    return f"turn {turn}" if turn else "before the first turn"


def protocol_layer(a: SessionDigest, b: SessionDigest, ignore: frozenset[str]) -> Layer:
    ia, ta = runs(a.tokens, a.token_turns, ignore)
    ib, tb = runs(b.tokens, b.token_turns, ignore)
    xa, xb = intern(ia, ib)
    ops, gave_up = opcodes(xa, xb, MAX_EDITS)
    changes = [op for op in ops if op[0] != "equal"]
    lines: list[str] = []
    kinds: list[str] = []
    data: list[dict[str, Any]] = []
    for tag, i1, i2, j1, j2 in changes:
        turn = tb[j1] if tag == "insert" and j1 < len(tb) else (ta[i1] if i1 < len(ta) else (ta[-1] if ta else 0))
        lines.append(f"@@ A {_items(i1, i2)}, B {_items(j1, j2)} @@ {_turn_name(turn)}")
        lines += ["-" + tokenblocks_plain(x) for x in ia[i1:i2]] + ["+" + tokenblocks_plain(x) for x in ib[j1:j2]]
        kinds += [HUNK] + [REMOVED] * (i2 - i1) + [ADDED] * (j2 - j1)
        data.append(
            {
                "op": tag,
                "turn": turn,
                "a": [tokenblocks_plain(x) for x in ia[i1:i2]],
                "b": [tokenblocks_plain(x) for x in ib[j1:j2]],
            }
        )
    if gave_up:
        lines.append(
            f"(the sessions differ in more than {counted(MAX_EDITS, 'place')} in a region: shown replaced as a whole)"
        )
        kinds.append(PLAIN)
    return Layer(
        "protocol",
        bool(changes),
        lines,
        {
            "frames": [len(a.tokens), len(b.tokens)],
            "items": [len(ia), len(ib)],
            "changes": data,
        }
        | ({"approximate": True} if gave_up else {}),
        kinds=kinds,
    )


# ---- metadata -------------------------------------------------------------------------------------------
def metadata_layer(a: SessionDigest, b: SessionDigest) -> Layer:
    lines, changes = [], []
    for key in sorted(set(a.meta) | set(b.meta)):
        va, vb = a.meta.get(key, _MISSING), b.meta.get(key, _MISSING)
        if va == vb:
            continue
        ta, tb = ("(absent)" if v is _MISSING else _json(v) for v in (va, vb))
        lines += [f"{key}:", f"  - {ta}", f"  + {tb}"]
        changes.append({"key": key, "a": None if va is _MISSING else va, "b": None if vb is _MISSING else vb})
    return Layer("metadata", bool(changes), lines, {"changes": changes}, kinds=[PLAIN, REMOVED, ADDED] * len(changes))


_MISSING = object()


# ---- timing ---------------------------------------------------------------------------------------------
def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.1f}ms" if value < 0.1 else f"{value * 1000:.0f}ms" if value < 10 else f"{value:.1f}s"


def _change(va: float | None, vb: float | None) -> str:
    if va is None or vb is None:
        return ""
    if va <= 0:
        return "" if vb <= 0 else "slower"
    return f"x{vb / va:.2f}"


def _slower(va: float | None, vb: float | None, factor: float | None) -> bool:
    return factor is not None and va is not None and vb is not None and vb > va * factor and vb - va > SLOWDOWN_FLOOR


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def timing_layer(a: SessionDigest, b: SessionDigest, max_slowdown: float | None) -> Layer:
    rows: list[tuple[str, float | None, float | None, bool]] = []
    data: dict[str, Any] = {"methods": {}, "turns": []}
    for key in sorted(set(a.latencies) | set(b.latencies)):
        la, lb = a.latencies.get(key, []), b.latencies.get(key, [])
        stats = {}
        for p in (50, 95):
            pa, pb = percentile(sorted(la), p), percentile(sorted(lb), p)
            slow = _slower(pa, pb, max_slowdown)
            rows.append((f"{key} p{p}", pa, pb, slow))
            stats[f"p{p}"] = {"a": _round(pa), "b": _round(pb), "slower": slow}
        data["methods"][key] = stats | {"count": [len(la), len(lb)]}
    da, db = a.turn_durations, b.turn_durations
    for i in range(max(len(da), len(db))):
        va, vb = (da[i] if i < len(da) else None), (db[i] if i < len(db) else None)
        slow = _slower(va, vb, max_slowdown)
        rows.append((f"turn {i + 1} duration", va, vb, slow))
        data["turns"].append({"turn": i + 1, "a": _round(va), "b": _round(vb), "slower": slow})
    width = max((len(r[0]) for r in rows), default=10)
    lines = [f"{'':{width}}  {'A':>8}  {'B':>8}  change"]
    for name, va, vb, slow in rows:
        flag = f"  slower than x{max_slowdown:g}" if slow and max_slowdown is not None else ""
        lines.append(f"{name:{width}}  {_ms(va):>8}  {_ms(vb):>8}  {_change(va, vb)}{flag}".rstrip())
    differs = any(r[3] for r in rows)
    data["max_slowdown"] = max_slowdown
    return Layer("timing", differs, lines, data, kinds=[HEADER] + [SLOWER if r[3] else PLAIN for r in rows])


# ---- all of it ------------------------------------------------------------------------------------------
def compare(
    a: SessionDigest, b: SessionDigest, *, ignore: frozenset[str] = frozenset(), max_slowdown: float | None = None
) -> list[Layer]:
    """Every layer, in order; an ignored layer comes back with `ignored` set and never differs."""
    makers = {
        "conversation": lambda: conversation_layer(a, b, ignore),
        "protocol": lambda: protocol_layer(a, b, ignore),
        "metadata": lambda: metadata_layer(a, b),
        "timing": lambda: timing_layer(a, b, max_slowdown),
    }
    return [Layer(name, False, ignored=True) if name in ignore else makers[name]() for name in LAYERS]
