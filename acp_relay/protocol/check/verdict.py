"""The one verdict on a view's frames that `check` prints and `view` embeds: the message rules (engine), what
the transport's events soften or attribute to the relay, and the transport rules' own findings. Pure: the
caller reads the events and the relay's answers (store.check_queries.check_inputs)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .engine import check_frames
from .rules import Finding
from .transport import Event, check_transport, relay_made, soften_split_order


def verdict(
    frames: Iterable[tuple[Any, ...]],
    *,
    version: int | None,
    ended: bool,
    known: Iterable[str] = (),
    events: Iterable[Event] = (),
    answers: Iterable[int] = (),
) -> tuple[list[Finding], int]:
    """Every finding on the frames (check_frames' shape) and the number checked; `events` and `answers`: the
    connection's transport events and the frames the relay wrote itself."""
    found, n = check_frames(frames, version, ended, known)
    events = list(events)
    return relay_made(soften_split_order(found, events), answers) + check_transport(events), n
