"""The order frames crossed the relay in, restored from the recorder's stamps (sans-I/O)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from ..jsonrpc import C2A

HOLD_BYTES = 16 << 20  # raw bytes causal_order keeps waiting at most (a 64 MiB reply is not held twice)


def causal_order(
    frames: Iterable[tuple[Any, ...]], hold: int = 10_000, hold_bytes: int = HOLD_BYTES
) -> Iterator[tuple[Any, ...]]:
    """Frames (id, direction, raw, unterminated, session, mono) in the order they crossed the relay.

    The relay stamps a chunk when it reads it and records it after forwarding it, one pump per direction,
    so an answer and the request it caused can be stored the wrong way round (the editor's session/new
    before the initialize answer it waited for). Each direction's stamps are in order: merging the two by
    stamp restores the wire's order. A frame waits until the other direction has a later one (or ends);
    at most `hold` frames and `hold_bytes` of raw bytes wait, so neither a long one-sided stream nor a few
    huge frames (an agent's reply after the editor's last line waits to the end) are held whole. Rows
    without a stamp (the 5-tuple form, or a null stamp) pass through in the order given."""
    it = iter(frames)
    first = next(it, None)
    if first is None:
        return
    if len(first) < 6 or first[5] is None:
        yield first
        yield from it
        return
    editor: deque[tuple[Any, ...]] = deque([first] if first[1] == C2A else [])
    agent: deque[tuple[Any, ...]] = deque([] if first[1] == C2A else [first])
    held = len(first[2])
    del first
    for row in it:
        if row[5] is None:
            yield row
            continue
        queue = editor if row[1] == C2A else agent
        queue.append(row)
        held += len(row[2])
        del row  # the queue holds it; not this name while the next row is read
        while editor and agent:
            e, a = editor[0], agent[0]
            out = editor.popleft() if (e[5], e[0]) <= (a[5], a[0]) else agent.popleft()
            del e, a
            held -= len(out[2])
            yield out
            del out
        while len(queue) > hold or (queue and held > hold_bytes):
            out = queue.popleft()
            held -= len(out[2])
            yield out
            del out
    while editor and agent:
        e, a = editor[0], agent[0]
        yield editor.popleft() if (e[5], e[0]) <= (a[5], a[0]) else agent.popleft()
    yield from editor
    yield from agent
