"""Record a connection from scripted bytes, in-process, the way the recorder does (see Recorder._insert).

For generated and scripted databases (tools/gen_db.py, tests/fixtures/recordings.py): every frame goes
through the real Tracker and the recorder's own row builder and statements, so the rows are what
`acp-relay run` would have written, with no relay or agent process.
"""

from __future__ import annotations

import sqlite3

from ..protocol.jsonrpc import A2C, C2A, ERR
from ..protocol.tracker import Frame, Tracker
from .writer import (
    INSERT_BATCH_MESSAGE,
    INSERT_FRAME,
    INSERT_STDERR,
    backfill_sessions,
    finish_connection,
    frame_rows,
    json_or_null,
    open_connection,
    session_rows,
    upsert_sessions,
)


class ConnectionWriter:
    """Record one connection from scripted bytes, the way the recorder does (see Recorder._insert)."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        started_at: float,
        argv: list[str],
        cwd: str = "/work",
        label: str | None = None,
        relay_pid: int = 4242,
    ) -> None:
        self.conn = conn
        self.started_at = started_at
        self.tracker = Tracker()
        self.bytes = {C2A: 0, A2C: 0, ERR: 0}
        self.frames = 0
        self.stderr_tail: list[bytes] = []
        self.id = open_connection(conn, started_at=started_at, argv=argv, cwd=cwd, label=label, relay_pid=relay_pid)
        self._pending: list[Frame] = []

    def feed(self, direction: str, chunk: bytes, mono: float) -> None:
        """Bytes read at `mono` seconds after the connection started."""
        self.bytes[direction] += len(chunk)
        self._pending += self.tracker.feed(direction, chunk, self.started_at + mono, mono)

    def line(self, direction: str, raw: bytes, mono: float) -> None:
        """One whole line (the fast path for generated traffic)."""
        self.bytes[direction] += len(raw) + 1
        self._pending.append(self.tracker.index_line(direction, raw, self.started_at + mono, mono))

    def eof(self, direction: str, mono: float) -> None:
        self._pending += self.tracker.eof(direction, self.started_at + mono, mono)

    def stderr(self, line: bytes, mono: float) -> None:
        self.bytes[ERR] += len(line) + 1
        self.stderr_tail = (self.stderr_tail + [line])[-20:]
        self.conn.execute(INSERT_STDERR, (self.id, self.started_at + mono, mono, line, 0))

    def flush(self) -> None:
        """Write the frames indexed so far with the recorder's own row builder and statements."""
        rows, batches = frame_rows(self.id, self._pending)
        self.conn.executemany(INSERT_FRAME, rows)
        if batches:
            self.conn.executemany(INSERT_BATCH_MESSAGE, batches)
        backfill = self.tracker.backfill
        if backfill:  # a request learns its session from its result (session/new), as in Recorder._insert
            backfill_sessions(self.conn, [(sid, self.id, seq) for seq, sid in backfill])
            backfill.clear()
        self.frames += len(self._pending)
        self._pending = []

    def close(
        self,
        *,
        ended_mono: float,
        status: str = "ended",
        exit_code: int | None = 0,
        exit_signal: int | None = None,
        closed_by: str | None = "editor_eof",
        error: str | None = None,
    ) -> None:
        self.flush()
        t = self.tracker
        upsert_sessions(self.conn, session_rows(self.id, t.sessions.values()))
        running = status == "running"
        finish_connection(
            self.conn,
            self.id,
            {
                "frames": self.frames,
                "bytes_c2a": self.bytes[C2A],
                "bytes_a2c": self.bytes[A2C],
                "bytes_stderr": self.bytes[ERR],
                "protocol_version": t.info.protocol_version,
                "client_info": json_or_null(t.info.client_info),
                "agent_info": json_or_null(t.info.agent_info),
                "ended_at": None if running else self.started_at + ended_mono,
                "status": status,
                "exit_code": None if running else exit_code,
                "exit_signal": exit_signal,
                "closed_by": None if running else closed_by,
                "error": error,
                "agent_pid": 4243,
                "unanswered": None if running else json_or_null(t.unanswered() or None),
                "stderr_tail": b"\n".join(self.stderr_tail).decode("utf-8", "replace") or None,
            },
        )
