"""The checks, each a Check line; run_doctor prints them (text or JSON Lines) and turns them into the exit code."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TextIO

from .. import __version__
from ..protocol import jsonc
from ..protocol.editors import DESKTOP_PATH, EDITORS, FILE_EDITORS, Editor, Entry, Wrapped, entries, faults, wrapped
from ..protocol.words import counted
from ..render.frames import escape
from ..render.text import Style, safe_dumps
from ..store import db as dbmod
from ..store.health import last_connection, quick_check
from ..store.liveness import stale_running
from ..store.retention import human_size

LOW_DISK = 500_000_000  # bytes free under which recording is at risk
VERSION_TIMEOUT = 30.0


@dataclass(frozen=True)
class Check:
    status: str  # ok | warn | FAIL
    check: str  # config | entry | relay | agent | db-dir | db | disk | stale | last
    subject: str
    message: str
    hint: str | None = None


STATUS_COLORS = {"ok": "32", "warn": "33", "FAIL": "31"}


def run_doctor(
    editor: str | None, out: TextIO, env: Mapping[str, str], *, as_json: bool = False, style: Style | None = None
) -> int:
    """Print every check (its status painted when `style` says color); 1 when one FAILed, else 0."""
    style = style or Style()
    failed = False
    for found in diagnose(editor, env):
        failed |= found.status == "FAIL"
        if as_json:
            out.write(safe_dumps(asdict(found)).decode() + "\n")  # names from a config file: safe to `cat`
        else:
            hint = f"  (hint: {escape(found.hint)})" if found.hint else ""
            status = style.paint(found.status, STATUS_COLORS.get(found.status)) + " " * (4 - len(found.status))
            out.write(f"{status}  {escape(found.subject)}: {escape(found.message)}{hint}\n")
        out.flush()
    return 1 if failed else 0


@dataclass(frozen=True)
class _User:
    """A wrapped entry and where it records."""

    subject: str
    wrapped: Wrapped


def diagnose(editor: str | None, env: Mapping[str, str]) -> Iterator[Check]:
    """Every check for one editor's config (or every known one), then for the databases they record into."""
    editors = [EDITORS[editor]] if editor else FILE_EDITORS
    databases: dict[str, list[_User]] = {}
    for ed in editors:
        for item in _config_checks(ed, env, explicit=editor is not None):
            if isinstance(item, Check):
                yield item
                continue
            entry, w = item
            subject = _subject(ed, entry)
            yield from _entry_checks(subject, entry, "FAIL")
            yield _relay_check(subject, ed, entry, w, env)
            yield _agent_check(subject, entry, w, env)
            db = w.db or str(dbmod.default_db_path(_editor_env(entry, env)))
            if "\0" not in db:  # no file has that name: the entry's finding says so
                databases.setdefault(db, []).append(_User(subject, w))
    if not databases:
        databases[str(dbmod.default_db_path(env))] = []
    for path, users in databases.items():
        yield from _database_checks(Path(path), users)


def _subject(ed: Editor, entry: Entry) -> str:
    return f'{ed.key} "{entry.name}"'


def _entry_checks(subject: str, entry: Entry, status: str) -> Iterator[Check]:
    """One line per field of the entry no process can be started with (the relay's --version run and the
    agent lookup go on with the rest): FAIL for an entry acp-relay records, warn for one it does not."""
    for fault in faults(entry):
        yield Check(status, "entry", subject, fault, "fix the entry in the config file")


def _editor_env(entry: Entry, env: Mapping[str, str]) -> dict[str, str]:
    """What the relay sees when the editor starts it: a desktop session's few variables, then the entry's env."""
    base = {k: env[k] for k in ("HOME", "XDG_STATE_HOME") if env.get(k)}
    return {"PATH": DESKTOP_PATH, **base, **entry.env}


