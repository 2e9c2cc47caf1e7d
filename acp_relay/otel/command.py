"""`acp-relay otel export`: recorded sessions as OpenTelemetry traces, sent over OTLP or written as OTLP JSON.

Each session is read, mapped by protocol/spans.py (redacted on the way) and handed to the official SDK's
exporter in one go; a session the collector did not take is counted as failed, and once one has failed the
rest are not tried (a collector that is down would make every one of them wait out its retries).
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from ..fdio import UnsafeTarget, open_target
from ..protocol.check.verdict import verdict
from ..protocol.errors import UserError
from ..protocol.redact import Policy
from ..protocol.session_state import Event
from ..protocol.spans import SpanRecord, session_spans
from ..protocol.words import counted
from ..store import db as dbmod
from ..store.check_queries import check_inputs, frames_to_check
from ..store.otel import clear_pending, connection_sessions, pending_sessions, session_row, sessions_since
from ..store.queries import View, iter_messages, resolve_view
from ..store.rows import database_file
from ..store.units import duration_seconds


@dataclass
class ExportOptions:
    """What `otel export` was asked for (cli.py parses the options into this)."""

    session: str | None = None
    connection: int | str | None = None
    since: str | None = None
    all: bool = False
    endpoint: str | None = None
    protocol: str | None = None
    headers: list[str] = field(default_factory=list)
    file: str | None = None
    content: bool = False
    check: bool = False
    policy: Policy = field(default_factory=Policy)
    pending: bool = False  # only the spans `run --otlp` could not send
    force: bool = False  # --file may replace a regular file


@dataclass
class Summary:
    """What an export did: sessions and spans sent (or written), and the session that failed, if one did."""

    where: str = ""  # the file or the collector
    selected: int = 0  # sessions selected
    sessions: int = 0
    spans: int = 0
    failed: int = 0
    skipped: int = 0
    reason: str | None = None
    failed_name: str | None = None  # the first session not sent

    @property
    def status(self) -> int:
        """The exit status: 0 everything sent, 1 a session was not."""
        return 1 if self.failed else 0

    def line(self) -> str:
        n = self.sessions
        text = f"exported {n} session{'s' if n != 1 else ''} ({self.spans} span{'s' if self.spans != 1 else ''})"
        text += f" to {self.where}"
        if self.failed or self.skipped:
            text += f"; {self.failed} failed"
            if self.skipped:
                text += f", {self.skipped} not tried after that"
        return text


def parse_headers(pairs: list[str]) -> dict[str, str] | None:
    """--header K=V (repeatable) as a dict; None when none was given (the variables apply then)."""
    out = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise UserError(f"--header takes KEY=VALUE, not {pair!r}")
        out[key.strip()] = value.strip()
    return out or None


def select_views(conn: sqlite3.Connection, opts: ExportOptions, now: float | None = None) -> list[View]:
    """The sessions to export: SESSION (within -c N), every session of -c N, those active --since AGE
    ago, or --all; none of these means `last`."""
    if opts.session is not None:
        if opts.since or opts.all:
            raise UserError("give SESSION, or --since/--all, not both")
        return [resolve_view(conn, opts.session, opts.connection)]
    if opts.connection is not None and not opts.since and not opts.all:
        cid = resolve_view(conn, None, opts.connection).connection_id
        return [resolve_view(conn, sid, c) for sid, c in connection_sessions(conn, cid)]
    if opts.since or opts.all:
        since = None
        if opts.since:
            seconds = duration_seconds(opts.since)
            if seconds is None:
                raise UserError(f"--since takes an age (30m, 12h, 1d), not {opts.since!r}")
            since = (time.time() if now is None else now) - seconds
        keys = sessions_since(conn, since)
        if opts.connection is not None:
            cid = resolve_view(conn, None, opts.connection).connection_id
            keys = [k for k in keys if k[1] == cid]
        return [resolve_view(conn, sid, cid) for sid, cid in keys]
    return [resolve_view(conn, "last")]


def view_events(conn: sqlite3.Connection, view: View) -> Iterator[Event]:
    """The session's messages as the materializer takes them (batches unpacked, requests attached)."""
    for f, msg, request in iter_messages(conn, view):
        yield Event(f.seq, f.ts, f.direction, msg, request=request, frame_id=f.id, raw=f.raw)


def view_findings(conn: sqlite3.Connection, view: View) -> dict[int, list[tuple[str, str, str]]]:
    """`acp-relay check`'s verdict on the session's frames (its connection is checked whole: a request's
    'never answered' needs the rest of it), by frame id."""
    whole = resolve_view(conn, None, view.connection_id)
    found, _ = verdict(frames_to_check(conn, whole), **check_inputs(conn, whole))
    out: dict[int, list[tuple[str, str, str]]] = {}
    for f in found:
        if f.frame is not None and (f.session is None or f.session == view.session_id):
            out.setdefault(f.frame, []).append((f.rule, f.severity, f.message))
    return out


def view_spans(conn: sqlite3.Connection, view: View, opts: ExportOptions) -> tuple[list[SpanRecord], dict[str, Any]]:
    """One session's spans and resource attributes."""
    assert view.session_id is not None
    row = session_row(conn, view.session_id, view.connection_id)
    attributes = {
        "acp.session.origin": row.get("origin"),
        "acp.session.parent_id": row.get("parent_session_id"),
        "acp.connection.id": view.connection_id,
    }
    return session_spans(
        view_events(conn, view),
        view.session_id,
        view.protocol_version or 1,
        content=opts.content,
        policy=opts.policy,
        findings=view_findings(conn, view) if opts.check else None,
        session_attributes=attributes,
    )


