"""`acp-relay replay`, the shell: stdin and stdout threads around the sans-I/O core, and the command's entry."""

from __future__ import annotations

import logging
import math
import os
import queue
import threading
import time
from pathlib import Path
from typing import Any

from ..fdio import Stopped, read_chunk, stopping_on_signals, write_all
from ..protocol.errors import SIGNAL_BASE
from ..protocol.framing import LineFramer
from .core import ReplayCore
from .recording import ReplayError, load_recording

log = logging.getLogger(__name__)


def parse_speed(text: str) -> float:
    """--speed to a time scale: seconds waited per recorded second (0 = no waiting)."""
    if text == "realtime":
        return 1.0
    if text == "fast":
        return 0.0
    try:
        factor = float(text)
    except ValueError:
        raise ReplayError(f"--speed takes realtime, fast or a number (2 = twice as fast), not {text!r}") from None
    if not factor > 0 or math.isinf(factor) or math.isnan(factor):
        raise ReplayError(f"--speed must be a positive number, not {text!r}")
    return 1.0 / factor


# ---- the shell ----------------------------------------------------------------------------------------------
_EOF = object()


def _reader(fd: int, q: queue.Queue[Any]) -> None:
    framer = LineFramer()
    try:
        while True:
            try:
                chunk = read_chunk(fd)
            except OSError:
                break
            if not chunk:
                break
            for line in framer.feed(chunk):
                q.put(line)
        last = framer.finish()
        if last is not None:
            q.put(last)
    finally:
        q.put(_EOF)


def serve(core: ReplayCore, *, stdin_fd: int = 0, stdout_fd: int = 1) -> int:
    """Feed stdin lines to the core until EOF, writing its frames to stdout."""
    q: queue.Queue[Any] = queue.Queue()
    threading.Thread(target=_reader, args=(stdin_fd, q), name="acp-relay-replay-stdin", daemon=True).start()
    while True:
        deadline = core.next_deadline()
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            item = q.get(timeout=timeout)
        except queue.Empty:
            item = None
        if item is _EOF:
            log.info("stdin closed: exiting")
            return 0
        now = time.monotonic()
        frames = core.receive(item, now) if item is not None else core.poll(now)
        if frames:
            try:
                write_all(stdout_fd, b"".join(f + b"\n" for f in frames))
            except OSError as exc:
                log.info(f"cannot write to the client ({exc}): exiting")
                return 0


def run_replay(
    db_path: str | os.PathLike[str],
    session: str,
    *,
    speed: str = "realtime",
    strict: bool = False,
) -> int:
    """`acp-relay replay`: serve SESSION on stdin/stdout until stdin closes; returns the exit status."""
    try:
        scale = parse_speed(speed)
        rec = load_recording(Path(db_path), session)
    except ReplayError as exc:
        log.warning(str(exc), extra={"hint": exc.hint} if exc.hint else None)
        return exc.status
    for note in rec.notes:
        log.info(note)
    log.info(f"serving {rec.summary()}; speed {speed}{', strict' if strict else ''}")
    try:
        with stopping_on_signals():
            return serve(ReplayCore(rec, scale=scale, strict=strict))
    except Stopped as exc:  # SIGTERM, SIGINT, SIGHUP: 128+N (it started no process to end)
        return SIGNAL_BASE + exc.signum
    except KeyboardInterrupt:
        return SIGNAL_BASE + 2
