"""What `--db` may name (issue 30, items 10 and 11).

Item 11: a FIFO (or a link to one, or a FIFO where SQLite looks for the -wal) made `show`, `stats`, `check`,
`export`, `info` and `view` block forever in open(): every command now says it is not a regular file and
exits 5 (diff: 2), at once. The subprocess timeout only guards the failing case.

Item 10: `search` and `prune` added acp-relay's tables to another application's database (an empty file
became a 557 KB one). Only run, import and recover create the schema, and only in a file that is new or
already ours; every other command leaves a foreign file byte for byte as it was.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, rows

# Every command that takes --db, as argv ({tmp}: a directory of the test's own).
READERS = [
    ["show"],
    ["show", "last"],
    ["show", "-f"],
    ["stats"],
    ["check"],
    ["info", "last"],
    ["view", "last", "--no-open"],
    ["export", "last", "-o", "{tmp}/out.db"],
    ["export", "last", "--format", "ndjson"],
    ["diff", "last", "last"],
    ["replay", "last"],
    ["otel", "export", "last", "--file", "{tmp}/o.jsonl"],
]
WRITERS = [["search", "hello"], ["prune", "--older-than", "0s"], ["delete", "last"]]
FRAME = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
CAPTURE = b'{"seq":1,"ts":1.5,"direction":"c2a","raw":"{\\"jsonrpc\\":\\"2.0\\",\\"method\\":\\"x\\"}"}\n'  # our ndjson


def acp(
    *argv: str, db: Path | None = None, stdin: bytes = b"", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The command in a process of its own (the timeout only guards the failing case: a FIFO blocks)."""
    return subprocess.run(
        [sys.executable, "-m", "acp_relay", *argv, *(["--db", str(db)] if db else [])],
        input=stdin.decode(),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
    )


def _argv(argv: list[str], tmp: Path) -> list[str]:
    return [a.format(tmp=tmp) for a in argv]


def _ids(argv: list[str]) -> str:
    return " ".join(argv[:2])


# -- item 11: a FIFO never hangs a command ------------------------------------------------------------------
def _fifo(tmp: Path, fixture_db: Path) -> Path:
    os.mkfifo(tmp / "db.fifo")
    return tmp / "db.fifo"


def _link_to_fifo(tmp: Path, fixture_db: Path) -> Path:
    os.mkfifo(tmp / "elsewhere")
    (tmp / "relay.db").symlink_to(tmp / "elsewhere")
    return tmp / "relay.db"


def _fifo_wal(tmp: Path, fixture_db: Path) -> Path:
    """A real recording whose -wal is a FIFO: SQLite opens it too."""
    db = tmp / "copy.db"
    with sqlite3.connect(fixture_db) as src, sqlite3.connect(db) as dst:
        src.backup(dst)
        dst.execute("PRAGMA journal_mode = WAL")
    dst.close()
    os.mkfifo(f"{db}-wal")
    return db


@pytest.mark.parametrize("argv", READERS + WRITERS + [["import", "{tmp}/nothing.ndjson"]], ids=_ids)
@pytest.mark.parametrize("make", [_fifo, _link_to_fifo, _fifo_wal], ids=lambda f: f.__name__.strip("_"))
def test_a_fifo_as_the_database_is_refused_at_once(fixture_db: Path, tmp_path: Path, argv: list[str], make) -> None:
    db = make(tmp_path, fixture_db)
    r = acp(*_argv(argv, tmp_path), db=db)
    assert r.returncode == (2 if argv[0] == "diff" else 5), (r.returncode, r.stderr)
    assert "is not a regular file" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_run_forwards_without_recording_into_a_fifo(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "db.fifo")
    r = acp(
        "run",
        "--db",
        str(tmp_path / "db.fifo"),
        "--",
        sys.executable,
        "-c",
        "import sys; sys.stdout.write(sys.stdin.read())",
        stdin=FRAME,
    )
    assert r.stdout == FRAME.decode()  # the editor still gets its frames
    assert "is not a regular file" in r.stderr and "forwarding goes on without recording" in r.stderr, r.stderr


