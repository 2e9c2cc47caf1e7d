"""`acp-relay setup`: put an agent entry behind `acp-relay run` in an editor's config, and take it out again.

The file is the user's: read as bytes, changed only by plan.py's splices, shown as a unified diff, backed up
beside itself (0600, timestamped) and replaced whole (temp file + rename), so a crash leaves the old file or
the new one, never half of either. Each write is logged in acp-relay's state directory with a hash of what
was written, so `--undo` restores the backup byte for byte, and refuses when the file changed since.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from ..protocol import jsonc
from ..protocol.editors import (
    DESKTOP_PATH,
    EDITORS,
    FILE_EDITORS,
    RELAY_NAME,
    Editor,
    entries,
    faults,
    relay_args,
    wrapped,
)
from ..protocol.errors import UserError
from ..render.frames import escape
from ..store.db import default_db_path, state_dir
from . import plan, snippets
from .plan import PlanError

log = logging.getLogger(__name__)
HISTORY = "setup-history.jsonl"


class SetupError(UserError):
    """What setup cannot do: one line on stderr (and a hint), exit status 2 (USAGE in the exit-code table:
    the table has no better row for a file the user must fix first)."""


@dataclass
class Request:
    editor: str | None
    agent: list[str] = field(default_factory=list)
    name: str | None = None
    db: str | None = None
    label: str | None = None
    dry_run: bool = False
    wrap: str | None = None
    unwrap: str | None = None
    undo: bool = False
    force: bool = False
    list_entries: bool = False


def relay_executable(argv0: str = sys.argv[0], python: str = sys.executable) -> str:
    """The absolute path of the acp-relay that is running (the console script), as the editor must start it.

    Not resolved through symlinks: pipx's ~/.local/bin/acp-relay link outlives the venv it points into."""
    if os.path.basename(argv0) == RELAY_NAME and os.path.isfile(argv0):
        return os.path.abspath(argv0)
    beside = os.path.join(os.path.dirname(python), RELAY_NAME)
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return os.path.abspath(beside)
    found = shutil.which(RELAY_NAME)
    if found:
        return os.path.abspath(found)
    raise SetupError(
        "cannot find the acp-relay executable to write into the config",
        hint="install it as a command (pipx install . or pip install .) and run `acp-relay setup` from it",
    )


def run_setup(req: Request, out: TextIO, env: Mapping[str, str], relay: str | None = None) -> int:
    """Do what `req` asks; 0 done (or nothing to do), SetupError otherwise."""
    if req.list_entries:
        return list_configs(out, env)
    if req.editor not in EDITORS:
        what = f"unknown editor {escape(repr(req.editor))}; " if req.editor else ""
        raise SetupError(f"{what}name an editor: " + ", ".join(EDITORS))
    editor = EDITORS[req.editor]
    actions = [bool(req.agent), bool(req.wrap), bool(req.unwrap), req.undo]
    if sum(actions) != 1:
        raise SetupError("give exactly one of: -- AGENT [ARGS...], --wrap NAME, --unwrap NAME, --undo")
    if editor.config == "snippet":
        if not req.agent:
            raise SetupError(f"{editor.title}'s config is code: setup prints a snippet (-- AGENT), edits nothing")
        name, argv = _new_command(req, env, relay or relay_executable())
        out.write((snippets.neovim if editor.key == "neovim" else snippets.emacs)(name, argv))
        return 0
    path = Path(editor.config_path(env) or "")
    if req.undo:
        return undo(path, out, env, force=req.force, dry_run=req.dry_run)
    before = _read(path)
    text = _decode(path, before) if before is not None else "{}\n"
    try:
        if req.agent:
            name, argv = _new_command(req, env, relay or relay_executable())
            after = plan.add_entry(text, editor, name, argv[0], argv[1:])
        elif req.wrap:
            name, label = req.wrap, req.label or req.wrap
            after = plan.wrap_entry(text, req.wrap, relay or relay_executable(), _db(req, env), label)
        else:
            assert req.unwrap is not None
            name, after = req.unwrap, plan.unwrap_entry(text, req.unwrap)
    except jsonc.JsoncError as exc:
        raise SetupError(
            f"{path}:{exc.line}:{exc.column}: {exc.reason}", hint="fix the file by hand; nothing was written"
        ) from None
    except PlanError as exc:
        raise SetupError(f"{path}: {exc}", exc.status, hint=exc.hint) from None
    status = _write_change(out, env, editor, path, before, text, after, dry_run=req.dry_run)
    _warn_entry(after, name, env, bare_agent=bool(req.wrap))
    return status


