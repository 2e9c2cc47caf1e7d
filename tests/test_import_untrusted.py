"""Issue 19: imports are untrusted. Crafted files of every import format fail cleanly (one message, exit 1,
no traceback), leave the database as it was, and never hang; the same file without the crafted field
imports, so each failure is the field's."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

GOOD_RAW = b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/p","mcpServers":[]}}'
DEEP = b'{"jsonrpc":"2.0","method":"x","params":' + b"[" * 100_000 + b"]" * 100_000 + b"}"


def _sqlite(path: Path, **bad: Any) -> Path:
    """A minimal acp-relay-shaped database, with one crafted value (or view) when asked."""
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE frames (connection_id, seq, direction, ts, mono, raw, unterminated DEFAULT 0, "
        "redacted DEFAULT 0, details);"
        "CREATE TABLE stderr (id INTEGER PRIMARY KEY, connection_id, ts, mono, raw, unterminated DEFAULT 0);"
    )
    if bad.get("view"):
        conn.execute(
            "CREATE VIEW connections AS WITH RECURSIVE r(id, started_at, ended_at, argv) AS "
            "(SELECT 1, 1.0, NULL, NULL UNION ALL SELECT id + 1, 1.0, NULL, NULL FROM r) SELECT * FROM r"
        )
    else:
        conn.execute("CREATE TABLE connections (id INTEGER PRIMARY KEY, started_at, ended_at, argv)")
        conn.execute(
            "INSERT INTO connections VALUES (1, ?, ?, ?)",
            (bad.get("started_at", 1.7e9), bad.get("ended_at", 1.7e9 + 5), bad.get("argv", '["agent"]')),
        )
    frame = {"direction": "c2a", "ts": 1.7e9 + 1, "mono": 1.0, "raw": GOOD_RAW} | bad.get("frame", {})
    conn.execute(
        "INSERT INTO frames (connection_id, seq, direction, ts, mono, raw) VALUES (1, 1, ?, ?, ?, ?)",
        (frame["direction"], frame["ts"], frame["mono"], frame["raw"]),
    )
    conn.execute(
        "INSERT INTO stderr (connection_id, ts, mono, raw) VALUES (1, 1.7e9, 0.5, ?)", (bad.get("stderr", b"log"),)
    )
    conn.commit()
    conn.close()
    return path


SQLITE_CASES: dict[str, dict[str, Any]] = {
    "recursive view": {"view": True},
    "raw integer": {"frame": {"raw": 100_000_000}},
    "raw text": {"frame": {"raw": "abc"}},
    "direction zzz": {"frame": {"direction": "zzz"}},
    "ts null": {"frame": {"ts": None}},
    "ts 1e308": {"frame": {"ts": 1e308}},
    "ts 1e12": {"frame": {"ts": 1e12}},
    "ts negative": {"frame": {"ts": -5.0}},
    "mono 1e308": {"frame": {"mono": 1e308}},
    "started_at abc": {"started_at": "abc"},
    "started_at 1e308": {"started_at": 1e308},
    "ended_at 1e12": {"ended_at": 1e12},
    "argv not a list of strings": {"argv": '[1, {"a": 2}]'},
    "deep nesting": {"frame": {"raw": DEEP}},
    "stderr raw integer": {"stderr": 12345678},
}


def _ndjson(path: Path, **bad: Any) -> Path:
    rec = {"seq": 1, "ts": 1.7e9, "direction": "c2a", "raw": GOOD_RAW.decode()} | bad
    path.write_bytes(orjson.dumps(rec) + b"\n")
    return path


def _devtools(path: Path, **bad: Any) -> Path:
    msg = {"seq": 1, "timestamp": 1.7e12, "direction": "editor-to-agent", "kind": "request", "raw": GOOD_RAW.decode()}
    doc = {
        "version": 1,
        "exportedAt": 1.7e12,
        "session": {"id": 1, "agentCommand": "agent", "startedAt": 1.7e12} | bad.pop("session", {}),
        "messages": [msg | bad],
    }
    path.write_bytes(orjson.dumps(doc))
    return path


def _trace(path: Path, **bad: Any) -> Path:
    ev = {"type": "request", "ts": 0.5, "from": "Client", "to": "Agent", "protocol": "acp", "method": "x", "id": 1}
    deep = bad.pop("deep", False)
    line = orjson.dumps(ev | bad)
    if deep:  # deeper than any JSON writer goes: spliced in as bytes
        line = line[:-1] + b',"params":' + DEEP[DEEP.index(b"[") : DEEP.rindex(b"]") + 1] + b"}"
    path.write_bytes(line + b"\n")
    return path


TEXT_CASES: list[tuple[Any, dict[str, Any]]] = [
    (_ndjson, {"ts": 1e308}),
    (_ndjson, {"ts": 1e12}),
    (_ndjson, {"ts": "abc"}),
    (_ndjson, {"direction": "zzz"}),
    (_ndjson, {"raw": DEEP.decode()}),
    (_devtools, {"timestamp": 1e308}),
    (_devtools, {"timestamp": -1}),
    (_devtools, {"session": {"startedAt": 1e300}}),
    (_devtools, {"raw": DEEP.decode()}),
    (_trace, {"ts": 1e308}),
    (_trace, {"deep": True}),
]


def _snapshot(db: Path) -> list[Any]:
    conn = sqlite3.connect(db)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return [(t, conn.execute(f'SELECT * FROM "{t}" ORDER BY rowid').fetchall()) for t in tables]
    finally:
        conn.close()


def _import(db: Path, path: Path) -> subprocess.CompletedProcess[bytes]:
    cmd = [sys.executable, "-m", "acp_relay", "import", "--db", str(db), str(path)]
    return subprocess.run(cmd, capture_output=True, timeout=120)


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    db = tmp_path / "relay.db"
    out = _import(db, _ndjson(tmp_path / "seed.ndjson", ts=1.7e9 + 100))
    assert out.returncode == 0, out.stderr
    return db


def _fails_cleanly(db: Path, path: Path) -> None:
    before = _snapshot(db)
    out = _import(db, path)
    assert out.returncode == 1 and b"Traceback" not in out.stderr, out.stderr
    assert out.stderr.count(b"\n") == 1 and path.name.encode() in out.stderr
    assert _snapshot(db) == before


@pytest.mark.parametrize("case", list(SQLITE_CASES))
def test_a_crafted_sqlite_file_fails_cleanly(seeded: Path, tmp_path: Path, case: str) -> None:
    _fails_cleanly(seeded, _sqlite(tmp_path / "crafted.db", **SQLITE_CASES[case]))


def test_the_uncrafted_sqlite_file_imports(seeded: Path, tmp_path: Path) -> None:
    out = _import(seeded, _sqlite(tmp_path / "plain.db"))
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize(
    ("make", "bad"), TEXT_CASES, ids=[f"{m.__name__}-{'-'.join(b)}-{i}" for i, (m, b) in enumerate(TEXT_CASES)]
)
def test_a_crafted_text_capture_fails_cleanly(seeded: Path, tmp_path: Path, make: Any, bad: dict[str, Any]) -> None:
    _fails_cleanly(seeded, make(tmp_path / "crafted.json", **bad))


@pytest.mark.parametrize("make", [_ndjson, _devtools, _trace])
def test_the_uncrafted_text_captures_import(seeded: Path, tmp_path: Path, make: Any) -> None:
    out = _import(seeded, make(tmp_path / "plain.json"))
    assert out.returncode == 0, out.stderr


def test_show_survives_what_an_old_import_let_in(seeded: Path) -> None:
    """A database an older version filled with an absurd time still lists (fmt_time does not raise)."""
    conn = sqlite3.connect(seeded)
    conn.execute("UPDATE connections SET started_at = 1e308")
    conn.commit()
    conn.close()
    out = subprocess.run(
        [sys.executable, "-m", "acp_relay", "show", "--db", str(seeded)], capture_output=True, timeout=60
    )
    assert out.returncode == 0 and b"Traceback" not in out.stderr, out.stderr


@pytest.mark.parametrize("where", ["new.db", "new-dir/deeper/new.db"])
def test_a_failed_import_leaves_no_database_it_created(tmp_path: Path, where: str) -> None:
    """A bad file into a database that did not exist: no empty database (nor its -wal, -shm, or the
    directories made for it) is left behind."""
    from support.cli import run as run_cli

    bad = tmp_path / "bad.ndjson"
    bad.write_bytes(b"not a capture\n")
    db = tmp_path / where
    r = run_cli("import", "--db", str(db), str(bad))
    assert r.exit_code == 1 and r.stderr.startswith("acp-relay: import: "), r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.ndjson"]


def test_a_failed_import_keeps_a_database_it_did_not_create_or_filled(tmp_path: Path, fixture_db: Path) -> None:
    from support.cli import run as run_cli

    from acp_relay.store import db as dbmod

    bad = tmp_path / "bad.ndjson"
    bad.write_bytes(b"not a capture\n")
    existing = tmp_path / "empty.db"
    dbmod.connect(existing).close()  # empty, but not this import's
    assert run_cli("import", "--db", str(existing), str(bad)).exit_code == 1
    assert existing.exists()
    good = tmp_path / "good.ndjson"
    assert run_cli("export", "--db", str(fixture_db), "last@1", "--format", "ndjson", "-o", str(good)).exit_code == 0
    fresh = tmp_path / "fresh.db"
    r = run_cli("import", "--db", str(fresh), str(good), str(bad))
    assert r.exit_code == 1 and fresh.exists(), r.stderr
    assert sqlite3.connect(fresh).execute("SELECT count(*) FROM connections").fetchone() == (1,)
