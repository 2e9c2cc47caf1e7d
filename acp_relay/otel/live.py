"""`acp-relay run --otlp URL`: each turn sent as it ends, by a process of its own that follows the database.

The relay starts `acp-relay otel follow` beside its recorder and never talks to it: the follower reads the
frames the recorder commits (read-only, like `show --follow`), folds them per session with the same
SpanBuilder as `otel export`, and sends what each frame finished. The wire cannot wait for a collector it
never touches. What the collector does not take is noted in otel_pending (migration 008) and sent later by
`acp-relay otel export --pending`; after a failure the follower stops trying for a while (a dead collector
would make every turn wait out the exporter's retries) and notes those turns pending straight away.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..protocol import vocab
from ..protocol.redact import Policy
from ..protocol.session_state import Event
from ..protocol.spans import SpanBuilder, SpanRecord
from ..store import db as dbmod
from ..store.otel import find_relay_connection, frames_after, mark_pending, session_row
from ..store.queries import connection_running, open_db
from ..store.rows import FrameRow
from ..store.stats_queries import protocol_version

log = logging.getLogger(__name__)

POLL = 0.25  # seconds between looks at the database
PAUSE_AFTER_FAILURE = 30.0  # seconds during which finished turns are noted pending without trying
FIND_TIMEOUT = 30.0  # seconds to wait for the relay's connection row


@dataclass
class FollowOptions:
    db: Path
    relay_pid: int
    after: float
    endpoint: str | None = None
    protocol: str | None = None
    headers: dict[str, str] | None = None
    content: bool = False
    policy: Policy = field(default_factory=Policy)


class Follower:
    """Frames in (as the recorder committed them), spans out to the exporter, failures to otel_pending."""

    def __init__(self, opts: FollowOptions, cid: int, conn: sqlite3.Connection, exporter: Any, why: Any) -> None:
        self.opts, self.cid, self.conn, self.exporter, self.why = opts, cid, conn, exporter, why
        self.builders: dict[str, SpanBuilder] = {}
        self.head: list[Event] = []  # the connection's initialize exchange: every session's view starts with it
        self.creating: dict[int, Event] = {}  # session-creating requests by seq, until their answer names one
        self.paused_until = 0.0
        self.sent = self.pending = 0
        self._writer: sqlite3.Connection | None = None

    def frame(self, f: FrameRow, members: list[dict[str, Any]] | None) -> None:
        msg = f.message()
        if f.kind == "batch" and isinstance(msg, list) and members is not None:
            for m, member in zip(msg, members, strict=False):
                self._message(f, m, member.get("session_id"), member.get("method"), member.get("request_seq"))
        elif isinstance(msg, dict):
            self._message(f, msg, f.session_id, f.method, f.request_seq)

    def _message(self, f: FrameRow, msg: Any, sid: str | None, method: str | None, request_seq: int | None) -> None:
        event = Event(f.seq, f.ts, f.direction, msg, frame_id=f.id, raw=f.raw)
        if sid is None:
            if method == vocab.INITIALIZE:
                self.head.append(event)
                for each in self.builders.values():
                    self._ship(each, each.feed(event))
            elif method in vocab.SESSION_ORIGINS and isinstance(msg, dict) and "id" in msg and "method" in msg:
                self.creating[f.seq] = event
            return
        found = self.builders.get(sid)
        builder = found or self._builder(sid)
        if found is None:
            self.builders[sid] = builder
            creating = self.creating.pop(request_seq, None) if request_seq is not None else None
            for earlier in [*self.head, *([creating] if creating else [])]:
                self._ship(builder, builder.feed(earlier))
        answers = method if isinstance(msg, dict) and "method" not in msg else None  # the index's request method
        self._ship(builder, builder.feed(event, answers))

    def _builder(self, sid: str) -> SpanBuilder:
        row = session_row(self.conn, sid, self.cid)
        attributes = {
            "acp.connection.id": self.cid,
            "acp.session.origin": row.get("origin"),
            "acp.session.parent_id": row.get("parent_session_id"),
        }
        version = protocol_version(self.conn, self.cid) or 1
        return SpanBuilder(
            sid, version, content=self.opts.content, policy=self.opts.policy, session_attributes=attributes
        )

    def finish(self) -> None:
        for builder in self.builders.values():
            self._ship(builder, builder.finish())

    def _ship(self, builder: SpanBuilder, spans: list[SpanRecord]) -> None:
        if not spans:
            return
        from . import sdk

        now = time.time()
        ok = False
        if now >= self.paused_until:
            ok = sdk.send(self.exporter, sdk.readable_spans(spans, builder.resource()), self.why)
        if ok:
            self.sent += len(spans)
            return
        if now >= self.paused_until:
            self.paused_until = time.time() + PAUSE_AFTER_FAILURE
        reason = self.why.message or "the collector did not accept the spans"
        self.pending += len(spans)
        try:
            mark_pending(
                self.writer(), self.cid, builder.session_id, [(f"{s.span_id:016x}", s.name) for s in spans], reason, now
            )
        except sqlite3.Error:
            pass  # counted in self.pending all the same: the closing line says how many were lost

    def writer(self) -> sqlite3.Connection:
        """A write connection, opened the first time something must be noted pending."""
        if self._writer is None:
            self._writer = dbmod.connect(self.opts.db, create=False)
        return self._writer


def follow(opts: FollowOptions, sleep: Callable[[float], None] = time.sleep) -> int:
    """Follow the relay's connection until it ends; 0, or 1 when spans were left pending."""
    from . import sdk

    try:
        os.nice(10)  # behind the relay and the recorder when CPUs are scarce
    except OSError:
        pass
    conn = _wait_for_db(opts, sleep)
    cid = None
    deadline = time.monotonic() + FIND_TIMEOUT
    while conn is not None and cid is None and time.monotonic() < deadline:
        cid = find_relay_connection(conn, opts.relay_pid, opts.after)
        if cid is None:
            sleep(POLL)
    if conn is None or cid is None:
        log.warning("the relay's connection never appeared in the database; nothing sent")
        return 1
    why = sdk.Why()
    exporter = sdk.make_exporter(opts.endpoint, opts.protocol, opts.headers, why=why)
    follower = Follower(opts, cid, conn, exporter, why)
    last = 0
    with sdk.quiet_sdk(why):
        while True:
            running = connection_running(conn, cid)  # before reading: its last frames precede the status
            rows = frames_after(conn, cid, last)
            for f, members in rows:
                follower.frame(f, members)
                last = f.id
            if not rows and not running:
                break
            if not rows:
                sleep(POLL)
        follower.finish()
        exporter.shutdown()
    if follower.pending:
        log.warning(
            f"{follower.pending} span{'s' if follower.pending != 1 else ''} not sent ({why.message or 'collector'}); "
            "send them with `acp-relay otel export --pending`"
        )
    return 1 if follower.pending else 0


def _wait_for_db(opts: FollowOptions, sleep: Callable[[float], None]) -> sqlite3.Connection | None:
    deadline = time.monotonic() + FIND_TIMEOUT
    while time.monotonic() < deadline:
        if opts.db.exists():
            try:
                return open_db(opts.db)
            except Exception:
                pass
        sleep(POLL)
    return None
