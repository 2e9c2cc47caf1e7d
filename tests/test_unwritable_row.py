"""Issue 30, item 13: a full disk (or a read-only file) mid-session left the connection row `running` with
frames_unrecorded = 0 while stderr said N frames were not recorded, and `recover` said there was nothing to
recover. Now what the row should say is kept in a journal segment beside the database, and `recover` (or
the next relay start) writes it exactly. The failure is injected (SQLite's own error, raised by the write
functions the recorder calls once the test says the disk is full): no timing, no real full disk."""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

import acp_relay.record.recover as recover_mod
from acp_relay.protocol.tracker import A2C, C2A
from acp_relay.record import journal, retained
from acp_relay.record.recorder import Recorder
from acp_relay.store import writer

ERRORS = {
    "full": "database or disk is full",
    "read-only": "attempt to write a readonly database",
}


class Disk:
    """The database's writes fail while `full` is set: its batches and the connection's last row (and the
    last row alone while `row_full` is)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, error: str) -> None:
        self.full = self.row_full = False
        self.error = error
        self.stored = threading.Event()  # a batch went in
        insert, finish = writer.insert_batch, writer.finish_connection

        def insert_batch(*args: Any, **kwargs: Any) -> None:
            self._check(self.full)
            insert(*args, **kwargs)
            self.stored.set()

        def finish_connection(*args: Any, **kwargs: Any) -> None:
            self._check(self.full or self.row_full)
            finish(*args, **kwargs)

        monkeypatch.setattr(writer, "insert_batch", insert_batch)
        monkeypatch.setattr(writer, "finish_connection", finish_connection)

    def _check(self, full: bool) -> None:
        if full:
            raise sqlite3.OperationalError(self.error)


def _line(i: int) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "method": "x/ping", "params": {"i": i}}) + b"\n"


def _session(db: Path, disk: Disk) -> tuple[int, int]:
    """A recording whose disk fills after its first frames: (frames the wire carried, connection id)."""
    rec = Recorder(db, argv=["agent"], cwd="/", label="t", relay_pid=4_000_000)
    rec.journal_head = {
        "argv": ["agent"],
        "cwd": "/",
        "label": "t",
        "relay_pid": 4_000_000,
        "recorder_pid": os.getpid(),
    }
    rec.start()
    for i in range(3):
        rec.put(C2A, _line(i))
    assert disk.stored.wait(60)
    disk.full = True
    for i in range(3, 20):
        rec.put(A2C if i % 2 else C2A, _line(i))
    rec.put(C2A, b"")
    rec.put(A2C, b"")
    rec.close(status="ended", exit_code=0, closed_by="agent")
    assert rec.connection_id is not None
    return 20, rec.connection_id


def _row(db: Path, cid: int) -> tuple[Any, ...]:
    conn = sqlite3.connect(db)
    try:
        row = conn.execute(
            "SELECT status, frames_unrecorded, exit_code, closed_by, (SELECT count(*) FROM frames WHERE "
            "connection_id = ?) FROM connections WHERE id = ?",
            (cid, cid),
        ).fetchone()
        return tuple(row)
    finally:
        conn.close()


@pytest.fixture
def gone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The session's relay and recorder are gone (the recorder is this process, under test)."""
    monkeypatch.setattr(recover_mod, "pid_alive", lambda pid: False)


@pytest.mark.parametrize("fault", list(ERRORS))
def test_a_row_the_disk_could_not_take_is_finished_exactly_by_recover(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, gone: None, fault: str
) -> None:
    db = tmp_path / "rec.db"
    disk = Disk(monkeypatch, ERRORS[fault])
    with caplog.at_level(logging.WARNING, logger="acp_relay"):
        carried, cid = _session(db, disk)
    status, unrecorded, _, _, stored = _row(db, cid)
    lost = carried - stored
    assert 0 < stored < carried and status == "running" and unrecorded == 0  # the row as the disk left it
    assert f"{lost} frames were not recorded (connection {cid})" in caplog.text
    assert journal.segments(db)  # what the row should say waits beside the database
    disk.full = False
    lines: list[str] = []
    assert recover_mod.run_recover(db, lines.append) == 0
    assert _row(db, cid) == ("ended", lost, 0, "agent", stored)
    assert lines == [
        f"relay 4000000: connection {cid}, 1 journal segment(s), {stored} frames stored, {lost} not recorded"
    ]
    assert not journal.segments(db)
    lines.clear()
    recover_mod.run_recover(db, lines.append)
    assert lines == ["nothing to recover"]


