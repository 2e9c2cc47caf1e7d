"""`acp-relay replay`, what is playing: the client's sessions, the turn each one plays, batch replies, and
the rewrite of a recorded message into the bytes sent for it.

The core (core.py) moves these along; the rewrite splices only what must change into the recorded bytes.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from ..protocol.jsonrpc import dumps, get, id_key, loads
from ..protocol.jsonspan import find_all, find_span, splice
from .recording import RECORDED_SID, Member, RecordedTurn

log = logging.getLogger(__name__)


@dataclass
class BatchReply:
    """The answers to one client batch: JSON-RPC sends them as one array, so a prompt in the batch holds the
    array until its own response is due (v1: the turn's end; v2: the acceptance)."""

    parts: list[bytes] = field(default_factory=list)
    pending: int = 0  # prompts in the batch not answered yet
    closed: bool = False  # every member of the batch was handled


@dataclass
class ClientSession:
    id: str
    prompts: int = 0  # prompts played (the next one plays turn prompts + 1)
    playback: Playback | None = None
    queued: list[tuple[bytes, RecordedTurn, BatchReply | None]] = field(default_factory=list)
    loaded: bool = False  # session/load or session/resume: the client holds every recorded turn already


@dataclass
class Playback:
    session: ClientSession
    turn: RecordedTurn
    prompt_id: bytes | None  # the client's id, as its bytes; None for the setup steps after session/new
    ready: float  # the time the previous step finished
    pos: int = 0
    waiting: dict = field(default_factory=dict)  # our request id key -> its Member, still unanswered
    cancelled: bool = False
    accepted: bool = False
    ended: bool = False
    paused: bool = False
    id_map: dict = field(default_factory=dict)  # recorded agent request id key -> our fresh id
    batch: BatchReply | None = None  # the client's batch this prompt came in, until it is answered


def rewrite(
    pb: Playback,
    member: Member,
    new_id: int | None,
    recorded_sid: str,
    terminal_ids: dict[str, str],
) -> bytes:
    """The recorded bytes with the client's session id, fresh or client ids, the client's terminal ids."""
    raw, msg = member.raw, member.message
    values: dict[tuple[Any, ...], bytes] = {}
    params = msg.get("params")
    if get(params, "sessionId") in (recorded_sid, RECORDED_SID):
        values[("params", "sessionId")] = dumps(pb.session.id)
    if new_id is not None:
        values[("id",)] = dumps(new_id)
    if member.role == "prompt_response" and pb.prompt_id is not None:
        values[("id",)] = pb.prompt_id
    if member.role == "cancel_request":
        mapped = pb.id_map.get(id_key(get(params, "requestId")))
        if mapped is not None:
            values[("params", "requestId")] = dumps(mapped)
    try:
        edits = []
        for path, new in values.items():
            span = find_span(raw, path)
            if span is not None:
                edits.append((span[0], span[1], new))
        if terminal_ids and b"terminalId" in raw:
            for s, e in find_all(raw, "terminalId"):
                old = loads(raw[s:e])
                if isinstance(old, str) and old in terminal_ids:
                    edits.append((s, e, dumps(terminal_ids[old])))
        return splice(raw, edits)
    except (ValueError, RecursionError) as exc:  # cannot happen for parsed JSON; re-serialize if it does
        log.warning(f"could not splice a recorded frame ({exc}); sending it re-serialized")
        copy = json.loads(dumps(msg))
        for path, new in values.items():
            target = copy
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = loads(new)
        return dumps(copy)