def _config_checks(ed: Editor, env: Mapping[str, str], *, explicit: bool) -> Iterator[Check | tuple[Entry, Wrapped]]:
    path = ed.config_path(env) or ""
    subject = f"{ed.key} config"
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        yield Check(
            "warn" if explicit else "ok", "config", subject, f"no file at {path}", f"acp-relay setup {ed.key} -- AGENT"
        )
        return
    except OSError as exc:
        yield Check("FAIL", "config", subject, f"cannot read {path}: {exc.strerror}")
        return
    try:
        text = data.decode("utf-8")
        root = jsonc.parse(text) if text.strip("\ufeff \t\r\n") else jsonc.parse("{}")
        found = entries(root)
    except UnicodeDecodeError as exc:
        yield Check("FAIL", "config", subject, f"{path}: not UTF-8 (byte {exc.start})", "the editor cannot read it")
        return
    except jsonc.JsoncError as exc:
        yield Check("FAIL", "config", subject, f"{path}:{exc.line}:{exc.column}: {exc.reason}", "fix the file")
        return
    except ValueError as exc:
        yield Check("FAIL", "config", subject, f"{path}: {exc}")
        return
    pairs = [(e, w) for e in found if (w := wrapped(e)) is not None]
    others = len(found) - len(pairs)
    message = f"{path}: {len(pairs)} of {len(found)} agent entries recorded by acp-relay"
    yield Check(
        "ok", "config", subject, message, f"acp-relay setup {ed.key} --wrap NAME records one" if others else None
    )
    for e in found:
        if wrapped(e) is None:
            yield from _entry_checks(_subject(ed, e), e, "warn")
    yield from pairs


_versions: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[bool, str]] = {}


def _relay_version(relay: str, env: Mapping[str, str]) -> tuple[bool, str]:
    """Whether `relay --version` runs in the editor's environment, and what it says (or why not); asked once
    per relay and environment (entries with the same ones share the answer)."""
    key = (relay, tuple(sorted(env.items())))
    if key not in _versions:
        try:
            proc = subprocess.run(
                [relay, "--version"],
                capture_output=True,
                text=True,
                errors="replace",
                timeout=VERSION_TIMEOUT,
                env=dict(env),
                stdin=subprocess.DEVNULL,
            )
            said = (proc.stdout.strip() or proc.stderr.strip()).splitlines()
            line = said[-1] if said else ""
            _versions[key] = (
                proc.returncode == 0,
                line if proc.returncode == 0 else f"exit {proc.returncode}: {line}",
            )
        except subprocess.TimeoutExpired:
            _versions[key] = (False, f"no answer to --version in {VERSION_TIMEOUT:.0f} s")
        except OSError as exc:
            _versions[key] = (False, exc.strerror or str(exc))
    return _versions[key]


def _relay_check(subject: str, ed: Editor, entry: Entry, w: Wrapped, env: Mapping[str, str]) -> Check:
    fix = f"acp-relay setup {ed.key} --wrap {json.dumps(entry.name, ensure_ascii=False)} writes the absolute path"
    if not os.path.isabs(w.relay):
        return Check(
            "FAIL",
            "relay",
            subject,
            f"acp-relay is written as {w.relay!r}, which the editor looks up on its own PATH",
            fix,
        )
    if not os.path.isfile(w.relay):
        return Check("FAIL", "relay", subject, f"{w.relay} does not exist", fix)
    if not os.access(w.relay, os.X_OK):
        return Check("FAIL", "relay", subject, f"{w.relay} is not executable", f"chmod +x {w.relay}")
    ran, said = _relay_version(w.relay, _editor_env(entry, env))
    if not ran:
        return Check("FAIL", "relay", subject, f"{w.relay} does not start: {said}", "reinstall acp-relay")
    version = said.rsplit(" ", 1)[-1]
    if version != __version__:
        return Check(
            "warn", "relay", subject, f"{w.relay} is version {version}, this doctor {__version__}", "run setup again"
        )
    return Check("ok", "relay", subject, f"acp-relay {w.relay} (version {version})")


def _agent_check(subject: str, entry: Entry, w: Wrapped, env: Mapping[str, str]) -> Check:
    if not w.agent:
        return Check("FAIL", "agent", subject, "no agent command after `--`", "acp-relay setup EDITOR -- AGENT")
    command = w.agent[0]
    editor_path = _editor_env(entry, env)["PATH"]
    if os.sep in command:
        if not os.path.isfile(command):
            return Check("FAIL", "agent", subject, f"agent {command} does not exist", "install it or fix the path")
        if not os.access(command, os.X_OK):
            return Check("FAIL", "agent", subject, f"agent {command} is not executable", f"chmod +x {command}")
        if not os.path.isabs(command):
            return Check("warn", "agent", subject, f"agent {command} is relative to the editor's working directory")
        return Check("ok", "agent", subject, f"agent {command}")
    found = shutil.which(command, path=editor_path)
    if found:
        return Check("ok", "agent", subject, f"agent {command} is {found} on the editor's PATH")
    mine = shutil.which(command, path=env.get("PATH"))
    hint = f"it is {mine} on your shell's PATH: write that absolute path" if mine else "install it, or write its path"
    return Check("FAIL", "agent", subject, f"agent {command!r} is not on the editor's PATH ({editor_path})", hint)