def _write_change(
    out: TextIO,
    env: Mapping[str, str],
    editor: Editor,
    path: Path,
    before: bytes | None,
    text: str,
    after: str,
    *,
    dry_run: bool,
) -> int:
    """Show the change as a diff and make it: backup, replace, note it for --undo (or only show it)."""
    if after == text and before is not None:
        out.write(f"nothing to change in {path}\n")
        return 0
    try:
        new = after.encode("utf-8")
    except UnicodeEncodeError as exc:  # an argument that was not UTF-8 on the command line
        raise SetupError(f"cannot write {exc.object[exc.start : exc.end]!r} into a UTF-8 config file") from None
    _print_diff(out, path, text if before is not None else "", after)
    if dry_run:
        out.write("dry run: nothing written\n")
        return 0
    backup = _backup(path, before) if before is not None else None
    _replace(path, new)
    try:
        _log(
            env,
            {"file": str(path), "backup": str(backup) if backup else None, "written": _digest(new), "at": time.time()},
        )
    except (SetupError, OSError) as exc:
        raise SetupError(
            f"wrote {path}, but could not note it for --undo ({exc})", hint=f"the file before is {backup or '(none)'}"
        ) from None
    out.write(f"wrote {path}" + (f" (backup {backup})" if backup else "") + "\n")
    out.write(f"take it back with: acp-relay setup {editor.key} --undo\n")
    return 0


def _db(req: Request, env: Mapping[str, str]) -> str:
    return os.path.abspath(os.path.expanduser(req.db)) if req.db else str(default_db_path(env).absolute())


def _new_command(req: Request, env: Mapping[str, str], relay: str) -> tuple[str, list[str]]:
    """The entry name and the full command (relay first) for `setup EDITOR -- AGENT ARGS`."""
    agent, *args = req.agent
    found = shutil.which(agent, path=env.get("PATH")) if os.sep not in agent else agent
    if found:
        agent = os.path.abspath(found)
    else:
        log.warning(f"{escape(agent)} is not on PATH; written as given (check with acp-relay doctor)")
    name = req.name or f"{os.path.basename(agent)} (recorded)"
    return name, [relay, *relay_args(_db(req, env), req.label or name), agent, *args]


def _warn_entry(text: str, name: str, env: Mapping[str, str], *, bare_agent: bool) -> None:
    """What the entry holds that no process can be started with, one line each (setup keeps the user's env
    and args as they are); and, as a wrapped entry keeps its agent command as written, when the editor's PATH
    will not find it."""
    found = [e for e in entries(plan.parse(text)) if e.name == name]
    for fault in faults(found[-1]) if found else []:
        log.warning(f"entry {escape(json.dumps(name, ensure_ascii=False))}: {escape(fault)}")
    w = wrapped(found[-1]) if found and bare_agent else None
    if not w or not w.agent or os.sep in w.agent[0]:
        return
    command = w.agent[0]
    if shutil.which(command, path=found[-1].env.get("PATH", DESKTOP_PATH)):
        return
    here = shutil.which(command, path=env.get("PATH"))
    where = f" (here it is {os.path.abspath(here)}: write that in the entry's args)" if here else ""
    log.warning(f"{escape(command)} is not on the PATH an editor started from the desktop has{escape(where)}")


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SetupError(f"cannot read {path}: {exc.strerror}") from None


def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise SetupError(f"{path}:{line}:{column}: not UTF-8 text", hint="nothing was written") from None


