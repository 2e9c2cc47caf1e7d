"""`acp-relay run` as a process: byte-exact forwarding, recording, lifecycle, signals, shared database."""

from __future__ import annotations

import os
import random
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import py_agent, relay_cmd, rows, run_relay, stream_of, try_rows, wait_for

CAT = ["cat"]
GARBAGE = [
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n',
    b"\r\n",
    b"\n",
    b"\xff\xfe\xfd not utf-8\n",
    b"plain log line\n",
    b'[{"jsonrpc":"2.0","method":"x"}]\n',
    b'{"a":',
    b"\x00\x01\x02",
    "caf\u00e9 \u2713\n".encode(),
]


def chunked_writer(chunks: list[bytes]) -> str:
    """An editor (as a snippet) that writes chunks with tiny pauses, so reads split at random places."""
    return f"import os, sys, time\nchunks = {chunks!r}\nfor c in chunks:\n    os.write(1, c)\n    time.sleep(0.001)\n"


@pytest.mark.parametrize("seed", range(4))
def test_random_garbage_is_forwarded_and_recorded_byte_for_byte(db: Path, seed: int) -> None:
    rnd = random.Random(seed)
    data = b"".join(rnd.choice(GARBAGE) + rnd.randbytes(rnd.randrange(0, 50)) * rnd.randrange(0, 2) for _ in range(200))
    cuts = sorted(rnd.sample(range(1, len(data)), 30))
    chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    editor = subprocess.Popen([sys.executable, "-c", chunked_writer(chunks)], stdout=subprocess.PIPE)
    out = subprocess.run(relay_cmd(db, *CAT), stdin=editor.stdout, capture_output=True, timeout=60)
    editor.wait()
    assert out.returncode == 0, out.stderr
    assert out.stdout == data
    assert out.stderr == b""
    assert stream_of(db, "c2a") == data
    assert stream_of(db, "a2c") == data
    ((count, recorded, unrecorded),) = rows(
        db, "SELECT count(*), (SELECT frames FROM connections), (SELECT frames_unrecorded FROM connections) FROM frames"
    )
    assert count == recorded and unrecorded == 0


def test_a_32_mib_line(db: Path) -> None:
    line = b'{"jsonrpc":"2.0","method":"x","params":{"data":"' + b"A" * (32 << 20) + b'"}}\n'
    out = run_relay(db, *CAT, data=line)
    assert out.returncode == 0 and out.stdout == line
    assert rows(db, "SELECT direction, length, kind, parse FROM frames ORDER BY seq") == [
        ("c2a", len(line) - 1, "notification", "ok"),
        ("a2c", len(line) - 1, "notification", "ok"),
    ]


def test_unterminated_last_line_is_flagged(db: Path) -> None:
    out = run_relay(db, *CAT, data=b'{"jsonrpc":"2.0","method":"a"}\nhalf')
    assert out.stdout == b'{"jsonrpc":"2.0","method":"a"}\nhalf'
    assert rows(db, "SELECT raw, unterminated FROM frames WHERE direction = 'a2c' ORDER BY seq") == [
        (b'{"jsonrpc":"2.0","method":"a"}', 0),
        (b"half", 1),
    ]


def test_agent_exit_status_is_passed_on(db: Path) -> None:
    out = run_relay(db, *py_agent("import sys; sys.stdout.write('bye\\n'); sys.exit(3)"))
    assert out.returncode == 3 and out.stdout == b"bye\n"
    ((status, code, sig, closed_by),) = rows(db, "SELECT status, exit_code, exit_signal, closed_by FROM connections")
    assert (status, code, sig) == ("ended", 3, None)
    assert closed_by in ("agent_exit", "editor_eof")  # the editor's empty stdin may close first


def test_agent_killed_by_a_signal(db: Path) -> None:
    out = run_relay(db, *py_agent("import os, signal; os.kill(os.getpid(), signal.SIGKILL)"))
    assert out.returncode == 128 + signal.SIGKILL
    assert rows(db, "SELECT exit_code, exit_signal FROM connections") == [(137, 9)]


