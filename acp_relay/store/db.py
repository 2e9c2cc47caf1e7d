"""Where the database lives, how it is opened, and the numbered migrations that shape it."""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ..protocol.basedirs import needed_base_dir

if TYPE_CHECKING:
    import sqlite3

BUSY_TIMEOUT_MS = 5000
_MIGRATION_NAME = re.compile(r"^(\d+)_[\w-]+\.sql$")


def default_db_path(env: Mapping[str, str] | None = None) -> Path:
    """ACP_RELAY_DB, else $XDG_STATE_HOME/acp-relay/relay.db, else ~/.local/state/acp-relay/relay.db."""
    environ: Mapping[str, str] = os.environ if env is None else env
    if environ.get("ACP_RELAY_DB"):
        return Path(environ["ACP_RELAY_DB"]).expanduser()
    return state_dir(environ) / "relay.db"


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """acp-relay's own state directory in environment `env` (an editor's may not be ours): HOME from it too."""
    environ = os.environ if env is None else env
    return Path(needed_base_dir(environ, "XDG_STATE_HOME", ".local/state", "the database (or pass --db)")) / "acp-relay"


def resolve_db_path(db: str | os.PathLike[str] | None) -> Path:
    return Path(db).expanduser() if db else default_db_path()


def migrations_dir() -> Path:
    """The installed package carries the migrations; a source checkout has them at the top level."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "migrations", package.parent / "migrations"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("acp-relay migrations not found beside the package")


def migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) in order."""
    found = []
    for path in migrations_dir().iterdir():
        m = _MIGRATION_NAME.match(path.name)
        if m:
            found.append((int(m.group(1)), path.name, path.read_text(encoding="utf-8")))
    return sorted(found)


