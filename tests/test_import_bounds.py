"""Issue 30, item 9: an SQLite import reads no more than the file holds, whatever its schema says. A
generated column, a virtual table or a default value could turn a small file into gigabytes of frames;
each is refused (or stopped at the file's size) before the bytes are read, and the refusal says why."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from acp_relay.protocol.captures import FormatError
from acp_relay.store.imports import read_sqlite

GOOD_RAW = b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/p","mcpServers":[]}}'
BIG = 64 << 20  # what the crafted schemas declare: 64 MiB a value, from files of a few KiB

COLUMNS = {
    "connections": ["id INTEGER PRIMARY KEY", "started_at", "ended_at", "argv"],
    "frames": [
        "connection_id",
        "seq",
        "direction",
        "ts",
        "mono",
        "raw",
        "unterminated DEFAULT 0",
        "redacted DEFAULT 0",
        "details",
    ],
    "stderr": ["id INTEGER PRIMARY KEY", "connection_id", "ts", "mono", "raw", "unterminated DEFAULT 0"],
}


def _db(path: Path, rows: int = 1, *, generated: tuple[str, str, str] | None = None, extra: str = "") -> Path:
    """An acp-relay-shaped file with `rows` frames; `generated` = (table, column, expression) declares that
    column GENERATED ALWAYS AS the expression; `extra` is SQL run after the rows are in."""
    conn = sqlite3.connect(path)
    gen = (generated[0], generated[1].lower()) if generated else None
    for table, cols in COLUMNS.items():
        decl = [c for c in cols if (table, c.split()[0]) != gen]
        if generated is not None and generated[0] == table:
            decl.append(f"{generated[1]} GENERATED ALWAYS AS ({generated[2]})")
        conn.execute(f"CREATE TABLE {table} ({', '.join(decl)})")
    stored = {t: [c.split()[0] for c in cols if (t, c.split()[0]) != gen] for t, cols in COLUMNS.items()}
    values = {
        "connections": {"id": 1, "started_at": 1.7e9, "ended_at": 1.7e9 + 5, "argv": '["agent"]'},
        "stderr": {"connection_id": 1, "ts": 1.7e9, "mono": 0.5, "raw": b"log"},
    }
    for table in ("connections", "stderr"):
        cols = [c for c in stored[table] if c in values[table]]
        conn.execute(
            f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
            [values[table][c] for c in cols],
        )
    for seq in range(1, rows + 1):
        frame = {
            "connection_id": 1,
            "seq": seq,
            "direction": "c2a",
            "ts": 1.7e9 + seq,
            "mono": float(seq),
            "raw": GOOD_RAW,
        }
        cols = [c for c in stored["frames"] if c in frame]
        conn.execute(
            f"INSERT INTO frames ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", [frame[c] for c in cols]
        )
    if extra:
        conn.executescript(extra)
    conn.commit()
    conn.close()
    return path


def _refused(path: Path, *words: str) -> str:
    with pytest.raises(FormatError) as err:
        read_sqlite(path)
    text = str(err.value)
    assert all(w in text for w in words), text
    return text


def test_the_issues_file_is_refused_before_its_frames_are_made(tmp_path: Path) -> None:
    """The issue's file: frames.raw declared as a zeroblob, 16 rows (64 MiB each here, 100 MB there)."""
    path = _db(tmp_path / "amplify.db", 16, generated=("frames", "raw", f"zeroblob({BIG})"))
    assert path.stat().st_size < 64 << 10
    _refused(path, "frames.raw", "generated")


@pytest.mark.parametrize(
    ("table", "column", "expr"),
    [
        ("frames", "direction", f"CAST(zeroblob({BIG}) AS TEXT)"),
        ("frames", "details", f"'{{\"rebuilt\":' || length(zeroblob({BIG})) || '}}'"),
        ("frames", "TS", "1.7e9 + seq"),  # small and cheap, and named in capitals: refused all the same
        ("connections", "argv", f"printf('[\"%.*c\"]', {BIG}, 'x')"),
        ("stderr", "raw", f"zeroblob({BIG})"),
    ],
)
def test_a_generated_column_anywhere_is_refused(tmp_path: Path, table: str, column: str, expr: str) -> None:
    _refused(_db(tmp_path / "gen.db", 4, generated=(table, column, expr)), f"{table}.{column.lower()}", "generated")