class Progress:
    """`session 3/40` on stderr, rewritten in place, when stderr is a terminal and the export is large."""

    def __init__(self, total: int, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        self.on = total > 1 and self.stream.isatty()
        self.total = total

    def step(self, done: int, spans: int) -> None:
        if self.on:
            self.stream.write(f"\racp-relay: otel export: session {done}/{self.total}, {counted(spans, 'span')}")
            self.stream.flush()

    def end(self) -> None:
        if self.on:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def compute(conn: sqlite3.Connection, opts: ExportOptions | None = None) -> Summary:
    """Export the selected sessions (ExportOptions: SESSION, -c, --since, --all or --pending; where to) and
    say what was sent. Once a session has failed the rest are not tried; --pending clears what it sent."""
    from . import sdk  # the SDK and protobuf: only now

    opts = opts or ExportOptions()
    if opts.file and (opts.endpoint or opts.protocol):
        raise UserError("--file writes OTLP JSON instead of sending: no --endpoint or --protocol with it")
    headers = parse_headers(opts.headers)
    views, wanted = select_pending(conn, opts) if opts.pending else (select_views(conn, opts), {})
    summary = Summary(opts.file or _where(opts), len(views))
    progress = Progress(len(views))
    why = sdk.Why()
    try:
        exporter = None if opts.file else sdk.make_exporter(opts.endpoint, opts.protocol, headers, why=why)
    except sdk.ExportError as exc:
        raise UserError(str(exc)) from None
    sink = _open_file(opts.file, opts.force) if opts.file and views else None  # no file for nothing
    try:
        with sdk.quiet_sdk(why):
            for n, view in enumerate(views, 1):
                if summary.failed:
                    summary.skipped += 1
                    continue
                ok, spans = _export_view(conn, view, opts, wanted, sink, exporter, why)
                if ok:
                    summary.sessions += 1
                    summary.spans += spans
                else:
                    summary.failed += 1
                    summary.reason = why.message or "the collector did not accept the spans"
                    summary.failed_name = view.name
                progress.step(n, summary.spans)
    finally:
        progress.end()
        if sink is not None:
            sink.close()
        if exporter is not None:
            exporter.shutdown()
    return summary


def render(summary: Summary, out: IO[bytes], style: Any = None) -> None:
    """The summary line: sessions and spans, where to, how many failed."""
    out.write((summary.line() + "\n").encode("utf-8", "replace"))


def notes(summary: Summary) -> list[str]:
    """What is said on stderr: nothing selected, or which session was not sent and why."""
    if not summary.selected:
        return ["no sessions to export"]
    if summary.failed:
        return [f"{summary.failed_name or 'a session'} not sent: {summary.reason}"]
    return []


def _export_view(
    conn: sqlite3.Connection,
    view: View,
    opts: ExportOptions,
    wanted: dict[tuple[int, str], set[str]],
    sink: IO[bytes] | None,
    exporter: Any,
    why: Any,
) -> tuple[bool, int]:
    """One session's spans written to `sink` or sent to `exporter`: (done, how many spans)."""
    from . import sdk

    records, resource = view_spans(conn, view, opts)
    key = (view.connection_id, view.session_id or "")
    if key in wanted:
        records = [r for r in records if f"{r.span_id:016x}" in wanted[key]]
    if not records:  # a session without a frame of its own (a subagent's, announced in its parent)
        ok = True
    elif sink is not None:
        sink.write(sdk.traces_json(records, resource))
        ok = True
    else:
        assert exporter is not None
        ok = sdk.send(exporter, sdk.readable_spans(records, resource), why)
    if ok and key in wanted:
        _cleared(conn, key, wanted[key])
    return ok, len(records)


def select_pending(conn: sqlite3.Connection, opts: ExportOptions) -> tuple[list[View], dict[tuple[int, str], set[str]]]:
    """--pending: the sessions with spans `run --otlp` could not send, and those spans' ids. A session
    that is no longer recorded (pruned, deleted) has its rows dropped."""
    if opts.session or opts.connection or opts.since or opts.all or opts.file:
        raise UserError("--pending sends what `run --otlp` could not: no SESSION, -c, --since, --all or --file")
    views, wanted = [], {}
    for cid, sid, ids in pending_sessions(conn):
        try:
            view = resolve_view(conn, sid, cid)
        except UserError:
            _cleared(conn, (cid, sid), ids)
            continue
        views.append(view)
        wanted[(cid, sid)] = ids
    return views, wanted


def _cleared(conn: sqlite3.Connection, key: tuple[int, str], ids: set[str]) -> None:
    """Forget the pending spans sent: through a connection of its own, as `conn` may be read-only."""
    path = database_file(conn)
    assert path is not None, "--pending needs a database file"
    writer = dbmod.connect(path, create=False)
    try:
        clear_pending(writer, key[0], key[1], ids)
    finally:
        writer.close()


def _where(opts: ExportOptions) -> str:
    if opts.endpoint:
        return opts.endpoint
    return os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318 (the OTLP default)"
    )


def _open_file(path: str, force: bool) -> IO[bytes]:
    """The OTLP JSON file, private (spans may hold message text with --content), by fdio.check_target's
    rule: a new file, or with --force a regular file emptied."""
    try:
        fd = open_target(path, force=force)
    except UnsafeTarget as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror}") from None
    return os.fdopen(fd, "wb")
