"""`acp-relay replay`, the answers to lifecycle and session methods, made from the recording alone.

Pure functions of the Recording (and the client's capabilities): what `initialize`, `session/new`, load,
resume, list and set_config_option answer, and the history a load or resume replays. The core (core.py)
decides when to call them; keeping them apart leaves it the order of frames and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from ..protocol import vocab
from ..protocol.jsonrpc import dumps, get
from ..protocol.jsonspan import find_span
from ..protocol.materialize import replay_updates
from .recording import Recording

# Capabilities replay cannot serve, whatever the recorded agent advertised.
UNSERVED_CAPS = ("providers", "nes")
V1_SESSION_CAPS = ("list", "resume", "close", "additionalDirectories", "_meta")


def update_frame(sid_json: bytes, update_json: bytes) -> bytes:
    """A session/update notification frame (no newline) from the JSON of its session id and update."""
    return (
        b'{"jsonrpc":"2.0","method":"'
        + vocab.UPDATE.encode()
        + b'","params":{"sessionId":'
        + sid_json
        + b',"update":'
        + update_json
        + b"}}"
    )


def init_result(rec: Recording, version: str) -> dict:
    """The recorded initialize result, at the recorded protocol version, advertising only what replay serves
    (v1: loadSession always; never delete, fork, providers or nes). `version`: acp-relay's, for the info."""
    result = dict(rec.init_result or {})
    result["protocolVersion"] = rec.protocol_version
    info = {"name": "acp-relay-replay", "version": version}
    if rec.protocol_version >= 2:
        caps = dict(result.get("capabilities") or {})
        session = {k: v for k, v in dict(caps.get("session") or {}).items() if k not in ("delete", "fork")}
        caps = {k: v for k, v in caps.items() if k not in UNSERVED_CAPS}
        caps["session"] = session
        result["capabilities"] = caps
        result.setdefault("info", info)
    else:
        caps = dict(result.get("agentCapabilities") or {})
        caps["loadSession"] = True
        sc = {k: v for k, v in dict(caps.get("sessionCapabilities") or {}).items() if k in V1_SESSION_CAPS}
        sc["list"] = sc.get("list") if isinstance(sc.get("list"), dict) else {}
        caps["sessionCapabilities"] = sc
        caps = {k: v for k, v in caps.items() if k not in UNSERVED_CAPS}
        result["agentCapabilities"] = caps
        result.setdefault("agentInfo", info)
    result.setdefault("authMethods", [])
    return result


def session_result(rec: Recording, *, initial: bool) -> dict:
    """modes / configOptions: as recorded at creation (session/new), or as they ended (load, resume)."""
    v2 = rec.protocol_version >= 2
    out: dict[str, Any] = {}
    origin = rec.origin_result or {}
    state = rec.state
    if initial:
        for key in ("modes", "configOptions"):
            if key in origin and not (v2 and key == "modes"):
                out[key] = origin[key]
        return out
    if not v2:
        modes = origin.get("modes") if isinstance(origin.get("modes"), dict) else None
        available = state.available_modes or get(modes, "availableModes")
        current = state.mode or get(modes, "currentModeId")
        if available is not None and current is not None:
            out["modes"] = {"currentModeId": current, "availableModes": available}
    config = state.config_options if state.config_options is not None else origin.get("configOptions")
    if config is not None:
        out["configOptions"] = config
    return out


def list_result(rec: Recording) -> dict:
    """session/list: the one recorded session."""
    info: dict[str, Any] = {"sessionId": rec.session_id, "cwd": rec.cwd or "/"}
    if rec.title is not None:
        info["title"] = rec.title
    if rec.updated_at is not None:
        info["updatedAt"] = rec.updated_at
    return {"sessions": [info]}


def config_option_result(rec: Recording, params: dict) -> dict | None:
    """session/set_config_option: the options as they ended, the one set to its new value (None: the
    recorded session has no config options)."""
    config = session_result(rec, initial=False).get("configOptions")
    if not isinstance(config, list):
        return None
    option, value = params.get("configId"), params.get("value")
    value = get(value, "value") if isinstance(value, dict) else value
    out = []
    for opt in config:
        if isinstance(opt, dict) and option in (opt.get("id"), opt.get("configId")):
            opt = {**opt, "currentValue": value}
        out.append(opt)
    return {"configOptions": out}


def history_frames(rec: Recording, client_sid: str, client_caps: dict) -> list[bytes]:
    """The recorded conversation as session/update notifications for `client_sid` (load and resume)."""
    sid_json = dumps(client_sid)
    out = []
    for update in gate(replay_updates(rec.state, rec.protocol_version), rec.protocol_version >= 2, client_caps):
        known = rec.raw_updates.get(id(update))
        body = None
        if known is not None and known[0] is update:  # unknown variants: their recorded bytes
            try:
                span = find_span(known[1], ("params", "update"))
                body = known[1][span[0] : span[1]] if span else None
            except (ValueError, RecursionError):
                body = None
        out.append(update_frame(sid_json, body or dumps(update)))
    return out


def gate(updates: Iterable[dict], v2: bool, client_caps: dict) -> Iterator[dict]:
    """v1 clients get draft variants only when they advertised them (unstable variants such as
    compaction_* are opt-in client capabilities in v1); a v2 plan becomes a v1 `plan` otherwise."""
    if v2:
        yield from updates
        return
    compaction = isinstance(get(client_caps.get("session"), "compaction"), dict)
    plans = isinstance(client_caps.get("plan"), dict)
    for u in updates:
        variant = get(u, "sessionUpdate")
        if variant in (vocab.COMPACTION_UPDATE, vocab.COMPACTION_SUMMARY_CHUNK) and not compaction:
            continue
        if variant in (vocab.PLAN_UPDATE, vocab.PLAN_REMOVED) and not plans:
            plan = get(u, "plan")
            if get(plan, "type") == "items" and isinstance(plan.get("entries"), list):
                yield {"sessionUpdate": vocab.PLAN, "entries": plan["entries"]}
            continue
        yield u
