"""`acp-relay diff` on the scripted fixture databases: every pair of recorded sessions, hostile ones included."""

from __future__ import annotations

import io
import itertools
import json
import shutil
import sqlite3
from pathlib import Path

from fixtures.recordings import build

from acp_relay.diff.command import run_diff
from acp_relay.store import runs
from acp_relay.store.queries import View, iter_frames, open_db, resolve_view


def sessions(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return [f"{s}@{c}" for s, c in conn.execute("SELECT session_id, connection_id FROM sessions ORDER BY id")]
    finally:
        conn.close()


def test_every_pair_diffs_without_crashing_and_each_session_equals_itself(tmp_path: Path) -> None:
    db = build(tmp_path / "fixtures.db")
    specs = sessions(db)
    assert len(specs) >= 2
    copy = tmp_path / "copy.db"
    shutil.copy(db, copy)
    for a, b in itertools.product(specs, repeat=2):
        if a == b:  # one session against itself in one database is refused: it could never differ
            assert run_diff(db, a, b, io.StringIO()) == 2
        for as_json in (False, True):
            out = io.StringIO()
            status = run_diff(db, a, b, out, as_json=as_json, db_b=copy)
            assert status == (0 if a == b else status) and status in (0, 1), (a, b, out.getvalue())
            if as_json:
                obj = json.loads(out.getvalue())
                assert set(obj) >= {"conversation", "protocol", "metadata", "timing", "exit"}
            else:
                assert all("\x1b" not in line for line in out.getvalue().splitlines())  # escaped for terminals


def test_session_lines_are_the_frames_of_the_view(tmp_path: Path) -> None:
    db = build(tmp_path / "fixtures.db")
    conn = open_db(db)
    for spec in sessions(db):
        view = resolve_view(conn, spec)
        lean = list(runs.iter_session_lines(conn, view))
        full = [
            (f.seq, f.direction, f.ts, f.raw) for f in iter_frames(conn, View(view.connection_id, view.session_id, 0.0))
        ]
        assert lean == full, spec
    conn.close()
