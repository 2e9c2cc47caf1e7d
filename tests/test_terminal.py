"""The session list and the frame list on a terminal: they fit its width by priority (ids cut in the middle to
a prefix that is still unique, free text cut, no column dropped), --wide shows everything, and output longer
than the screen goes through the pager ($PAGER, else `less -FRX`) unless --no-pager."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest
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