def test_the_flags_our_schema_generates_are_read_from_details_whatever_the_file_declares(tmp_path: Path) -> None:
    """Our own frames table generates `unterminated` and `redacted` from `details`; a crafted file may declare
    them as anything: they are read from `details` the way our schema does, the declaration never runs."""
    path = _db(tmp_path / "flags.db", 3, generated=("frames", "unterminated", f"length(zeroblob({BIG}))"))
    conn = sqlite3.connect(path)
    conn.execute("""UPDATE frames SET details = '{"unterminated":1}' WHERE seq = 2""")
    conn.commit()
    conn.close()
    [(cap, _)] = read_sqlite(path)
    assert [c.unterminated for c in cap.frames] == [False, True, False]


def test_a_default_value_cannot_make_more_than_the_file_holds(tmp_path: Path) -> None:
    """No expression at all: a column added later with a literal default reads that literal in every row
    stored before it, so 400 rows of a 256 KiB default make 100 MiB from a file of about 300 KiB."""
    line = b'{"jsonrpc":"2.0","method":"x","params":"' + b"A" * (256 << 10) + b'"}'
    path = _db(tmp_path / "default.db", 400)
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE f2 AS SELECT connection_id, seq, direction, ts, mono, unterminated, redacted, details "
        "FROM frames; DROP TABLE frames; ALTER TABLE f2 RENAME TO frames;"
        f"ALTER TABLE frames ADD COLUMN raw DEFAULT x'{line.hex()}'; VACUUM;"
    )
    conn.close()
    size = path.stat().st_size
    assert size < 1 << 20
    text = _refused(path, "more than the file holds")
    assert f"{size:,}" in text  # the bound is the file's own size


def test_a_virtual_table_is_refused(tmp_path: Path) -> None:
    """A virtual table reads what its module says (an fts5 table's content can be a view), not its rows."""
    path = _db(
        tmp_path / "vt.db",
        extra="DROP TABLE stderr; CREATE VIRTUAL TABLE stderr USING fts5("
        "id, connection_id, ts, mono, raw, unterminated);",
    )
    _refused(path, "stderr", "virtual")


@pytest.mark.parametrize("table", list(COLUMNS))
def test_a_view_in_place_of_a_table_is_refused(tmp_path: Path, table: str) -> None:
    """A view made of the table crossed with itself: each row read many times over."""
    path = _db(
        tmp_path / "view.db",
        4,
        extra=f"ALTER TABLE {table} RENAME TO t0; CREATE VIEW {table} AS SELECT a.* FROM t0 a, t0 b, t0 c, t0 d;",
    )
    _refused(path, "must be tables")


def test_triggers_never_fire_and_the_stored_rows_import(tmp_path: Path) -> None:
    """Triggers fire on writes: the file is opened read-only and only read, so a file with triggers on
    every table imports exactly the rows it stores and stays byte for byte as it was."""
    extra = "".join(
        f"CREATE TRIGGER t_{t} AFTER INSERT ON {t} BEGIN INSERT INTO frames (connection_id, seq, direction, ts, "
        f"mono, raw) SELECT 1, seq + 100, direction, ts, mono, zeroblob({BIG}) FROM frames; END;"
        for t in COLUMNS
    )
    path = _db(tmp_path / "trig.db", 3, extra=extra)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    [(cap, stderr)] = read_sqlite(path)
    assert [c.raw for c in cap.frames] == [GOOD_RAW] * 3 and [s[2] for s in stderr] == [b"log"]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_an_amplifying_file_fails_cleanly_through_the_command(tmp_path: Path) -> None:
    """The whole command: one line naming the file, exit 1, nothing written."""
    path = _db(tmp_path / "amplify.db", 2, generated=("frames", "raw", f"zeroblob({BIG})"))
    db = tmp_path / "relay.db"
    out = subprocess.run(
        [sys.executable, "-m", "acp_relay", "import", "--db", str(db), str(path)], capture_output=True, timeout=120
    )
    assert out.returncode == 1 and b"Traceback" not in out.stderr, out.stderr
    assert out.stderr.count(b"\n") == 1 and b"amplify.db" in out.stderr and b"generated" in out.stderr
    assert not db.exists()  # the database this import created is not left behind, empty


def test_without_the_schema_check_the_length_limit_still_stops_a_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second line of defence: no value may be longer than the file, whatever made it."""
    import acp_relay.store.imports as imports

    monkeypatch.setattr(imports, "_check_schema", lambda src: dict.fromkeys(imports.FLAGS, "0"))
    path = _db(tmp_path / "amplify.db", 16, generated=("frames", "raw", f"zeroblob({BIG})"))
    _refused(path, "longer than the file holds")