def test_command_not_found_and_not_executable(db: Path, tmp_path: Path) -> None:
    out = run_relay(db, "/nonexistent/agent-binary", "--acp")
    assert out.returncode == 127 and out.stdout == b""
    assert b"command not found" in out.stderr
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    out = run_relay(db, str(script))
    assert out.returncode == 126 and b"not executable" in out.stderr
    assert rows(db, "SELECT status, exit_code, closed_by FROM connections ORDER BY id") == [
        ("spawn_failed", 127, "spawn_failed"),
        ("spawn_failed", 126, "spawn_failed"),
    ]


def test_editor_closes_stdin_first(db: Path) -> None:
    out = run_relay(db, *CAT, data=b"")
    assert out.returncode == 0
    assert rows(db, "SELECT closed_by, exit_code FROM connections") == [("editor_eof", 0)]


def test_agent_exits_while_the_editor_keeps_stdin_open(db: Path) -> None:
    proc = subprocess.Popen(
        relay_cmd(db, *py_agent("print('done')")), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out = proc.stdout.read()  # type: ignore[union-attr]
    assert proc.wait(timeout=20) == 0  # stdin still open: the relay must not wait for it
    assert out == b"done\n"
    assert rows(db, "SELECT closed_by FROM connections") == [("agent_exit",)]
    proc.stdin.close()  # type: ignore[union-attr]


TRAP = (
    "import signal, sys, time\n"
    "def on(sig, frame):\n"
    "    sys.stdout.write('got %d\\n' % sig); sys.stdout.flush(); sys.exit(0)\n"
    "for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP): signal.signal(s, on)\n"
    "sys.stdout.write('ready\\n'); sys.stdout.flush()\n"
    "time.sleep(30)\n"
)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signals_are_forwarded(db: Path, sig: int) -> None:
    proc = subprocess.Popen(
        relay_cmd(db, *py_agent(TRAP)), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout.readline() == b"ready\n"  # type: ignore[union-attr]
    proc.send_signal(sig)
    assert proc.stdout.read() == f"got {int(sig)}\n".encode()  # type: ignore[union-attr]
    assert proc.wait(timeout=20) == 0
    assert rows(db, "SELECT closed_by FROM connections") == [(f"signal:{signal.Signals(sig).name}",)]


def test_agent_that_ignores_stdin_eof_ends_on_the_editors_sigterm(db: Path) -> None:
    agent = "import time, sys\nsys.stdin.read()\nprint('eof seen', flush=True)\ntime.sleep(60)\n"
    proc = subprocess.Popen(relay_cmd(db, *py_agent(agent)), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    proc.stdin.close()  # type: ignore[union-attr]
    assert proc.stdout.readline() == b"eof seen\n"  # type: ignore[union-attr]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 128 + signal.SIGTERM


def test_agent_stderr_passes_through_and_is_recorded(db: Path) -> None:
    out = run_relay(db, *py_agent("import sys; sys.stderr.write('log one\\nlog two\\npartial'); print('{}')"))
    assert out.stdout == b"{}\n"
    assert out.stderr == b"log one\nlog two\npartial"
    assert rows(db, "SELECT raw, unterminated FROM stderr ORDER BY id") == [
        (b"log one", 0),
        (b"log two", 0),
        (b"partial", 1),
    ]
    assert rows(db, "SELECT stderr_tail FROM connections") == [("log one\nlog two\npartial",)]


def test_four_relays_share_one_database(db: Path) -> None:
    lines = b"".join(b'{"jsonrpc":"2.0","method":"n","params":{"i":%d}}\n' % i for i in range(3000))
    procs = [
        subprocess.Popen(
            relay_cmd(db, *CAT, label=f"r{i}"), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for i in range(4)
    ]
    outs = [p.communicate(lines, timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    assert all(o[0] == lines for o in outs)
    assert rows(db, "SELECT label, frames, frames_unrecorded FROM connections ORDER BY label") == [
        (f"r{i}", 6000, 0) for i in range(4)
    ]
    assert rows(db, "SELECT count(*) FROM frames") == [(24000,)]


def test_unwritable_database_still_forwards(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    data = b'{"jsonrpc":"2.0","method":"x"}\n' * 100
    out = run_relay(blocker / "relay.db", *CAT, data=data)
    assert out.returncode == 0 and out.stdout == data
    warning, count = out.stderr.splitlines()
    assert b"forwarding goes on without recording" in warning
    assert count == b"acp-relay: run: 200 frames were not recorded"  # exactly: 100 each way


def test_corrupt_database_still_forwards(tmp_path: Path) -> None:
    bad = tmp_path / "relay.db"
    bad.write_bytes(b"this is not a database" * 1000)
    data = b'{"jsonrpc":"2.0","method":"x"}\n' * 10
    out = run_relay(bad, *CAT, data=data)
    assert out.returncode == 0 and out.stdout == data
    warning, count = out.stderr.splitlines()
    assert warning.startswith(b"acp-relay: run: ") and count == b"acp-relay: run: 20 frames were not recorded"


def test_default_location_and_private_modes(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ACP_RELAY_DB"}
    env["XDG_STATE_HOME"] = str(tmp_path / "xdg")
    old = os.umask(0o022)
    try:
        out = subprocess.run(
            [sys.executable, "-m", "acp_relay", "run", "--", "cat"],
            input=b"{}\n",
            capture_output=True,
            env=env,
            timeout=30,
        )
    finally:
        os.umask(old)
    assert out.returncode == 0 and out.stdout == b"{}\n"
    path = tmp_path / "xdg" / "acp-relay" / "relay.db"
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    for p in path.parent.iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p
    env["ACP_RELAY_DB"] = str(tmp_path / "env.db")
    subprocess.run([sys.executable, "-m", "acp_relay", "run", "--", "cat"], input=b"{}\n", env=env, timeout=30)
    assert rows(tmp_path / "env.db", "SELECT count(*) FROM frames") == [(2,)]


@pytest.mark.parametrize("kind", ["devnull", "file"])
def test_stdin_and_stdout_may_be_files_or_devnull(db: Path, tmp_path: Path, kind: str) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(b'{"jsonrpc":"2.0","method":"a"}\n' * 50)
    dst = tmp_path / "out.jsonl"
    stdin_path = os.devnull if kind == "devnull" else src
    with open(stdin_path, "rb") as fin, open(dst, "wb") as fout:
        rc = subprocess.run(relay_cmd(db, *CAT), stdin=fin, stdout=fout, timeout=30).returncode
    assert rc == 0
    expected = b"" if kind == "devnull" else src.read_bytes()
    assert dst.read_bytes() == expected
    assert stream_of(db, "a2c") == expected


def test_stdout_closed_by_the_editor_does_not_stop_recording(db: Path) -> None:
    agent = 'import sys\nfor i in range(2000): sys.stdout.write(\'{"jsonrpc":"2.0","method":"n"}\\n\')\n'
    proc = subprocess.Popen(
        relay_cmd(db, *py_agent(agent)), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    proc.stdout.close()  # type: ignore[union-attr]
    proc.stdin.close()  # type: ignore[union-attr]
    assert proc.wait(timeout=30) == 0
    assert rows(db, "SELECT count(*) FROM frames WHERE direction = 'a2c'") == [(2000,)]


def wait_until_not_running(db: Path, cid: int, timeout: float = 30) -> None:
    wait_for(
        lambda: rows(db, "SELECT status FROM connections WHERE id = ?", cid) != [("running",)],
        "the recorder to finish",
        timeout,
    )


def test_relay_killed_with_sigkill_leaves_a_consistent_database_marked_interrupted(db: Path) -> None:
    proc = subprocess.Popen(relay_cmd(db, *CAT), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    for _ in range(50):
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"n"}\n' * 100)  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
    wait_for(lambda: try_rows(db, "SELECT 1 FROM frames LIMIT 1"), "the recorder's first commit")
    proc.kill()
    proc.wait()
    # The recorder (a child in its own process group) commits what it was sent, then marks the connection.
    wait_until_not_running(db, 1)
    ((ok,),) = rows(db, "PRAGMA integrity_check")
    assert ok == "ok"
    assert rows(db, "SELECT status, closed_by FROM connections") == [("interrupted", "relay_killed")]
    ((committed,),) = rows(db, "SELECT count(*) FROM frames")
    assert committed > 0


def test_recorder_killed_too_is_marked_interrupted_by_the_next_start(db: Path) -> None:
    proc = subprocess.Popen(relay_cmd(db, *CAT), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"n"}\n' * 100)  # type: ignore[union-attr]
    proc.stdin.flush()  # type: ignore[union-attr]
    wait_for(lambda: try_rows(db, "SELECT 1 FROM frames WHERE direction = 'a2c' LIMIT 1"), "the first commit")
    ((recorder_pid,),) = rows(db, "SELECT recorder_pid FROM connections")
    os.kill(recorder_pid, signal.SIGKILL)  # power loss, as far as the database can tell
    proc.kill()
    proc.wait()
    time.sleep(0.2)
    # The relay may have noticed its recorder's death before its own (it marks the row at once).
    assert rows(db, "SELECT status FROM connections") in ([("running",)], [("recorder_died",)])
    assert run_relay(db, *CAT, data=b"").returncode == 0
    wait_until_not_running(db, 2)
    first, second = rows(db, "SELECT status, closed_by FROM connections ORDER BY id")
    assert first in (("interrupted", "relay_killed"), ("recorder_died", "relay_killed")) and second[0] == "ended"
    ((ok,),) = rows(db, "PRAGMA integrity_check")
    assert ok == "ok"


class _NoRecorder:
    """What Relay asks of its recorder, doing nothing: the pumps alone are under test."""

    def put(self, *args: object, **kw: object) -> None: ...
    def wake(self) -> None: ...
    def eof(self, stream: str) -> None: ...
    def record_spawn(self, pid: int) -> None: ...


SILENT_AND_ALIVE = "import os, time\nos.close(1)\nos.close(2)\ntime.sleep(30)"  # both outputs closed, still running


@pytest.mark.parametrize("agent", [["true"], py_agent(SILENT_AND_ALIVE)])
def test_an_agent_that_closes_its_outputs_lets_the_recorder_start_at_once(agent: list[str]) -> None:
    """`run` lets the agent's first output through before it starts the recorder (waiting at most 0.5 s): an
    agent that ends without a word (a crash at start-up, `true`), or closes both its outputs, has nothing
    to let through, so the wait ends with its streams instead of adding half a second to the run."""
    from acp_relay.run.relay import Relay

    editor_r, editor_w = os.pipe()  # the editor keeps its end open: stdin is not what ends the wait
    sink = os.open(os.devnull, os.O_WRONLY)
    relay = Relay(agent, _NoRecorder(), stdin_fd=editor_r, stdout_fd=sink, stderr_fd=sink)  # type: ignore[arg-type]
    proc = relay.start()
    try:
        assert relay.first_output.wait(20)
    finally:
        proc.kill()
        proc.wait(30)
        for fd in (editor_r, editor_w, sink):
            os.close(fd)


def test_an_agent_that_closes_only_stderr_is_still_waited_for(tmp_path: Path) -> None:
    """stderr closed at start-up is not the end of the agent's output: its first stdout line is waited for."""
    from acp_relay.run.relay import Relay

    go = tmp_path / "go"
    code = f"import os, sys, time\nos.close(2)\nwhile not os.path.exists({str(go)!r}): time.sleep(0.01)\nos.write(1, b'hi')"
    editor_r, editor_w = os.pipe()
    out_r, out_w = os.pipe()
    relay = Relay(py_agent(code), _NoRecorder(), stdin_fd=editor_r, stdout_fd=out_w, stderr_fd=out_w)  # type: ignore[arg-type]
    proc = relay.start()
    try:
        assert relay.err_done.wait(20)  # the agent's stderr has ended
        assert not relay.first_output.is_set()
        go.touch()
        assert os.read(out_r, 10) == b"hi"
        assert relay.first_output.wait(20)
    finally:
        proc.kill()
        proc.wait(30)
        for fd in (editor_r, editor_w, out_r, out_w):
            os.close(fd)
