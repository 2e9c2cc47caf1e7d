"""Migrations: applied once each, in numeric order, even when a lower number lands after a higher one; a
database recorded before the latest migrations is migrated and still read the same by show, stats, replay."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from fixtures.recordings import build
from helpers import run_relay
from support.cli import run as cli_run

from acp_relay.replay.recording import load_recording
from acp_relay.store import db


def _write(folder: Path, name: str, sql: str) -> None:
    (folder / name).write_text(sql, encoding="utf-8")


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def test_a_migration_that_lands_after_a_higher_number_is_still_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "migrations"
    folder.mkdir()
    monkeypatch.setattr(db, "migrations_dir", lambda: folder)
    _write(folder, "001_a.sql", "CREATE TABLE a (x);")
    _write(folder, "002_b.sql", "CREATE TABLE b (x);")
    _write(folder, "004_d.sql", "CREATE TABLE d (x);")
    conn = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    assert db.migrate(conn) == 4
    assert {"a", "b", "d"} <= _tables(conn) and "c" not in _tables(conn)
    _write(folder, "003_c.sql", "CREATE TABLE c (x);")  # merged later
    assert db.migrate(conn) == 4
    assert "c" in _tables(conn)
    assert [v for (v,) in conn.execute("SELECT version FROM schema_migrations ORDER BY version")] == [1, 2, 3, 4]
    assert db.migrate(conn) == 4  # nothing twice


def test_a_database_from_before_the_migrations_table_keeps_its_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "migrations"
    folder.mkdir()
    monkeypatch.setattr(db, "migrations_dir", lambda: folder)
    _write(folder, "001_a.sql", "CREATE TABLE a (x);")
    _write(folder, "002_b.sql", "CREATE TABLE b (x);")
    conn = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    conn.execute("CREATE TABLE a (x)")  # as the old migrate left it: the tables and user_version only
    conn.execute("CREATE TABLE b (x)")
    conn.execute("PRAGMA user_version = 2")
    _write(folder, "004_d.sql", "CREATE TABLE d (x);")
    assert db.migrate(conn) == 4
    assert [v for (v,) in conn.execute("SELECT version FROM schema_migrations ORDER BY version")] == [1, 2, 4]


CASES = {
    "list": ["show"],
    "v1_session": ["show", "sess-v1-alpha"],
    "v2_session_json": ["show", "sess-v2-beta", "--json"],
    "v1_errors": ["show", "sess-v1-alpha", "--errors"],
    "v2_transcript": ["show", "sess-v2-beta", "--transcript"],
    "v1_stats": ["stats", "sess-v1-alpha"],
    "all_stats": ["stats"],
}


def _first_migrate(conn: sqlite3.Connection) -> int:
    """What migrate() did before schema_migrations: 001 and 002, and user_version as the only record."""
    for version, _, sql in db.migrations()[:2]:
        conn.executescript(sql)
        conn.execute(f"PRAGMA user_version = {version}")
    return 2


def _outputs(path: Path) -> dict[str, bytes]:
    out = {}
    for name, args in CASES.items():
        result = cli_run(*args, "--db", str(path))
        assert result.exit_code == 0, result.output
        out[name] = result.stdout_bytes
    return out


def test_a_database_recorded_with_the_first_schema_is_migrated_and_read_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new = tmp_path / "old.db", tmp_path / "new.db"
    every = db.migrations()
    with monkeypatch.context() as m:  # the schema and the migrate() of the first releases: 001 and 002
        m.setattr(db, "migrate", _first_migrate)
        build(old)
    build(new)
    conn = sqlite3.connect(old)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 2 and "schema_migrations" not in _tables(conn)
    conn.close()
    before = _outputs(old)  # read-only: show and stats never migrate
    assert before == _outputs(new)

    out = run_relay(old, "cat", data=b'{"jsonrpc":"2.0","method":"x"}\n')  # a relay migrates, then records
    assert out.returncode == 0, out.stderr
    conn = sqlite3.connect(old)
    assert [v for (v,) in conn.execute("SELECT version FROM schema_migrations ORDER BY version")] == [
        v for v, _, _ in every
    ]
    indexes = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "frames_method" not in indexes and "frames_prompt" in indexes
    assert conn.execute("SELECT count(*) FROM frames WHERE connection_id = 4").fetchone()[0] == 2
    conn.close()
    after = _outputs(old)
    for name in ("v1_session", "v2_session_json", "v1_errors", "v2_transcript", "v1_stats"):
        assert after[name] == before[name], name
    for session in ("sess-v1-alpha", "sess-v2-beta"):  # what replay plays back
        a, b = load_recording(old, session), load_recording(new, session)
        assert a.summary() == b.summary() and a.turns
        assert [(t.prompt, t.stop_reason, len(t.steps)) for t in a.turns] == [
            (t.prompt, t.stop_reason, len(t.steps)) for t in b.turns
        ]
