"""`acp-relay info`: what a session's peers declared and used, in one screen (or one JSON object).

Read from the session's messages (the connection's initialize exchange included): versions and names,
both sides' capabilities as a matrix (v1 booleans and v2 `{}` markers alike), auth methods, modes, config
options, models, commands, extensions seen, and counts.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import IO, Any

from ..protocol import vocab
from ..protocol.jsonrpc import get
from ..render.text import Style, clean, counted, dumps_line, write_painted
from ..store.queries import iter_messages, resolve_view

# (row name, side, v1 path, v2 path): a path is keys from the capabilities object; None = not in that version.
CAPABILITIES: list[tuple[str, str, tuple[str, ...] | None, tuple[str, ...] | None]] = [
    ("fs read", "editor", ("fs", "readTextFile"), None),
    ("fs write", "editor", ("fs", "writeTextFile"), None),
    ("terminal", "editor", ("terminal",), None),
    ("auth: terminal login", "editor", ("auth", "terminal"), ("auth", "terminal")),
    ("plan updates", "editor", ("plan",), ("plan",)),
    ("compaction", "editor", ("session", "compaction"), ("session", "compaction")),
    ("elicitation", "editor", ("elicitation",), ("elicitation",)),
    ("session load", "agent", ("loadSession",), None),
    ("session list", "agent", ("sessionCapabilities", "list"), ("session",)),
    ("session resume", "agent", ("sessionCapabilities", "resume"), ("session",)),
    ("session close", "agent", ("sessionCapabilities", "close"), ("session",)),
    ("session delete", "agent", ("sessionCapabilities", "delete"), ("session", "delete")),
    ("session fork", "agent", ("sessionCapabilities", "fork"), ("session", "fork")),
    ("prompt image", "agent", ("promptCapabilities", "image"), ("session", "prompt", "image")),
    ("prompt audio", "agent", ("promptCapabilities", "audio"), ("session", "prompt", "audio")),
    (
        "prompt embedded context",
        "agent",
        ("promptCapabilities", "embeddedContext"),
        ("session", "prompt", "embeddedContext"),
    ),
    ("mcp stdio", "agent", None, ("session", "mcp", "stdio")),
    ("mcp http", "agent", ("mcpCapabilities", "http"), ("session", "mcp", "http")),
    ("mcp sse", "agent", ("mcpCapabilities", "sse"), None),
    ("mcp acp", "agent", ("mcpCapabilities", "acp"), ("session", "mcp", "acp")),
    ("auth: logout", "agent", ("auth", "logout"), ("auth", "logout")),
]
_JSONRPC_MEMBERS = frozenset({"jsonrpc", "id", "method", "params", "result", "error"})


@dataclass
class Info:
    session_id: str | None  # None: a whole connection (-c N), all its sessions
    connection_id: int
    protocol_version: int | None = None
    client: Any = None
    agent: Any = None
    capabilities: list[dict[str, Any]] = field(default_factory=list)
    auth_methods: list[Any] = field(default_factory=list)
    current_mode: str | None = None
    modes: list[Any] = field(default_factory=list)
    config_options: list[Any] = field(default_factory=list)
    current_model: str | None = None
    models: list[Any] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    meta_keys: list[str] = field(default_factory=list)
    extension_methods: list[str] = field(default_factory=list)
    extension_variants: list[str] = field(default_factory=list)
    extra_members: list[str] = field(default_factory=list)  # top-level members JSON-RPC lacks (JetBrains' "type")
    counts: dict[str, int] = field(default_factory=dict)


def _path(obj: Any, path: tuple[str, ...] | None) -> Any:
    if path is None:
        return ...
    for key in path:
        obj = get(obj, key)
    return obj


def _supported(value: Any) -> bool | None:
    """v1 booleans and v2 object markers ({} = supported); absent is unsupported; ... = not in this version."""
    if value is ...:
        return None
    return value is True or isinstance(value, dict)


def capability_matrix(version: int | None, client_caps: Any, agent_caps: Any) -> list[dict[str, Any]]:
    v2 = (version or 1) >= 2
    rows = []
    for name, side, p1, p2 in CAPABILITIES:
        caps = client_caps if side == "editor" else agent_caps
        value = _supported(_path(caps, p2 if v2 else p1))
        if value is None:
            continue
        rows.append(
            {
                "capability": name,
                "editor": value if side == "editor" else None,
                "agent": value if side == "agent" else None,
            }
        )
    return rows


def compute(conn: sqlite3.Connection, session: str | None = None, connection: int | str | None = None) -> Info:
    """What SESSION's (or with -c alone, the whole connection's) peers said about themselves."""
    view = resolve_view(conn, session if session is not None or connection is not None else "last", connection)
    info = Info(view.session_id, view.connection_id, view.protocol_version)
    client_caps = agent_caps = None
    tools: set[str] = set()
    meta: set[str] = set()
    methods: set[str] = set()
    variants: set[str] = set()
    extra: set[str] = set()
    counts = {"turns": 0, "tool_calls": 0, "permissions": 0, "errors": 0}
    for _f, msg, request in iter_messages(conn, view):
        if not isinstance(msg, dict):
            continue
        _meta_keys(msg, meta)
        extra.update(str(k) for k in msg if k not in _JSONRPC_MEMBERS)
        method = msg.get("method") if isinstance(msg.get("method"), str) else get(request, "method")
        params, result = get(msg, "params"), get(msg, "result")
        if isinstance(msg.get("method"), str) and msg["method"].startswith("_"):
            methods.add(msg["method"])
        if "error" in msg and "method" not in msg:
            counts["errors"] += 1
        if method == vocab.INITIALIZE and "method" in msg:
            info.client = get(params, "clientInfo") or get(params, "info")
            client_caps = get(params, "clientCapabilities") or get(params, "capabilities")
        elif method == vocab.INITIALIZE and isinstance(result, dict):
            info.agent = result.get("agentInfo") or result.get("info")
            agent_caps = result.get("agentCapabilities") or result.get("capabilities")
            if isinstance(result.get("protocolVersion"), int):
                info.protocol_version = result["protocolVersion"]
            info.auth_methods = result.get("authMethods") or []
        elif method in vocab.SESSION_ORIGINS and isinstance(result, dict):
            _session_result(info, result)
        elif method == vocab.PROMPT and "method" in msg:
            counts["turns"] += 1
        elif method == vocab.REQUEST_PERMISSION and "method" in msg:
            counts["permissions"] += 1
        elif method == vocab.SET_MODE and "result" in msg and isinstance(_param(request, "modeId"), str):
            info.current_mode = _param(request, "modeId")  # only once the agent accepted it
        elif method == vocab.SET_MODEL and "result" in msg and isinstance(_param(request, "modelId"), str):
            info.current_model = _param(request, "modelId")
        elif method == vocab.UPDATE and isinstance(get(params, "update"), dict):
            _update(info, params["update"], tools, variants)
    counts["tool_calls"] = len(tools)
    info.capabilities = capability_matrix(info.protocol_version, client_caps, agent_caps)
    info.meta_keys, info.extension_methods, info.extension_variants = sorted(meta), sorted(methods), sorted(variants)
    info.extra_members = sorted(extra)
    info.counts = counts
    return info


def _param(request: Any, key: str) -> Any:
    return get(get(request, "params"), key)


def _session_result(info: Info, result: dict[str, Any]) -> None:
    modes = result.get("modes")
    if isinstance(modes, dict):
        info.current_mode = modes.get("currentModeId", info.current_mode)
        info.modes = modes.get("availableModes") or info.modes
    if isinstance(result.get("configOptions"), list):
        info.config_options = result["configOptions"]
    models = result.get("models")
    if isinstance(models, dict):
        info.current_model = models.get("currentModelId", info.current_model)
        info.models = models.get("availableModels") or info.models


def _update(info: Info, u: dict[str, Any], tools: set[str], variants: set[str]) -> None:
    variant = u.get("sessionUpdate")
    if isinstance(variant, str) and variant.startswith("_"):
        variants.add(variant)
    apply = INFO_UPDATES.get(variant) if isinstance(variant, str) else None
    if apply is not None:
        apply(info, u, tools)


def _tool(info: Info, u: dict[str, Any], tools: set[str]) -> None:
    if isinstance(u.get("toolCallId"), str):
        tools.add(u["toolCallId"])


def _mode(info: Info, u: dict[str, Any], tools: set[str]) -> None:
    if isinstance(u.get("currentModeId"), str):
        info.current_mode = u["currentModeId"]


def _commands(info: Info, u: dict[str, Any], tools: set[str]) -> None:
    if isinstance(u.get("availableCommands"), list):
        info.commands = [str(c.get("name")) for c in u["availableCommands"] if isinstance(c, dict)]


def _config_options(info: Info, u: dict[str, Any], tools: set[str]) -> None:
    if isinstance(u.get("configOptions"), list):
        info.config_options = u["configOptions"]


# variant -> what it tells `info` (tools counted, mode, commands, config options); None: nothing.
INFO_UPDATES: dict[str, Callable[[Info, dict[str, Any], set[str]], None] | None] = vocab.variant_table(
    "share.info: session facts",
    {
        vocab.TOOL_CALL: _tool,
        vocab.TOOL_CALL_UPDATE: _tool,
        vocab.TOOL_CALL_CONTENT_CHUNK: None,
        vocab.CURRENT_MODE_UPDATE: _mode,
        vocab.AVAILABLE_COMMANDS_UPDATE: _commands,
        vocab.CONFIG_OPTION_UPDATE: _config_options,
        **dict.fromkeys(vocab.MESSAGE_CHUNKS | vocab.MESSAGE_UPSERTS, None),
        vocab.PLAN: None,
        vocab.PLAN_UPDATE: None,
        vocab.PLAN_REMOVED: None,
        vocab.TERMINAL_UPDATE: None,
        vocab.TERMINAL_OUTPUT_CHUNK: None,
        vocab.STATE_UPDATE: None,
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


def _meta_keys(value: Any, out: set[str], inside: bool = False, depth: int = 0) -> None:
    """The keys of every `_meta` object in the message (the names extensions use)."""
    if depth > 64:
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if inside:
                out.add(str(k))
            _meta_keys(v, out, k == "_meta" and isinstance(v, dict), depth + 1)
    elif isinstance(value, list):
        for v in value:
            _meta_keys(v, out, False, depth + 1)


# -- output -----------------------------------------------------------------------------------------------
def _name(info: Any) -> str:
    if not isinstance(info, dict):
        return "-"
    return clean(" ".join(str(info[k]) for k in ("name", "version") if info.get(k) is not None) or "-")


def _mark(value: bool | None) -> str:
    return "" if value is None else "yes" if value else "no"


def _ids(items: list[Any], *keys: str) -> str:
    names = []
    for item in items:
        if isinstance(item, dict):
            ident = next((item[k] for k in keys if item.get(k) is not None), "?")
            names.append(str(ident))
    return clean(", ".join(names)) or "-"


def _config(options: list[Any]) -> str:
    parts = []
    for o in options:
        if isinstance(o, dict):
            value = o.get("currentValue", o.get("value"))
            parts.append(
                f"{o.get('id', '?')}={json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value}"
            )
    return clean(", ".join(parts)) or "-"


def info_lines(info: Info) -> list[str]:
    """The one-screen text, stable for the same recording."""
    return [line for line, _ in info_report(info)]


def info_report(info: Info) -> list[tuple[str, bool]]:
    """info_lines as (line, heading): the capability table's header row is the heading."""
    width = max((len(r["capability"]) for r in info.capabilities), default=10)
    lines = [
        f"session   {clean(info.session_id)}  (connection {info.connection_id})"
        if info.session_id is not None
        else f"session   -  (connection {info.connection_id}, all its sessions)",
        f"protocol  {info.protocol_version if info.protocol_version is not None else '-'}",
        f"editor    {_name(info.client)}",
        f"agent     {_name(info.agent)}",
        "",
    ]
    head = len(lines)
    lines.append(f"{'CAPABILITY':<{width}}  EDITOR  AGENT")
    lines += [
        f"{r['capability']:<{width}}  {_mark(r['editor']):<6}  {_mark(r['agent'])}".rstrip() for r in info.capabilities
    ]
    c = info.counts
    lines += [
        "",
        f"auth methods     {_ids(info.auth_methods, 'id', 'methodId')}",
        f"mode             {clean(str(info.current_mode or '-'))}  (available: {_ids(info.modes, 'id')})",
        f"config options   {_config(info.config_options)}",
        f"model            {clean(str(info.current_model or '-'))}  (available: {_ids(info.models, 'modelId', 'id')})",
        f"commands         {clean(' '.join('/' + x for x in info.commands)) or '-'}",
        f"_meta keys       {clean(', '.join(info.meta_keys)) or '-'}",
        f"_ methods        {clean(', '.join(info.extension_methods)) or '-'}",
        f"_ variants       {clean(', '.join(info.extension_variants)) or '-'}",
        f"other members    {clean(', '.join(info.extra_members)) or '-'}",
        "counts           "
        + ", ".join(
            counted(c[key], noun)
            for key, noun in (
                ("turns", "turn"),
                ("tool_calls", "tool call"),
                ("permissions", "permission"),
                ("errors", "error"),
            )
        ),
    ]
    return [(line, i == head) for i, line in enumerate(lines)]


def render(info: Info, out: IO[bytes], style: Style | None = None) -> None:
    """The one-screen text (info_lines), its heading bold when `style` says color."""
    write_painted(out, ([(line, "1" if heading else None)] for line, heading in info_report(info)), style or Style())


def render_json(info: Info, out: IO[bytes]) -> None:
    """--json: everything as one object."""
    out.write(dumps_line(asdict(info)))