def test_a_recover_that_cannot_write_either_keeps_the_row_for_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gone: None
) -> None:
    """The disk is still full when recover runs: nothing is lost, the next recover finishes the row."""
    db = tmp_path / "rec.db"
    disk = Disk(monkeypatch, ERRORS["full"])
    carried, cid = _session(db, disk)
    stored = _row(db, cid)[4]
    recover_mod.recover_stale(db)
    assert _row(db, cid)[:2] == ("running", 0) and len(journal.segments(db)[4_000_000]) == 1
    disk.full = False
    recover_mod.recover_stale(db)
    assert _row(db, cid) == ("ended", carried - stored, 0, "agent", stored)
    assert not journal.segments(db)


def test_only_the_last_row_failing_is_finished_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gone: None) -> None:
    """Every frame stored, only the connection's last row refused: recover writes it, 0 not recorded."""
    db = tmp_path / "rec.db"
    disk = Disk(monkeypatch, ERRORS["read-only"])
    rec = Recorder(db, argv=["agent"], cwd="/", label="t", relay_pid=4_000_000)
    rec.journal_head = {"argv": ["agent"], "cwd": "/", "relay_pid": 4_000_000, "recorder_pid": os.getpid()}
    rec.start()
    for i in range(5):
        rec.put(C2A, _line(i))
    rec.put(C2A, b"")
    disk.row_full = True
    rec.close(status="ended", exit_code=3, closed_by="editor")
    assert rec.connection_id is not None
    assert _row(db, rec.connection_id)[:2] == ("running", 0)
    disk.row_full = False
    recover_mod.recover_stale(db)
    assert _row(db, rec.connection_id) == ("ended", 0, 3, "editor", 5)


def test_a_disk_too_full_for_a_new_file_still_takes_the_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gone: None
) -> None:
    """On a full disk a new file's first block is refused too: the row goes in the room the recorder
    reserved when it started (64 KiB, allocated), renamed into a segment."""
    db = tmp_path / "rec.db"
    disk = Disk(monkeypatch, ERRORS["full"])

    def no_room(*args: Any, **kwargs: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(journal, "create_segment", no_room)
    carried, cid = _session(db, disk)
    stored = _row(db, cid)[4]
    assert len(journal.segments(db)[4_000_000]) == 1 and not retained.stale_reserves(db)
    disk.full = False
    recover_mod.recover_stale(db)
    assert _row(db, cid) == ("ended", carried - stored, 0, "agent", stored)


def test_the_reserved_room_is_there_while_recording_and_gone_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "rec.db"
    disk = Disk(monkeypatch, ERRORS["full"])  # never full here: it only says when a batch is in
    rec = Recorder(db, argv=["agent"], cwd="/", label="t", relay_pid=4_000_000)
    rec.journal_head = {"argv": ["agent"], "relay_pid": 4_000_000, "recorder_pid": os.getpid()}
    rec.start()
    rec.put(C2A, _line(1))
    assert disk.stored.wait(60)
    [(path, relay, recorder)] = retained.stale_reserves(db)
    assert (relay, recorder) == (4_000_000, os.getpid()) and path.stat().st_size == retained.RESERVE
    assert path.stat().st_mode & 0o777 == 0o600
    rec.put(C2A, b"")
    rec.close(status="ended")
    assert not retained.stale_reserves(db) and not journal.segments(db)
    assert _row(db, 1)[:2] == ("ended", 0)


def test_recover_sweeps_the_room_a_killed_recorder_reserved(tmp_path: Path, gone: None) -> None:
    db = tmp_path / "rec.db"
    db.touch()
    retained.reserve_path(db, 4_000_000, 4_000_001).write_bytes(b"\0" * 10)
    recover_mod.recover_stale(db)
    assert not retained.stale_reserves(db)
