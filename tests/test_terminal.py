"""The session list and the frame list on a terminal: they fit its width by priority (ids cut in the middle to
a prefix that is still unique, free text cut, no column dropped), --wide shows everything, and output longer
than the screen goes through the pager ($PAGER, else `less -FRX`) unless --no-pager."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest
from support.cli import run as cli_run
from support.cli import run_on_terminal

from acp_relay.render.frames import SESSION_HEADER
from acp_relay.store import db as dbmod
from acp_relay.store.scripted import ConnectionWriter

BASE = 1_767_225_600.0


def _line(**kw: object) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **kw}, separators=(",", ":")).encode()


@pytest.fixture(scope="module")
def hex_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """Six sessions with 32-hex ids (two share their first 10 characters), UUID message ids, long names."""
    path = tmp_path_factory.mktemp("terminal") / "hex.db"
    conn = dbmod.connect(path)
    twins = uuid.uuid4().hex[:10]
    ids = [twins + uuid.uuid4().hex[10:] for _ in range(2)] + [uuid.uuid4().hex for _ in range(4)]
    for i, sid in enumerate(ids):
        w = ConnectionWriter(conn, started_at=BASE + i, argv=["agent"], label=f"zed window {i}")
        init = {"protocolVersion": 1, "clientInfo": {"name": "JetBrains WebStorm", "version": "2026.1.2"}}
        w.line("c2a", _line(id=0, method="initialize", params=init), 0.01)
        agent = {"name": "claude-code-acp", "version": "0.4.2"}
        w.line("a2c", _line(id=0, result={"protocolVersion": 1, "agentInfo": agent}), 0.02)
        w.line("c2a", _line(id=1, method="session/new", params={"cwd": "/w", "mcpServers": []}), 0.03)
        w.line("a2c", _line(id=1, result={"sessionId": sid}), 0.04)
        for k in range(3):
            update = {
                "sessionUpdate": "agent_message_chunk",
                "messageId": str(uuid.uuid4()),
                "content": {"type": "text", "text": f"words of chunk {k}"},
            }
            w.line("a2c", _line(method="session/update", params={"sessionId": sid, "update": update}), 0.05 + k)
        w.close(ended_mono=5)
    conn.close()
    return path, ids


def test_the_session_list_fits_120_columns_without_dropping_a_column(hex_db: tuple[Path, list[str]]) -> None:
    path, ids = hex_db
    status, out = run_on_terminal("show", "--db", str(path), "--no-pager", "--color", "never", columns=120)
    assert status == 0, out
    lines = out.splitlines()
    assert all(len(line) <= 120 for line in lines), lines
    assert lines[0].split() == list(SESSION_HEADER)  # TURNS, ENDED, ANOMALIES and NOTE included
    shown = [line.split()[2] for line in lines[1:]]
    for cell in shown:
        assert len(cell) < 32 and cell.endswith("…"), cell
        assert len([i for i in ids if i.startswith(cell[:-1])]) == 1  # a prefix the user can type
    assert min(len(c) for c in shown) >= 12  # the twins need 11 characters to be told apart
    assert not any(line.endswith("~") for line in lines)  # nothing cut at the edge
    for typed in (shown[0][:-1], shown[0]):  # the prefix, or the cell as copied, `…` and all
        status, out = run_on_terminal("show", "--db", str(path), "--no-pager", "--color", "never", typed)
        assert status == 0 and "agent_message_chunk" in out, out


def test_wide_shows_every_id_in_full(hex_db: tuple[Path, list[str]]) -> None:
    path, ids = hex_db
    status, out = run_on_terminal("show", "--db", str(path), "--no-pager", "--wide", "--color", "never", columns=80)
    assert status == 0
    assert {line.split()[2] for line in out.splitlines()[1:]} == set(ids)


def test_the_frame_list_at_80_columns_keeps_aligned_previews(hex_db: tuple[Path, list[str]]) -> None:
    path, ids = hex_db
    status, out = run_on_terminal(
        "show", "--db", str(path), f"{ids[-1]}@6", "--no-pager", "--color", "never", columns=80
    )
    assert status == 0, out
    chunks = [line for line in out.splitlines() if "agent_message_chunk" in line]
    assert len(chunks) == 3 and all(len(line) <= 80 for line in chunks), chunks
    starts = {line.index('"words') for line in chunks}  # every preview there, in one column
    assert len(starts) == 1, chunks


def test_long_output_goes_through_the_pager_unless_no_pager(hex_db: tuple[Path, list[str]], tmp_path: Path) -> None:
    path, ids = hex_db
    pager = tmp_path / "pager"
    pager.write_text(f"#!/bin/sh\necho paged >> {tmp_path / 'used'}\nexec cat\n")
    pager.chmod(0o755)
    env = {"PAGER": str(pager), "NO_COLOR": "1"}
    status, out = run_on_terminal("show", "--db", str(path), f"{ids[0]}@1", lines=5, env=env)
    assert status == 0 and "agent_message_chunk" in out
    assert (tmp_path / "used").read_text() == "paged\n"
    status, out = run_on_terminal("show", "--db", str(path), f"{ids[0]}@1", "--no-pager", lines=5, env=env)
    assert status == 0 and "agent_message_chunk" in out
    status, out = run_on_terminal("show", "--db", str(path), "-n", "1", lines=40, env=env)  # fits: no pager
    assert status == 0 and re.search(r"\bSTARTED\b", out)
    assert (tmp_path / "used").read_text() == "paged\n"


WIDTHS = (60, 80, 100, 120, 200)
NEVER = ("--color", "never")
NUMBER = re.compile(r"#\d+|\b\d+(?:\.\d+)?(?:ms|s|m)\b")  # a request id, a latency or duration badge


@pytest.mark.parametrize("columns", WIDTHS)
def test_show_at_every_width_keeps_numbers_whole_and_every_column(fixture_db: Path, columns: int) -> None:
    """Issue 31: at 80 columns `#2….00s` stood for `#2 2.00s` and the session list stopped at `DURATIO~`.
    Piped output is the reference: every request id and latency it prints is printed whole at each width,
    and each session's CONN, V, FRAMES, TURNS, DURATION, ENDED and ANOMALIES values are there, in a row or
    on its stacked line; no line is longer than the width and none is cut at the edge."""
    db = str(fixture_db)
    piped = cli_run("show", "--db", db, "sess-v1-alpha", "-n", "20").stdout
    status, out = run_on_terminal(
        "show", "--db", db, "sess-v1-alpha", "-n", "20", "--no-pager", *NEVER, columns=columns
    )
    assert status == 0, out
    lines = out.splitlines()
    assert all(len(line) <= columns and not line.endswith("~") for line in lines), lines
    assert all(ln.split()[0].isdigit() or ln.startswith(" " * 8) for ln in lines if ln.strip()), lines
    starts = [i for i, ln in enumerate(lines) if not ln.startswith(" " * 8)]
    records = [" ".join(lines[i:j]) for i, j in zip(starts, [*starts[1:], len(lines)], strict=True)]
    rows = piped.splitlines()
    assert len(records) == len(rows) == 20 and "2.00s" in piped and "119.0ms" in piped
    for record, row in zip(records, rows, strict=True):  # the numbers of WHAT (columns 39 to 83 piped)
        assert record.split()[0] == row.split()[0]
        for value in NUMBER.findall(row[39:84]):
            assert re.search(rf"(?<![\w.…]){re.escape(value)}(?![\w.…])", record), (value, record)

    status, out = run_on_terminal("show", "--db", db, "--no-pager", *NEVER, columns=columns)
    assert status == 0, out
    lines = out.splitlines()
    assert all(len(line) <= columns and not line.endswith("~") for line in lines), lines
    header = lines[0].split() + [w.upper() for ln in lines[1:] if ln.startswith("    ") for w in ln.split()]
    assert set(SESSION_HEADER) <= set(header), lines  # every column: in the header or on the stacked line
    starts = [i for i, ln in enumerate(lines) if i and not ln.startswith(" ")]
    records = [" ".join(lines[i:j]) for i, j in zip(starts, [*starts[1:], len(lines)], strict=True)]
    listed = cli_run("show", "--db", db).stdout.splitlines()[1:]
    assert len(records) == len(listed) == 4
    for record, row in zip(records, listed, strict=True):  # each value piped prints, whole, in its record
        for value in WHOLE.findall(row.split("  ", 2)[-1]):  # after STARTED and SESSION
            assert re.search(rf"(?<![\w.]){re.escape(value)}(?![\w.])", record), (value, record)
    assert "2 invalid, 1 error, 1 unanswered" in out  # a count never shrinks
    for args in (["sess-v1-alpha", "-n", "20"], []):  # color changes no character of the layout
        _, plain = run_on_terminal("show", "--db", db, *args, "--no-pager", *NEVER, columns=columns)
        _, colored = run_on_terminal("show", "--db", db, *args, "--no-pager", "--color", "always", columns=columns)
        stripped = re.sub(r"\x1b\[[0-9;]*m", "", colored).splitlines()
        assert [line.rstrip() for line in stripped] == plain.splitlines()  # (padding before a reset code)


# the numbers and counted words of a listed row: CONN, V, FRAMES, TURNS, DURATION, ENDED, ANOMALIES
WHOLE = re.compile(
    r"(?:exit|signal) \d+|\d+ (?:invalid|errors?|unanswered|in flight)|(?<![\w.])\d+(?:\.\d+)?(?:ms|s|m)?(?![\w.])"
)