# -- item 10: a foreign file never gets our schema ----------------------------------------------------------
def _other_app(path: Path) -> None:
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        c.execute("INSERT INTO notes (body) VALUES ('keep me')")
    c.close()


def _rails(path: Path) -> None:
    """Another application with a table of our bookkeeping table's name (Rails keeps one)."""
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE schema_migrations (version TEXT PRIMARY KEY)")
        c.execute("INSERT INTO schema_migrations VALUES ('20240101000000')")
        c.execute("CREATE TABLE frames (id INTEGER PRIMARY KEY)")
    c.close()


def _empty(path: Path) -> None:
    path.write_bytes(b"")


FOREIGN = {"other-app": _other_app, "rails": _rails, "empty": _empty}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("argv", WRITERS + READERS, ids=_ids)
@pytest.mark.parametrize("kind", list(FOREIGN))
def test_no_command_but_run_import_recover_gives_a_foreign_file_our_schema(
    tmp_path: Path, argv: list[str], kind: str
) -> None:
    db = tmp_path / "theirs.db"
    FOREIGN[kind](db)
    before = _digest(db)
    r = acp(*_argv(argv, tmp_path), db=db)
    assert r.returncode in (2, 5), (r.returncode, r.stderr)
    assert "not an acp-relay database" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert _digest(db) == before, f"{argv[0]} changed {kind}"
    assert sorted(os.listdir(tmp_path)) == ["theirs.db"]  # no -wal, -shm or output left beside it


@pytest.mark.parametrize("kind", ["other-app", "rails"])
def test_run_and_import_refuse_another_applications_database(tmp_path: Path, kind: str) -> None:
    db = tmp_path / "theirs.db"
    FOREIGN[kind](db)
    before = _digest(db)
    capture = tmp_path / "capture.ndjson"
    capture.write_bytes(CAPTURE)
    r = acp("import", str(capture), db=db)
    assert r.returncode == 5 and "not an acp-relay database" in r.stderr, r.stderr
    r = acp("run", "--db", str(db), "--", sys.executable, "-c", "import sys; sys.stdin.read()", stdin=FRAME)
    assert "not an acp-relay database" in r.stderr, r.stderr
    assert _digest(db) == before


def test_doctor_says_a_foreign_database_is_not_ours_and_leaves_it(tmp_path: Path) -> None:
    db = tmp_path / "theirs.db"
    _other_app(db)
    before = _digest(db)
    r = acp("doctor", env={**os.environ, "ACP_RELAY_DB": str(db)})
    assert "not an acp-relay database" in r.stdout + r.stderr
    assert _digest(db) == before


def test_run_and_import_create_our_schema_in_a_new_or_empty_file(tmp_path: Path) -> None:
    capture = tmp_path / "capture.ndjson"
    capture.write_bytes(CAPTURE)
    for name in ("new.db", "empty.db"):
        db = tmp_path / name
        if name == "empty.db":
            db.write_bytes(b"")
        r = acp("import", str(capture), db=db)
        assert r.returncode == 0, r.stderr
        assert rows(db, "SELECT count(*) FROM frames") == [(1,)]
    db = tmp_path / "empty-run.db"
    db.write_bytes(b"")
    r = acp("run", "--db", str(db), "--", sys.executable, "-c", "import sys; sys.stdin.read()", stdin=FRAME)
    assert r.returncode == 0, r.stderr
    assert rows(db, "SELECT count(*) FROM frames") == [(1,)]


def test_recover_passes_over_a_fifo_named_like_a_journal(tmp_path: Path) -> None:
    """`recover` (and every relay's start) reads the journal segments beside the database: a FIFO under a
    segment's name made it block in open(). Only regular files are segments; the FIFO is left alone."""
    db = tmp_path / "relay.db"
    capture = tmp_path / "capture.ndjson"
    capture.write_bytes(CAPTURE)
    assert acp("import", str(capture), db=db).returncode == 0
    fifo = Path(f"{db}.spill-{_dead_pid()}-0")  # a relay that has exited
    os.mkfifo(fifo)
    r = acp("recover", db=db)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert fifo.exists()


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid
