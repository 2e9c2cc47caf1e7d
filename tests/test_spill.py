"""The wire never waits for the recorder, and every fault leaves an honest row (issue 18).

Real processes throughout: the relay, a Python agent that streams numbered frames when told to, another
process holding the database's write lock, signals sent to the recorder and the relay. No verdict here
depends on the machine's speed: each test waits for events (every byte at the editor, the journal written,
the lock taken) and holds a fault until what it checks has happened; the time bounds only end a failing
test. tools/bench.py `--case lock` measures the stalls.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import ROOT, doc_page, relay_cmd, rows, try_rows, wait_for

from acp_relay.record import journal

# argv: count, text size, pause between frames, go-file, end-file (waited for before exiting), exit status.
# Frame i carries "i:" at the start of its text, so a stored frame says which seq the wire gave it.
STREAMER = r"""
import os, sys, time
n, size, pause, go, end, status = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), *sys.argv[4:6], int(sys.argv[6])
while not os.path.exists(go):
    time.sleep(0.01)
out = sys.stdout.buffer
for i in range(n):
    out.write(b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":'
              b'"agent_message_chunk","content":{"type":"text","text":"%d:%s"}}}}\n' % (i + 1, b"x" * size))
    out.flush()
    if pause:
        time.sleep(pause)
if end != "-":
    out.write(b'{"partial":')
    out.flush()
    while not os.path.exists(end):
        time.sleep(0.01)
sys.exit(status)
"""

HOLDER = (  # holds the write lock until its stdin closes
    "import sqlite3, sys\n"
    "c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)\n"
    "c.execute('BEGIN IMMEDIATE')\n"
    "print('locked', flush=True)\n"
    "sys.stdin.read()\n"
    "c.execute('COMMIT')\n"
)


class Editor:
    """The relay's editor side: stdin kept open, stdout read in a thread."""

    def __init__(self, cmd: list[str], env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        self.data = bytearray()
        self.err = b""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._errs = threading.Thread(target=self._read_err, daemon=True)
        self._errs.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while chunk := os.read(fd, 1 << 16):
            self.data += chunk

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        self.err = self.proc.stderr.read()

    def finish(self, timeout: float = 60) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout)
        self._reader.join(10)
        self._errs.join(10)
        return code


def streamer(tmp: Path, n: int, size: int, pause: float, *, end: str = "-", status: int = 0) -> list[str]:
    return [sys.executable, "-c", STREAMER, str(n), str(size), str(pause), str(tmp / "go"), end, str(status)]


def recorder_pid(db: Path) -> int:
    got = wait_for(lambda: try_rows(db, "SELECT recorder_pid FROM connections ORDER BY id DESC LIMIT 1"), "a row")
    return int(got[0][0])


def stored_numbers(db: Path, cid: int) -> list[tuple[int, int]]:
    """(seq, the frame's own number) of every a2c frame stored whole."""
    out = []
    for seq, raw in rows(
        db, "SELECT seq, raw FROM frames WHERE connection_id = ? AND direction = 'a2c' AND unterminated = 0", cid
    ):
        text = json.loads(raw)["params"]["update"]["content"]["text"]
        out.append((seq, int(text.split(":", 1)[0])))
    return out


def count_line(stderr: bytes) -> int:
    lines = [ln for ln in stderr.splitlines() if b"frames were not recorded" in ln]
    assert len(lines) == 1, stderr
    assert lines[0].startswith(b"acp-relay: run: "), lines[0]
    return int(lines[0].split()[2])