def _print_diff(out: TextIO, path: Path, before: str, after: str) -> None:
    """The change as a unified diff; each line escaped (a config may hold control characters)."""
    old = [line.rstrip("\r") for line in before.splitlines()]
    new = [line.rstrip("\r") for line in after.splitlines()]
    for line in difflib.unified_diff(old, new, f"{path} (before)", f"{path} (after)", lineterm=""):
        out.write(escape(line, multiline=True) + "\n")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _backup(path: Path, data: bytes) -> Path:
    """`data` (the file as it was) beside the file, 0600, under a name no earlier backup has."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime())
    real = Path(os.path.realpath(path))
    for n in range(1000):
        candidate = real.with_name(f"{real.name}.acp-relay-{stamp}{f'-{n}' if n else ''}.bak")
        try:
            fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        except OSError as exc:
            raise SetupError(f"cannot write a backup beside {path}: {exc.strerror}; nothing was written") from None
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return candidate
    raise SetupError(f"too many backups of {path} this second")


def _replace(path: Path, data: bytes) -> None:
    """The file's new content, all at once: a temp file beside it renamed over it (through symlinks: a
    dotfiles link stays a link), with the old file's mode."""
    real = Path(os.path.realpath(path))
    try:
        real.parent.mkdir(parents=True, exist_ok=True)
        mode = real.stat().st_mode & 0o7777 if real.exists() else 0o644
        fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".tmp")
    except OSError as exc:
        raise SetupError(f"cannot write beside {path}: {exc.strerror}; nothing was written") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, real)
    except OSError as exc:
        os.unlink(tmp)
        raise SetupError(f"cannot write {path}: {exc.strerror}; it is unchanged") from None


def _history_path(env: Mapping[str, str]) -> Path:
    return state_dir(env) / HISTORY


def _history(env: Mapping[str, str]) -> list[dict[str, object]]:
    try:
        lines = _history_path(env).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise SetupError(f"cannot read {_history_path(env)}: {exc}") from None
    found = []
    for line in lines:
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and isinstance(item.get("file"), str) and isinstance(item.get("written"), str):
            found.append(item)
    return found


def _save_history(env: Mapping[str, str], items: list[dict[str, object]]) -> None:
    path = _history_path(env)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items).encode("utf-8")
    _replace(path, data)
    os.chmod(path, 0o600)


def _log(env: Mapping[str, str], item: dict[str, object]) -> None:
    _save_history(env, [*_history(env), item])


def undo(path: Path, out: TextIO, env: Mapping[str, str], *, force: bool, dry_run: bool) -> int:
    """The last change setup made to `path` taken back: the backup's bytes (or no file, if setup created
    it), only while the file still holds what setup wrote (--force: whatever it holds)."""
    items = _history(env)
    mine = [i for i, item in enumerate(items) if item["file"] == str(path)]
    if not mine:
        raise SetupError(f"setup has no change of {path} to undo")
    item = items[mine[-1]]
    current = _read(path)
    if not force and (current is None or _digest(current) != item["written"]):
        raise SetupError(
            f"{path} changed since setup wrote it; not undoing",
            hint=f"the file before setup is {item['backup'] or '(none: setup created it)'}; --force undoes anyway",
        )
    backup = item["backup"]
    try:
        restored = Path(backup).read_bytes() if isinstance(backup, str) else None
    except OSError as exc:
        raise SetupError(f"cannot read the backup {backup}: {exc.strerror}; nothing was undone") from None
    _print_diff(out, path, _decode(path, current or b""), _decode(path, restored or b""))
    if dry_run:
        out.write("dry run: nothing written\n")
        return 0
    if restored is None:
        os.unlink(os.path.realpath(path))
        out.write(f"removed {path} (setup had created it)\n")
    else:
        _replace(path, restored)
        out.write(f"restored {path} from {backup}\n")
    _save_history(env, items[: mine[-1]] + items[mine[-1] + 1 :])
    return 0


def list_configs(out: TextIO, env: Mapping[str, str]) -> int:
    """Each known config file and its agent entries, wrapped by acp-relay or not."""
    for editor in FILE_EDITORS:
        out.write(_listing(editor, env))
    return 0


def _listing(editor: Editor, env: Mapping[str, str]) -> str:
    path = Path(editor.config_path(env) or "")
    head = f"{editor.key}  {path}"
    data = _read(path)
    if data is None:
        return f"{head}  (no file)\n"
    try:
        found = entries(plan.parse(_decode(path, data)))
    except jsonc.JsoncError as exc:
        return f"{head}  (cannot read: line {exc.line}, column {exc.column}: {exc.reason})\n"
    except (ValueError, SetupError) as exc:
        return f"{head}  (cannot read: {exc})\n"
    lines = [head + ("" if found else "  (no agent entries)")]
    for entry in found:
        w = wrapped(entry)
        if w:
            what = f"recorded  label {w.label!r}, db {w.db or '(default)'}: {' '.join(w.agent)}"
        else:
            what = "not recorded  " + " ".join([entry.command or "(built-in)", *(entry.args or [])])
        lines.append(f"  {escape(json.dumps(entry.name, ensure_ascii=False))}  {escape(what)}")
    return "\n".join(lines) + "\n"
