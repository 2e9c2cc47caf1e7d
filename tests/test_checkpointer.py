"""The recorder's WAL checkpoints run on their own thread, and the WAL still starts over (stays bounded)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import orjson
import pytest

from acp_relay.protocol.jsonrpc import A2C
from acp_relay.record.recorder import Recorder
from acp_relay.store import checkpointer

FRAMES = 6000
TEXT = "x" * 3000


def _flood(db: Path) -> tuple[int, int]:
    """Record FRAMES 3 KB notifications (18 MB) in 64 KiB chunks; (largest WAL size seen, frames stored)."""
    line = orjson.dumps(
        {"jsonrpc": "2.0", "method": "session/update", "params": {"update": {"sessionUpdate": "x", "text": TEXT}}}
    )
    body = (line + b"\n") * FRAMES
    rec = Recorder(db, argv=["a"], cwd="/", label=None)
    rec.start()
    wal = Path(str(db) + "-wal")
    largest = 0
    for i in range(0, len(body), 1 << 16):
        rec.put(A2C, body[i : i + (1 << 16)])
        if wal.exists():
            largest = max(largest, wal.stat().st_size)
    rec.close()
    assert not rec.writer.checkpoints._thread.is_alive()  # stopped before the writer's connection closed
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return largest, conn.execute("SELECT count(*) FROM frames").fetchone()[0]
    finally:
        conn.close()


@pytest.fixture(autouse=True)
def _small_checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpointer, "CHECKPOINT_BYTES", 256 << 10)
    monkeypatch.setattr(checkpointer, "WAL_LIMIT_PAGES", 100)


def test_the_wal_starts_over_while_the_checkpointer_copies(tmp_path: Path) -> None:
    largest, frames = _flood(tmp_path / "r.db")
    assert frames == FRAMES
    assert largest < 8 << 20  # without the writer's tail copy the WAL grows to the whole flood (18 MB)
    assert not Path(str(tmp_path / "r.db") + "-wal").exists()  # the last close checkpointed it all


def test_without_a_checkpointer_the_writer_checkpoints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: checkpointer.Checkpointer) -> None:
        self.failed = self.behind = True

    monkeypatch.setattr(checkpointer.Checkpointer, "_run", broken)
    largest, frames = _flood(tmp_path / "r.db")
    assert frames == FRAMES and largest < 8 << 20
    assert not Path(str(tmp_path / "r.db") + "-wal").exists()


def test_a_starved_checkpoint_holds_the_writer_not_the_wal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checkpoint thread stalls mid-copy (a starved CPU) until the writer waits for it: the WAL stays
    bounded because the writer (off the wire's path) waits. Before, the WAL grew to the whole flood, and a
    loaded machine showed 9.4 MB in the test above."""
    stalled = threading.Event()
    original_wait = threading.Event.wait
    original_run = checkpointer.Checkpointer._run

    def writer_waits(self: threading.Event, timeout: float | None = None) -> bool:
        if self is getattr(current, "_copied", None):
            stalled.set()  # the writer has noticed the stalled copy and waits for it: let the copy finish
        return original_wait(self, timeout)

    current: checkpointer.Checkpointer | None = None

    def run(self: checkpointer.Checkpointer) -> None:
        nonlocal current
        current = self
        original_run(self)

    class SlowConnection(sqlite3.Connection):
        def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
            if "wal_checkpoint" in sql and threading.current_thread().name == "acp-relay-checkpoint":
                original_wait(stalled, 60)  # only a failing (unfixed) run ever waits this out
            return super().execute(sql, *args)  # type: ignore[arg-type]

    real_connect = sqlite3.connect
    monkeypatch.setattr(threading.Event, "wait", writer_waits)
    monkeypatch.setattr(checkpointer.Checkpointer, "_run", run)
    monkeypatch.setattr(
        checkpointer.sqlite3, "connect", lambda *a, **k: real_connect(*a, **{**k, "factory": SlowConnection})
    )
    largest, frames = _flood(tmp_path / "r.db")
    assert frames == FRAMES
    assert stalled.is_set()
    assert largest < 8 << 20  # the bound of the test above; the stalled copy let the WAL reach the 18 MB flood