def hold_the_lock(db: Path) -> subprocess.Popen[str]:
    """Another process holding the database's write lock until its stdin closes (`communicate`)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
    return holder


@pytest.mark.slow
def test_a_held_write_lock_does_not_stall_the_wire(tmp_path: Path) -> None:
    """Another process holds BEGIN IMMEDIATE while the agent streams 17.5 MiB: every byte reaches the editor
    while the lock is still held (the journal takes what the recorder cannot). Before the spill journal the
    pumps blocked once about 11 MiB waited (pipe and recorder queue full) until the lock went away: the
    editor never got the rest while it was held. No clock decides: the lock goes only once the editor has
    everything (before, a 3 s lock and a largest-gap budget that a loaded machine broke)."""
    n, size = 280, 64 << 10
    db = tmp_path / "locked.db"
    # The agent ends only after the lock is gone: the relay's close is not what this test waits on.
    held = Editor(relay_cmd(db, *streamer(tmp_path, n, size, 0, end=str(tmp_path / "end"))))
    recorder_pid(db)
    holder = hold_the_lock(db)
    try:
        (tmp_path / "go").touch()
        wait_for(lambda: held.data.endswith(b'{"partial":'), "every byte at the editor while the lock is held")
        assert holder.poll() is None and list(tmp_path.glob("locked.db.spill-*")), "the journal took them"
    finally:
        holder.communicate("", timeout=60)
    (tmp_path / "end").touch()
    assert held.finish(120) == 0
    *lines, partial = held.data.split(b"\n")
    assert partial == b'{"partial":'
    assert [int(json.loads(ln)["params"]["update"]["content"]["text"].split(":", 1)[0]) for ln in lines] == list(
        range(1, n + 1)
    )
    # Nothing lost: once the lock is gone the recorder drains the journal, in order, seq as on the wire.
    ((cid, frames, unrecorded, status, b_a2c),) = rows(
        db, "SELECT id, frames, frames_unrecorded, status, bytes_a2c FROM connections"
    )
    assert (frames, unrecorded, status, b_a2c) == (n + 1, 0, "ended", len(held.data))
    assert stored_numbers(db, cid) == [(i, i) for i in range(1, n + 1)]
    assert not list(tmp_path.glob("*.spill-*")), "the journal is removed once stored"
    assert b"Traceback" not in held.err


@pytest.mark.slow
def stream_past_a_stopped_recorder(
    db: Path, tmp_path: Path, n: int, size: int, env: dict[str, str]
) -> tuple[Editor, tuple[int, int, int]]:
    """N frames of SIZE streamed while the recorder is SIGSTOPped, until the editor has every byte; then
    the recorder goes on and the agent ends. The editor, and the row's (id, frames, frames_unrecorded)."""
    editor = Editor(relay_cmd(db, *streamer(tmp_path, n, size, 0, end=str(tmp_path / "end"))), env=env)
    pid = recorder_pid(db)
    os.kill(pid, signal.SIGSTOP)
    try:
        (tmp_path / "go").touch()
        wait_for(lambda: editor.data.endswith(b'{"partial":'), "every byte at the editor", timeout=30)
    finally:
        os.kill(pid, signal.SIGCONT)
    (tmp_path / "end").touch()
    assert editor.finish(120) == 0
    ((cid, frames, unrecorded),) = rows(db, "SELECT id, frames, frames_unrecorded FROM connections")
    return editor, (cid, frames, unrecorded)


def test_a_frozen_recorder_never_blocks_the_editor_and_the_loss_is_counted_exactly(tmp_path: Path) -> None:
    """The recorder stopped (SIGSTOP) while 19 MiB stream: the editor gets every byte at once; past the RAM
    queue and a small journal, frames are dropped, and the row counts them exactly with seq the wire's."""
    db = tmp_path / "relay.db"
    n, size = 300, 64 << 10
    env = {**os.environ, "ACP_RELAY_JOURNAL_MAX": str(1 << 20)}
    editor, (cid, frames, unrecorded) = stream_past_a_stopped_recorder(db, tmp_path, n, size, env)
    assert unrecorded > 0 and frames + unrecorded == n + 1  # the partial last line is a frame too
    numbers = stored_numbers(db, cid)
    assert numbers and all(seq == number for seq, number in numbers)
    assert count_line(editor.err) == unrecorded


@pytest.mark.slow
def test_recorder_killed_mid_stream_is_noticed_and_the_row_is_honest(tmp_path: Path) -> None:
    """Before: the row stayed `running` with 0 unrecorded, the exit status was lost, stderr's count was off."""
    db = tmp_path / "relay.db"
    n = 4000
    editor = Editor(relay_cmd(db, *streamer(tmp_path, n, 200, 0.0005, status=3)))
    pid = recorder_pid(db)
    (tmp_path / "go").touch()
    wait_for(lambda: editor.data.count(b"\n") > 500, "some frames")
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: b"died" in editor.err or editor.proc.poll() is not None or None, "the relay to notice", 10)
    assert editor.finish(60) == 3
    ((cid, status, code, frames, unrecorded),) = rows(
        db, "SELECT id, status, exit_code, frames, frames_unrecorded FROM connections"
    )
    assert (status, code) == ("recorder_died", 3)
    assert frames + unrecorded == n
    numbers = stored_numbers(db, cid)
    assert all(seq == number for seq, number in numbers) and numbers[-1][0] == n  # the rest came from the journal
    assert (count_line(editor.err) if unrecorded else 0) == unrecorded
    assert b"recorder (pid" in editor.err and b"killed by SIGKILL" in editor.err
    assert all(line.startswith(b"acp-relay: run: ") for line in editor.err.splitlines()), editor.err  # issue 21