def _secure_files(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        p = Path(str(path) + suffix)
        try:
            if p.exists() and (p.stat().st_mode & 0o777) != 0o600:
                os.chmod(p, 0o600)
        except OSError:
            pass


def readonly_uri(path: str | os.PathLike[str]) -> str:
    """A read-only `file:` URI for a path: '#', '?', '%' and spaces would otherwise end or change it (a
    '?' in the path made SQLite open a stray file named up to it, in read-write mode)."""
    from urllib.parse import quote

    return "file:" + quote(os.path.abspath(path), safe="/") + "?mode=ro"


def private_dir(path: Path) -> None:
    """Create the database's directory (0700) when it does not exist yet."""
    if not path.parent.exists():
        os.makedirs(path.parent, mode=0o700, exist_ok=True)
        os.chmod(path.parent, 0o700)


def check_files(path: str | os.PathLike[str]) -> None:
    """Raise sqlite3.DatabaseError unless the database and its -wal, -shm and -journal are regular files (or
    absent): SQLite opens them with a blocking open(), so a FIFO there would hang the command for good, and a
    device, a directory or a socket is no database."""
    import sqlite3

    for suffix in ("", "-wal", "-shm", "-journal"):
        name = f"{os.fspath(path)}{suffix}"
        try:
            mode = os.stat(name).st_mode
        except OSError:
            continue  # absent, or SQLite says why it cannot open it
        if not stat.S_ISREG(mode):
            raise sqlite3.DatabaseError(f"{name} is not a regular file (a FIFO, a device, a directory or a socket)")


NOT_OURS = (
    "not an acp-relay database (another application's, or an empty file): acp-relay adds its tables only to a "
    "new file, and only from run, import or recover"
)


def _claim(conn: sqlite3.Connection, create: bool) -> None:
    """Raise sqlite3.DatabaseError(NOT_OURS) unless the database is already ours or, when this command may
    create one (`create`: run, import, recover), new: no file, a 0-byte one, or SQLite's empty database (what
    another relay creating it at this moment leaves before its first migration commits). Done before any
    PRAGMA that writes, so a foreign file is left byte for byte as it was."""
    import sqlite3

    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if _ours(conn, tables):
        return
    empty = not conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone()
    if create and empty and not conn.execute("PRAGMA user_version").fetchone()[0]:
        return
    raise sqlite3.DatabaseError(NOT_OURS)


def _ours(conn: sqlite3.Connection, tables: set[str]) -> bool:
    """Our schema_migrations naming our first migration, or (from before that table) our core tables and a
    user_version: another application's `schema_migrations` (Rails has one) is not enough."""
    import sqlite3

    if "schema_migrations" in tables:
        try:
            row = conn.execute("SELECT name FROM schema_migrations WHERE version = 1").fetchone()
        except sqlite3.Error:
            return False
        return row is not None and row[0] == migrations()[0][1]
    legacy = {"connections", "sessions", "frames"} <= tables
    return legacy and conn.execute("PRAGMA user_version").fetchone()[0] > 0


@contextmanager
def removed_if_left_empty(path: str | os.PathLike[str]) -> Iterator[None]:
    """A database the block creates and leaves without a connection (a failed import) is removed on the way
    out, with its -wal and -shm and the directories made for it: a command that failed leaves nothing behind.
    Close the block's connections before it ends; a database that was there before is never touched."""
    path = Path(path)
    made = [path]  # what did not exist before: the file, then the directories that will be made for it
    for parent in path.parents:
        if parent.exists():
            break
        made.append(parent)
    if path.exists():
        made = []
    try:
        yield
    finally:
        if made and path.exists() and not _holds_a_connection(path):
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            for folder in made[1:]:
                try:
                    folder.rmdir()  # only when empty: something else put there stays
                except OSError:
                    break


def _holds_a_connection(path: Path) -> bool:
    import sqlite3

    try:
        conn = sqlite3.connect(readonly_uri(path), uri=True)
        try:
            return conn.execute("SELECT 1 FROM connections LIMIT 1").fetchone() is not None
        finally:
            conn.close()
    except sqlite3.Error:
        return True  # not ours to judge: kept


def connect(path: str | os.PathLike[str], *, readonly: bool = False, create: bool = True) -> sqlite3.Connection:
    """Open (creating if needed, 0700 directory, 0600 files) and migrate the database.

    Read-only opens never create or migrate: `show` must not write to a database a relay is filling. Only a
    regular file is opened (check_files), and only a database that is ours, or new when `create`, is
    migrated (_claim): `create=False` (every command but run, import and recover) never adds our tables.
    """
    import sqlite3  # here, not at the top: `acp-relay run` only needs the path functions, and starts faster

    path = Path(path)
    check_files(path)
    if readonly:
        conn = sqlite3.connect(readonly_uri(path), uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        return conn
    if not path.exists() and not create:
        raise FileNotFoundError(f"no database at {path}")
    private_dir(path)
    old_umask = os.umask(0o077)  # -wal and -shm are created later by SQLite: make them private too
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        try:
            _claim(conn, create)
        except BaseException:
            conn.close()
            raise
        conn.execute("PRAGMA page_size = 16384")  # new databases only (ignored once one exists): fewer overflow pages
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        migrate(conn)
    finally:
        os.umask(old_umask)
    _secure_files(path)
    return conn


def migrate(conn: sqlite3.Connection) -> int:
    """Apply every migration the database has not had, in numeric order, each in its own transaction.

    Numbers are handed out ahead of time and may land out of order (004 before 003), so what a database has
    had is the set listed in schema_migrations, not a high-water mark: a migration that lands late is still
    applied once. A database from before that table had every migration up to PRAGMA user_version (there
    were no gaps then). user_version stays the highest number applied. Returns it.
    """
    pending = [m for m in migrations() if m[0] not in _applied(conn)]
    for version, name, sql in pending:
        conn.execute("BEGIN IMMEDIATE")
        try:
            applied = _applied(conn)  # another relay may have migrated while we waited for the lock
            if version in applied:
                conn.execute("ROLLBACK")
                continue
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                "applied_at REAL NOT NULL)"
            )
            conn.executemany(  # a database from before the table: what user_version says it had
                "INSERT OR IGNORE INTO schema_migrations VALUES (?, ?, 0)",
                [(v, n) for v, n, _ in migrations() if v in applied],
            )
            for statement in _statements(sql):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", (version, name, time.time()))
            current = conn.execute("PRAGMA user_version").fetchone()[0]
            conn.execute(f"PRAGMA user_version = {max(current, version)}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _applied(conn: sqlite3.Connection) -> set[int]:
    """The migrations this database has had."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").fetchone():
        return {v for (v,) in conn.execute("SELECT version FROM schema_migrations")}
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    return set(range(1, current + 1))


def _statements(sql: str) -> list[str]:
    """Split a migration into statements (sqlite3.complete_statement knows about quotes and triggers)."""
    import sqlite3

    out, buf = [], ""
    for line in sql.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                out.append(buf)
            buf = ""
    if buf.strip() and not all(line.strip().startswith("--") or not line.strip() for line in buf.splitlines()):
        out.append(buf)
    return out


# -- the pages `view` opens in a browser ----------------------------------------------------------------------
PAGE_KEEP = 24 * 3600  # seconds a temporary page stays (the browser read it long before); prune removes all


def pages_dir() -> Path | None:
    """The one private directory (0700, ours, not a link) for the temporary pages `view` opens; None when
    it cannot be made safely (a caller then uses a private temporary file of its own)."""
    import tempfile

    path = Path(tempfile.gettempdir()) / f"acp-relay-views-{os.getuid()}"
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return path


def clean_pages(older_than: float = PAGE_KEEP) -> int:
    """Remove the temporary view pages older than `older_than` seconds (0: all). Returns how many."""
    import time

    where = pages_dir()
    if where is None:
        return 0
    removed = 0
    for page in where.glob("acp-relay-view-*.html"):
        try:
            if time.time() - page.lstat().st_mtime >= older_than:
                page.unlink()
                removed += 1
        except OSError:
            pass
    return removed
