"""Storing what spill journals kept: `acp-relay recover`, the next relay start, and a relay whose recorder
died. Each relay's segments go into its connection row (found by relay and recorder pid, or made from the
journal's header when the recorder never wrote one), frames it holds already are not stored twice, a last
partial line is stored flagged `unterminated`, and frames_unrecorded is the exact difference between the
frames the wire carried (the journal's count) and those stored.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..protocol.words import counted
from ..store.liveness import pid_alive, relay_connection
from . import journal, retained
from .journal import STREAMS

log = logging.getLogger(__name__)


@dataclass
class Recovered:
    relay_pid: int
    connection_id: int | None
    frames: int  # frames now stored on the connection
    unrecorded: int
    segments: int


def _head(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as f:
            for r in journal.read_typed(f):
                return r.config if isinstance(r, journal.Head) else None
    except (OSError, ValueError):
        return None
    return None


def recover_stale(db: Path) -> list[Recovered]:
    """Every journal beside `db` whose relay and recorder are both gone."""
    done = []
    for relay_pid, segs in journal.segments(db).items():
        head = _head(segs[0][1]) or {}
        recorder_pid = head.get("recorder_pid")
        if pid_alive(relay_pid) and relay_pid != os.getpid() or recorder_pid and pid_alive(recorder_pid):
            continue
        try:
            result = recover_relay(db, relay_pid, config=head)
        except Exception as exc:  # one bad journal must not stop the others (or the recorder calling us)
            log.warning(f"cannot store the spill journal of relay {relay_pid}: {exc}")
            continue
        if result is not None:
            done.append(result)
    for path, relay_pid, recorder_pid in retained.stale_reserves(db):  # a killed recorder's, never used
        if not pid_alive(relay_pid) and not pid_alive(recorder_pid):
            try:
                path.unlink()
            except OSError:
                pass
    return done


def recover_relay(
    db: Path,
    relay_pid: int,
    *,
    final: dict[str, Any] | None = None,
    config: dict[str, Any] | None = None,
    wire_seq: int | None = None,
) -> Recovered | None:
    """Store relay `relay_pid`'s journal segments; `final` overrides the row's last fields and `wire_seq`
    is the frames the wire carried (a live relay whose recorder died passes both). None when there was
    nothing to store and no row to finish."""
    from ..store import db as dbmod
    from .recorder import from_config

    segs = journal.segments(db, relay_pid).get(relay_pid, [])
    head = (_head(segs[0][1]) if segs else None) or config or {}
    conn = dbmod.connect(db)
    try:
        cid = relay_connection(conn, relay_pid, head.get("recorder_pid"))
    finally:
        conn.close()
    if not segs and cid is None:
        return None
    rec = from_config(db, head, relay_pid, resume=cid, quiet=True)
    rec.start()
    ended, closing, last_ts = _replay(rec, [path for _, path in segs])
    for code, stream in enumerate(STREAMS):
        if code not in ended:  # the relay died: a last line without its newline is kept, flagged
            rec.put(stream, b"", last_ts or time.time(), 0.0)
    fields = {"status": "interrupted", "closed_by": "relay_killed", **closing, **(final or {})}
    if last_ts and "ended_at" not in fields:
        fields["ended_at"] = last_ts
    # The segments go once the row is written; when it cannot be (the disk still full), they stay for the next try.
    if rec.close(wire_seq=wire_seq, **fields) and rec.final_unrecorded is not None:
        for _, path in segs:
            try:
                os.unlink(path)
            except OSError:
                pass
    unrecorded = rec.final_unrecorded or 0
    if unrecorded:
        log.warning(
            f"{counted(unrecorded, 'frame')} {'was' if unrecorded == 1 else 'were'} not recorded (connection {rec.connection_id})"
        )
    return Recovered(relay_pid, rec.connection_id, _count(db, rec.connection_id), unrecorded, len(segs))


def _replay(rec: journal.Sink, paths: list[Path]) -> tuple[set[int], dict[str, Any], float]:
    """Every record of the segments, in order, to the recorder: (the streams that ended, the CLOSE
    fields, the last wall time seen)."""
    ended: set[int] = set()
    closing: dict[str, Any] = {}
    last_ts = 0.0
    for path in paths:
        try:
            f = open(path, "rb", buffering=1 << 20)  # noqa: SIM115
        except OSError:
            continue
        with f:
            for r in journal.read_typed(f):
                last_ts = max(last_ts, r.ts)
                if isinstance(r, journal.Eof):
                    ended.add(STREAMS.index(r.stream))
                elif isinstance(r, journal.Close):
                    closing = r.fields
                journal.deliver(rec, r)
    return ended, closing, last_ts


def _count(db: Path, cid: int | None) -> int:
    from ..store import db as dbmod
    from ..store.writer import stored_frames

    if cid is None:
        return 0
    conn = dbmod.connect(db, readonly=True)
    try:
        return stored_frames(conn, cid)[0]
    finally:
        conn.close()


def run_recover(db: Path, out: Callable[[str], None]) -> int:
    """`acp-relay recover`: store every journal left by relays that are gone; 0, or 2 with no database."""
    if not db.exists() and not journal.segments(db):
        log.warning(f"no database at {db}")
        return 2
    done = recover_stale(db)
    for r in done:
        out(
            f"relay {r.relay_pid}: connection {r.connection_id}, {r.segments} journal segment(s), "
            f"{counted(r.frames, 'frame')} stored, {r.unrecorded} not recorded"
        )
    if not done:
        out("nothing to recover")
    return 0