def test_relay_killed_keeps_the_partial_last_line_flagged_unterminated(db: Path) -> None:
    proc = subprocess.Popen(relay_cmd(db, "cat"), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"a"}\n{"jsonrpc":"2.0","meth')
    proc.stdin.flush()
    got = b""
    while not got.endswith(b'"meth'):
        got += os.read(proc.stdout.fileno(), 1 << 16)
    wait_for(lambda: try_rows(db, "SELECT 1 FROM frames WHERE direction = 'a2c'"), "the first frame stored")
    proc.kill()
    proc.wait()
    wait_for(lambda: rows(db, "SELECT status FROM connections") == [("interrupted",)], "the recorder to finish")
    assert rows(db, "SELECT direction, raw, unterminated FROM frames ORDER BY seq") == [
        ("c2a", b'{"jsonrpc":"2.0","method":"a"}', 0),
        ("a2c", b'{"jsonrpc":"2.0","method":"a"}', 0),
        ("c2a", b'{"jsonrpc":"2.0","meth', 1),
        ("a2c", b'{"jsonrpc":"2.0","meth', 1),
    ]


@pytest.mark.slow
def test_relay_and_recorder_killed_while_spilling_then_recover_stores_the_journal(tmp_path: Path) -> None:
    db = tmp_path / "relay.db"
    n, size = 200, 64 << 10
    editor = Editor(relay_cmd(db, *streamer(tmp_path, n, size, 0, end=str(tmp_path / "end"))))
    pid = recorder_pid(db)
    locker = hold_the_lock(db)
    (tmp_path / "go").touch()
    wait_for(lambda: editor.data.endswith(b'{"partial":'), "every byte at the editor")

    def journaled() -> bool:
        return any(p.read_bytes().endswith(b'{"partial":') for p in tmp_path.glob("relay.db.spill-*"))

    wait_for(journaled, "the partial line in the journal")
    os.kill(pid, signal.SIGKILL)
    editor.proc.kill()
    editor.finish(30)
    locker.kill()
    locker.wait()
    out = subprocess.run(
        [sys.executable, "-m", "acp_relay", "recover", "--db", str(db)], capture_output=True, timeout=120
    )
    assert out.returncode == 0 and b"Traceback" not in out.stderr, out.stderr
    assert b"connection 1" in out.stdout
    ((cid, status, closed_by, unrecorded),) = rows(
        db, "SELECT id, status, closed_by, frames_unrecorded FROM connections"
    )
    assert (status, closed_by) == ("interrupted", "relay_killed")
    numbers = stored_numbers(db, cid)
    assert all(seq == number for seq, number in numbers) and numbers[-1][0] == n
    assert rows(db, "SELECT raw, unterminated, seq FROM frames WHERE unterminated = 1") == [(b'{"partial":', 1, n + 1)]
    stored = rows(db, "SELECT count(*) FROM frames WHERE direction = 'a2c'")[0][0]
    assert stored + unrecorded == n + 1
    assert not list(tmp_path.glob("relay.db.spill-*"))
    again = subprocess.run([sys.executable, "-m", "acp_relay", "recover", "--db", str(db)], capture_output=True)
    assert again.returncode == 0 and again.stdout == b"nothing to recover\n"


def test_agent_exiting_while_the_editor_writes_is_not_a_recorder_failure(db: Path) -> None:
    """Before: "the recorder stopped (Bad file descriptor)" and a count of frames never lost."""
    agent = [sys.executable, "-c", "import sys; sys.stdin.readline(); print('{}', flush=True)"]
    editor = Editor(relay_cmd(db, *agent))
    stdin = editor.proc.stdin
    assert stdin is not None

    def write() -> None:
        try:
            while True:
                stdin.write(b'{"jsonrpc":"2.0","method":"x"}\n' * 200)
                stdin.flush()
                time.sleep(0.005)
        except (OSError, ValueError):
            pass

    threading.Thread(target=write, daemon=True).start()
    editor.proc.wait(60)
    try:
        assert editor.finish(60) == 0
    except (OSError, ValueError):
        pass
    assert editor.data == b"{}\n" and editor.err == b"", editor.err
    assert rows(db, "SELECT status, frames_unrecorded FROM connections") == [("ended", 0)]


@pytest.mark.slow
def test_database_deleted_mid_session_is_said_once_and_the_rest_is_kept(tmp_path: Path) -> None:
    """Before: SQLite wrote on into the unlinked file and everything vanished, with no word and exit 0."""
    db = tmp_path / "relay.db"
    n = 150
    editor = Editor(relay_cmd(db, *streamer(tmp_path, n, 100, 0.02)))
    recorder_pid(db)
    (tmp_path / "go").touch()
    wait_for(lambda: try_rows(db, "SELECT 1 FROM frames WHERE seq > 20"), "some frames stored")
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    assert editor.finish(60) == 0
    assert editor.data.count(b"\n") == n
    warnings = [ln for ln in editor.err.splitlines() if b"deleted" in ln]
    assert len(warnings) == 1, editor.err
    ((cid, status, frames, unrecorded, error),) = rows(
        db, "SELECT id, status, frames, frames_unrecorded, error FROM connections"
    )
    assert status == "ended" and "deleted" in error
    numbers = stored_numbers(db, cid)
    assert numbers and all(seq == number for seq, number in numbers) and numbers[-1][0] == n
    assert len(numbers) + unrecorded == n and frames == len(numbers)
    assert count_line(editor.err) == unrecorded


def test_readme_recover_example(tmp_path: Path) -> None:
    from helpers import run_relay

    text = doc_page("recover.md")
    block = text.split("```console\n", 1)[1].split("```", 1)[0]
    command, expected = block.split("\n", 1)
    db = tmp_path / "t.db"
    assert run_relay(db, "cat").returncode == 0
    argv = command.removeprefix("$ acp-relay ").replace("/tmp/t.db", str(db)).split()
    out = subprocess.run([sys.executable, "-m", "acp_relay", *argv], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout, out.stderr) == (0, expected, "")
    missing = subprocess.run(
        [sys.executable, "-m", "acp_relay", "recover", "--db", str(tmp_path / "none.db")], capture_output=True
    )
    assert missing.returncode == 2 and missing.stderr.count(b"\n") == 1


@pytest.mark.parametrize("fault", [None, "lock", "stop"])
def test_each_response_is_stored_after_its_request_whatever_path_it_took(tmp_path: Path, fault: str | None) -> None:
    """The editor pipelines requests faster than the agent reads them, so the relay's write to the agent
    blocks part-way through a chunk whose first requests the agent has already answered: alone, with
    another process holding the write lock (issue 18's case), and with the recorder stopped so that most
    records go through the spill journal. Before: the pumps queued a chunk for the recorder only once it was
    forwarded, so answers read meanwhile were numbered and stored before their own requests (the correlator
    could not name their method)."""
    db = tmp_path / "order.db"
    script = str(ROOT / "tests" / "peers" / "scripted_agent.py")
    # The scripted agent on a one-page stdin pipe (F_SETPIPE_SZ; Linux gives small pipes to a user past
    # pipe-user-pages-soft too): each 64 KiB chunk the relay forwards is read and answered in part before the
    # write returns. A starved CPU opens the same window between forwarding and queuing, but not on cue.
    shrink = f"import fcntl, runpy, sys; fcntl.fcntl(0, 1031, 4096); sys.argv = [{script!r}, 'jetbrains']; "
    agent = [sys.executable, "-c", shrink + f"runpy.run_path({script!r}, run_name='__main__')"]
    n, pad = 500, 10_000 if fault == "stop" else 100  # stopped: ~10 MiB, past what the pipe and RAM hold
    burst = b"".join(
        b'{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"jb-session-1",'
        b'"prompt":[{"type":"text","text":"%s"}]}}\n' % (i, b"p" * pad)
        for i in range(n)
    )
    editor = Editor(relay_cmd(db, *agent))
    pid = recorder_pid(db)
    holder = hold_the_lock(db) if fault == "lock" else None  # held until every answer is at the editor
    if fault == "stop":
        os.kill(pid, signal.SIGSTOP)
    try:
        assert editor.proc.stdin is not None
        editor.proc.stdin.write(burst)
        editor.proc.stdin.flush()
        wait_for(lambda: editor.data.count(b'"stopReason"') == n, "every answer at the editor")
        if fault == "stop":
            assert list(tmp_path.glob("order.db.spill-*")), "the records wait in the journal"
    finally:
        if fault == "stop":
            os.kill(pid, signal.SIGCONT)
        if holder is not None:
            holder.communicate("", timeout=60)
    assert editor.finish(60) == 0
    got = rows(db, "SELECT seq, direction, kind, method, rpc_id FROM frames ORDER BY seq")
    assert [r[0] for r in got] == list(range(1, 3 * n + 1))
    asked = {rid: seq for seq, d, kind, _, rid in got if d == "c2a" and kind == "request"}
    answers = [(seq, method, rid) for seq, d, kind, method, rid in got if d == "a2c" and kind == "response"]
    assert len(asked) == len(answers) == n
    late = [(rid, asked[rid], seq) for seq, _, rid in answers if seq < asked[rid]]
    assert not late, f"{len(late)} answers stored before their requests, e.g. {late[:3]}"
    assert {method for _, method, _ in answers} == {"session/prompt"}
    assert rows(db, "SELECT frames, frames_unrecorded FROM connections") == [(3 * n, 0)]


# Imported at start-up by the relay (and every Python it starts): the spill journal's disk is full once a
# segment holds JOURNAL_FULL_AT bytes.
JOURNAL_FULL_HOOK = """
import errno, os

_writev = os.writev


def writev(fd, buffers):
    try:
        name = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        name = ""
    if ".spill-" in name and os.fstat(fd).st_size >= int(os.environ["JOURNAL_FULL_AT"]):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return _writev(fd, buffers)


os.writev = writev
"""


@pytest.mark.slow
def test_a_journal_that_cannot_be_written_keeps_what_it_holds_in_the_wires_order(tmp_path: Path) -> None:
    """The recorder is stopped, the journal's disk fills: frames past that are counted, not kept, but those
    the journal holds are stored first, at their own seq. Before: the records written to the journal since
    its last mark in the pipe were never read (16 frames stored and 237 counted of 301: 48 lost silently),
    and the relay stayed on the full journal, dropping, after the recorder had caught up."""
    db = tmp_path / "relay.db"
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(JOURNAL_FULL_HOOK)
    pythonpath = os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": pythonpath, "JOURNAL_FULL_AT": str(3 << 20)}
    n, size = 300, 64 << 10
    editor, (cid, frames, unrecorded) = stream_past_a_stopped_recorder(db, tmp_path, n, size, env)
    assert unrecorded > 0 and frames + unrecorded == n + 1
    numbers = stored_numbers(db, cid)
    # The partial last line is stored too (flagged) when it came after the recorder caught up: 1 run in 6.
    ((cut,),) = rows(
        db, "SELECT count(*) FROM frames WHERE unterminated = 1 AND raw = ? AND seq = ?", b'{"partial":', n + 1
    )
    assert len(numbers) + cut == frames and numbers[-1][0] > (3 << 20) // size  # the journal's frames are there
    assert all(seq == number for seq, number in numbers), numbers[-5:]
    assert count_line(editor.err) == unrecorded
    assert editor.err.count(b"cannot write the spill journal") == 1


# Imported at start-up by the relay (and every Python it starts): no spill journal can be created while the
# file named by JOURNAL_CANNOT_CREATE exists (a full disk, a directory gone read-only).
JOURNAL_CREATE_HOOK = """
import errno, os

_open = os.open


def open(path, flags, mode=0o777, *, dir_fd=None):
    if flags & os.O_CREAT and ".spill-" in os.fsdecode(path) and os.path.exists(os.environ["JOURNAL_CANNOT_CREATE"]):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
    return _open(path, flags, mode, dir_fd=dir_fd)


os.open = open
"""

# argv: first count, second count, text size, pause in the second part, go-file, second-go-file. Numbered
# frames as STREAMER's: the first part at once after go, the second part after the second go-file.
TWO_PARTS = r"""
import os, sys, time
first, second, size, pause, go, again = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), *sys.argv[5:7]
out = sys.stdout.buffer
def frames(start, n, pause):
    for i in range(start, start + n):
        out.write(b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":'
                  b'"agent_message_chunk","content":{"type":"text","text":"%d:%s"}}}}\n' % (i, b"x" * size))
        out.flush()
        time.sleep(pause)
for path, start, n, p in ((go, 1, first, 0.0), (again, first + 1, second, pause)):
    while not os.path.exists(path):
        time.sleep(0.01)
    frames(start, n, p)
"""


def settled(db: Path, quiet: float = 1.0, timeout: float = 30.0) -> None:
    """Until the number of stored frames has not changed for `quiet` seconds (the recorder caught up)."""
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        got = try_rows(db, "SELECT count(*) FROM frames")
        n = got[0][0] if got else -1
        if n != last:
            last, since = n, time.monotonic()
        elif time.monotonic() - since > quiet:
            return
        time.sleep(0.05)


@pytest.mark.slow
def test_a_journal_that_cannot_be_created_is_retried_once_the_recorder_can_take_frames_again(tmp_path: Path) -> None:
    """The recorder is stopped and no journal can be created: frames are counted, not kept. Once the recorder
    runs again, what follows is recorded again. Before: the relay stayed in spill mode without a journal for
    the rest of the run, and every later frame was counted unrecorded (all 60 of the second part)."""
    db = tmp_path / "relay.db"
    hook, flag = tmp_path / "hook", tmp_path / "no-journal"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(JOURNAL_CREATE_HOOK)
    flag.touch()
    pythonpath = os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": pythonpath, "JOURNAL_CANNOT_CREATE": str(flag)}
    first, second, size = 200, 60, 64 << 10
    agent = [sys.executable, "-c", TWO_PARTS, str(first), str(second), str(size), "0.01"]
    editor = Editor(relay_cmd(db, *agent, str(tmp_path / "go"), str(tmp_path / "again")), env=env)
    pid = recorder_pid(db)
    os.kill(pid, signal.SIGSTOP)
    try:
        (tmp_path / "go").touch()
        wait_for(lambda: editor.data.count(b"\n") == first, "the first part at the editor", timeout=30)
    finally:
        os.kill(pid, signal.SIGCONT)
    flag.unlink()
    settled(db)
    (tmp_path / "again").touch()
    wait_for(lambda: editor.data.count(b"\n") == first + second, "the second part at the editor", timeout=30)
    assert editor.finish(120) == 0
    ((cid, frames, unrecorded),) = rows(db, "SELECT id, frames, frames_unrecorded FROM connections")
    assert unrecorded > 0 and frames + unrecorded == first + second
    numbers = stored_numbers(db, cid)
    assert len(numbers) == frames and all(seq == number for seq, number in numbers), numbers[-5:]
    assert [n for _, n in numbers if n > first] == list(range(first + 1, first + second + 1))
    assert count_line(editor.err) == unrecorded
    assert editor.err.count(b"cannot create the spill journal") == 1, editor.err
    assert not list(tmp_path.glob("relay.db.spill-*"))


def starve(pid: int, done: threading.Event, run: float = 0.005, stopped: float = 0.195) -> None:
    """Give a process a few milliseconds of every 200 (a machine whose CPUs other work takes, as two busy
    loops beside a nice-10 recorder do), until `done`; it always ends running."""
    try:
        while not done.is_set():
            os.kill(pid, signal.SIGSTOP)
            time.sleep(stopped)
            os.kill(pid, signal.SIGCONT)
            time.sleep(run)
    except ProcessLookupError:
        pass
    finally:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


@pytest.mark.slow
def test_a_big_line_on_a_starved_recorder_is_stored_not_given_up(tmp_path: Path) -> None:
    """Two 8 MiB frames (one each way through cat) while the recorder gets 2.5 % of a CPU. Indexing one takes
    seconds then, with no commit: the recorder's close took that for a stall and gave up ("the database did
    not drain in time", the row left `running`, the frames neither stored nor counted). Under two busy
    loops a 64 MiB line went the same way with the default 15 s; ACP_RELAY_CLOSE_STALL=1 makes it quick."""
    db = tmp_path / "relay.db"
    env = {**os.environ, "ACP_RELAY_CLOSE_STALL": "1"}
    line = b'{"jsonrpc":"2.0","method":"session/update","params":{"text":"%s"}}\n' % (b"\\u001b" * ((8 << 20) // 6))
    editor = Editor(relay_cmd(db, "cat"), env=env)
    pid = recorder_pid(db)
    done = threading.Event()
    hog = threading.Thread(target=starve, args=(pid, done), daemon=True)
    hog.start()
    try:
        assert editor.proc.stdin is not None
        editor.proc.stdin.write(line)
        editor.proc.stdin.flush()
        wait_for(lambda: len(editor.data) == len(line), "the line back at the editor", timeout=60)
        assert editor.finish(180) == 0
    finally:
        done.set()
        hog.join(5)
    wait_for(lambda: try_rows(db, "SELECT status FROM connections") == [("ended",)], "the row closed", 120)
    assert rows(db, "SELECT frames, frames_unrecorded FROM connections") == [(2, 0)]
    assert rows(db, "SELECT direction, length FROM frames ORDER BY seq") == [
        ("c2a", len(line) - 1),
        ("a2c", len(line) - 1),
    ]
    assert b"did not drain" not in editor.err and b"not recorded" not in editor.err, editor.err


# The STREAMER's frames, plus a stderr line every 7th frame, then a partial last line and exit status 3; it
# stops after half the frames until the go-file's `.mid` sibling exists (so a test can lock mid-stream).
NOISY = STREAMER.replace(
    "    out.flush()\n    if pause:",
    "    out.flush()\n    if i % 7 == 0:\n        sys.stderr.buffer.write(b'err %d\\n' % i); sys.stderr.flush()\n"
    "    while i + 1 == n // 2 and not os.path.exists(go + '.mid'):\n        time.sleep(0.01)\n    if pause:",
)


# A last line of 3 MiB, still unfinished when the relay ends: the framer holds it in its big buffer.
BIG_TAIL = b'{"partial":"' + b"y" * (3 << 20)
NOISY_BIG = NOISY.replace("out.write(b'{\"partial\":')", "out.write(b'{\"partial\":\"' + b'y' * (3 << 20))")


def a2c_bytes(db: Path, cid: int) -> bytes:
    """The a2c stream as stored, checking seq runs 1, 2, ... with no hole."""
    got = rows(db, "SELECT seq, raw, unterminated FROM frames WHERE connection_id = ? ORDER BY seq", cid)
    assert [seq for seq, _, _ in got] == list(range(1, len(got) + 1))
    return b"".join(bytes(raw) + (b"" if cut else b"\n") for _, raw, cut in got)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("locked", "ingest", "tail"),
    [
        ("mid-stream", "recover", b'{"partial":'),
        ("mid-stream", "next start", b'{"partial":'),
        ("before the row", "recover", b'{"partial":'),
        ("mid-stream", "recover", BIG_TAIL),
    ],
    ids=["mid-stream-recover", "mid-stream-next-start", "before-the-row-recover", "big-last-line-recover"],
)
def test_a_close_that_gives_up_on_a_held_lock_leaves_every_frame_in_a_journal(
    tmp_path: Path, locked: str, ingest: str, tail: bytes
) -> None:
    """Before: the recorder's close gave up on another writer's lock ("did not drain in time"), the row stayed
    `running`, and the frames it still held were neither stored nor counted. Now they wait in a journal
    segment that stderr names with their count, and `recover` (or the next relay start) stores them all, the
    row finished as the relay left it. Locked before the row: the recorder never wrote one, and the
    journal's header makes it."""
    db = tmp_path / "relay.db"
    n = 600
    env = {**os.environ, "ACP_RELAY_CLOSE_STALL": "1"}
    script = NOISY if tail == b'{"partial":' else NOISY_BIG
    assert script.count("partial") == 1 and (script != NOISY or tail != BIG_TAIL)
    agent = [sys.executable, "-c", script, str(n), "300", "0.002", str(tmp_path / "go"), str(tmp_path / "end"), "3"]
    if locked == "before the row":
        subprocess.run(relay_cmd(db, sys.executable, "-c", "pass"), stdin=subprocess.DEVNULL, check=True)
        holder = hold_the_lock(db)
    editor = Editor(relay_cmd(db, *agent), env=env)
    (tmp_path / "go").touch()
    if locked == "mid-stream":  # the agent waits at frame n/2 until the lock is held: mid-stream whatever the speed
        recorder_pid(db)
        wait_for(lambda: try_rows(db, "SELECT count(*) FROM frames WHERE seq > 100") != [(0,)] or None, "stored")
        holder = hold_the_lock(db)
    (tmp_path / "go.mid").touch()
    try:
        wait_for(lambda: editor.data.endswith(tail[-100:]) and len(editor.data) > len(tail), "every byte at the editor")
        (tmp_path / "end").touch()
        wait_for(lambda: editor.proc.poll() is not None, "the relay to end with its agent", 60)
        assert editor.finish(60) == 3
        err = editor.err.decode()
        assert "Traceback" not in err and "did not drain" not in err, err
        said = [ln for ln in err.splitlines() if "frames wait in the journal" in ln]
        assert len(said) == 1 and "acp-relay recover --db" in said[0], err
        waiting = int(said[0].split("close wait: ")[1].split()[0])
        (segment,) = tmp_path.glob("relay.db.spill-*")
        assert segment.stat().st_mode & 0o777 == 0o600
        # The message as the Reliability table (docs/recording.md) quotes it.
        quoted = said[0].removeprefix("acp-relay: run: ").replace(str(segment), "relay.db.spill-PID-M")
        quoted = quoted.replace(str(db), "relay.db").replace(f": {waiting} frames", ": N frames")
        assert quoted in doc_page("recording.md"), quoted
        # While the lock is still held: what is stored and what the journal holds are the whole stream.
        with open(segment, "rb") as f:
            kept = b"".join(p for code, p, _, _ in journal.read_records(f) if code == 1)
        if locked == "mid-stream":
            ((cid, status, stored),) = rows(db, "SELECT id, status, (SELECT count(*) FROM frames) FROM connections")
            assert status == "running" and 0 < stored < n and stored + waiting == n + 1, (stored, waiting)
            assert editor.data == a2c_bytes(db, cid) + kept
        else:
            assert rows(db, "SELECT count(*) FROM connections") == [(1,)]  # the earlier, finished run
            assert waiting == n + 1 and editor.data == kept
            cid = 2
    finally:
        holder.communicate("", timeout=30)
    if ingest == "recover":
        out = subprocess.run(
            [sys.executable, "-m", "acp_relay", "recover", "--db", str(db)], capture_output=True, timeout=120
        )
        assert out.returncode == 0 and out.stderr == b"", out.stderr
        want = f"connection {cid}, 1 journal segment(s), {n + 1} frames stored, 0 not recorded"
        assert want.encode() in out.stdout, out.stdout
    else:
        later = subprocess.run(relay_cmd(db, sys.executable, "-c", "pass"), stdin=subprocess.DEVNULL, timeout=120)
        assert later.returncode == 0
        wait_for(lambda: rows(db, "SELECT status FROM connections WHERE id = ?", cid) != [("running",)], "stored")
    ((status, code, closed_by, frames, unrecorded, b_a2c, b_err),) = rows(
        db,
        "SELECT status, exit_code, closed_by, frames, frames_unrecorded, bytes_a2c, bytes_stderr "
        "FROM connections WHERE id = ?",
        cid,
    )
    assert (status, code, closed_by, frames, unrecorded) == ("ended", 3, "agent_exit", n + 1, 0)
    assert a2c_bytes(db, cid) == bytes(editor.data) and b_a2c == len(editor.data)
    lines = [b"err %d" % i for i in range(0, n, 7)]
    assert [bytes(r) for (r,) in rows(db, "SELECT raw FROM stderr WHERE connection_id = ? ORDER BY id", cid)] == lines
    assert b_err == sum(len(x) + 1 for x in lines)
    assert not list(tmp_path.glob("relay.db.spill-*"))