def _writable(path: Path) -> bool:
    """Can we (and the owner) create files in this directory: access() and, for root, the owner's bits."""
    st = path.stat()
    owner_ok = st.st_uid != os.geteuid() or (st.st_mode & (stat.S_IWUSR | stat.S_IXUSR)) == stat.S_IWUSR | stat.S_IXUSR
    return os.access(path, os.W_OK | os.X_OK) and owner_ok


def _database_checks(path: Path, users: list[_User]) -> Iterator[Check]:
    """The database's checks, then each entry's last connection in it (when it could be opened)."""
    opened: list[sqlite3.Connection] = []
    yield from _file_checks(f"database {path}", path, opened)
    conn = opened[0] if opened else None
    try:
        for user in users:
            yield _last_check(user, conn)
    finally:
        if conn is not None:
            conn.close()


def _file_checks(subject: str, path: Path, opened: list[sqlite3.Connection]) -> Iterator[Check]:
    folder = path.parent
    yield from _folder_checks(subject, folder)
    if not folder.is_dir() or not _writable(folder):
        return
    if not path.exists():
        yield Check("ok", "db", subject, "no database yet: the first run creates it")
        return
    conn = None
    try:
        conn = dbmod.connect(path, create=False)
        problems = quick_check(conn)
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    except (sqlite3.Error, OSError) as exc:
        if conn is not None:
            conn.close()
        yield Check("FAIL", "db", subject, f"cannot be opened: {exc}", f"move it aside (mv {path} {path}.broken)")
        return
    if problems:
        conn.close()
        yield Check(
            "FAIL", "db", subject, f"damaged: {'; '.join(problems)}", "export what you need, then move it aside"
        )
        return
    opened.append(conn)
    yield Check("ok", "db", subject, f"opens, migrated to version {version}, quick_check ok")
    yield _disk_check(subject, path)
    stale = stale_running(conn)
    if stale:
        ids = ", ".join(str(i) for i in stale[:10])
        message = f"{counted(len(stale), 'connection')} marked running whose relay is gone ({ids})"
        yield Check("warn", "stale", subject, message, "the next acp-relay run marks them interrupted")
    else:
        yield Check("ok", "stale", subject, "no connection is marked running without its relay")


def _folder_checks(subject: str, folder: Path) -> Iterator[Check]:
    if not folder.exists():
        ancestor = next(p for p in folder.parents if p.exists())
        if ancestor.is_dir() and _writable(ancestor):
            yield Check("ok", "db-dir", subject, f"{folder} does not exist yet: the first run creates it (0700)")
        else:
            yield Check("FAIL", "db-dir", subject, f"{folder} cannot be created: {ancestor} is not writable")
        return
    if not folder.is_dir():
        yield Check("FAIL", "db-dir", subject, f"{folder} is not a directory", "give --db a path in a directory")
        return
    mode = folder.stat().st_mode & 0o777
    if not _writable(folder):
        yield Check("FAIL", "db-dir", subject, f"{folder} is not writable (mode {mode:04o})", f"chmod 700 {folder}")
    elif mode != 0o700:
        hint = f"chmod 700 {folder}"
        yield Check("warn", "db-dir", subject, f"{folder} has mode {mode:04o}, not 0700 (recordings are private)", hint)
    else:
        yield Check("ok", "db-dir", subject, f"{folder} (0700)")


def _disk_check(subject: str, path: Path) -> Check:
    size = sum(Path(f"{path}{s}").stat().st_size for s in ("", "-wal") if Path(f"{path}{s}").exists())
    free = shutil.disk_usage(path.parent).free
    message = f"{human_size(size)}, {human_size(free)} free on its disk"
    if free < LOW_DISK:
        return Check("warn", "disk", subject, message + ": low", "acp-relay prune --max-size SIZE, or free space")
    return Check("ok", "disk", subject, message)


def _last_check(user: _User, conn: sqlite3.Connection | None) -> Check:
    found = last_connection(conn, user.wrapped.label, user.wrapped.agent) if conn is not None else None
    if found is None:
        return Check("ok", "last", user.subject, "no connection recorded yet", "start the agent from the editor")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(found.started_at))
    message = f"last connection {found.id} at {when}: {found.status}, exit {found.exit_code}, {counted(found.frames, 'frame')}"
    if found.status == "spawn_failed" or (found.status == "ended" and found.exit_code):
        detail = f" ({found.error})" if found.error else ""
        return Check("warn", "last", user.subject, message + detail, f"acp-relay show -c {found.id}")
    return Check("ok", "last", user.subject, message)
