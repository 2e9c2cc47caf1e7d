"""One rule for every file acp-relay writes (issue 30, item 8): a path that is absent, or with --force a
regular file, is written; a device, a FIFO, a directory, a socket and a symbolic link (even to a regular file)
are refused before a byte is written, and so is a regular file without --force. Before, `view -o` replaced a
character device (as root, the system's /dev/null), a FIFO, a link and a file; `otel export --file` wrote
through a link and blocked forever on a FIFO.

The real /dev/null is never a target here: a device is one this test makes (mknod, as root) or, for the
rule alone, an existing one only looked at."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import ROOT

S1 = "sess-v1-alpha"
ORIGINAL = b"the user's own file\n"

# Each command that writes a file the user names, as argv with {out} for the path.
WRITERS = {
    "view": ["view", S1, "-o", "{out}"],
    "export-sqlite": ["export", S1, "-o", "{out}"],
    "export-ndjson": ["export", S1, "--format", "ndjson", "-o", "{out}"],
    "export-devtools": ["export", S1, "--format", "acp-devtools", "-o", "{out}"],
    "otel-file": ["otel", "export", S1, "--file", "{out}"],
}


def acp(db: Path, argv: list[str], out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """The command in a process of its own: the timeout only guards the failing case (a FIFO opened for
    writing blocks until a reader comes)."""
    args = [a.format(out=out) for a in argv]
    return subprocess.run(
        [sys.executable, "-m", "acp_relay", *args, *extra, "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )


def _fifo(path: Path) -> Callable[[], bool]:
    os.mkfifo(path)
    return lambda: stat.S_ISFIFO(os.lstat(path).st_mode)


def _device(path: Path) -> Callable[[], bool]:
    try:
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # a null device of our own, under tmp_path
    except (PermissionError, OSError):
        pytest.skip("cannot make a device node here (not root, or no CAP_MKNOD)")
    return lambda: stat.S_ISCHR(os.lstat(path).st_mode)


def _link(path: Path) -> Callable[[], bool]:
    target = path.parent / "target.txt"
    target.write_bytes(ORIGINAL)
    path.symlink_to(target)
    return lambda: path.is_symlink() and target.read_bytes() == ORIGINAL


def _dangling(path: Path) -> Callable[[], bool]:
    target = path.parent / "not-yet"
    path.symlink_to(target)
    return lambda: path.is_symlink() and not target.exists()


def _directory(path: Path) -> Callable[[], bool]:
    path.mkdir()
    (path / "inside").write_bytes(ORIGINAL)
    return lambda: path.is_dir() and (path / "inside").read_bytes() == ORIGINAL


def _socket(path: Path) -> Callable[[], bool]:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()
    return lambda: stat.S_ISSOCK(os.lstat(path).st_mode)


def _regular(path: Path) -> Callable[[], bool]:
    path.write_bytes(ORIGINAL)
    return lambda: path.read_bytes() == ORIGINAL


REFUSED = {
    "fifo": (_fifo, "is a FIFO"),
    "device": (_device, "is a character device"),
    "link": (_link, "is a symbolic link"),
    "dangling-link": (_dangling, "is a symbolic link"),
    "directory": (_directory, "is a directory"),
    "socket": (_socket, "is a socket"),
    "file": (_regular, "already exists (--force replaces it)"),
}


@pytest.mark.parametrize("writer", list(WRITERS))
@pytest.mark.parametrize("kind", list(REFUSED))
def test_every_writer_refuses_what_is_not_a_new_file(fixture_db: Path, tmp_path: Path, writer: str, kind: str) -> None:
    out = tmp_path / "out"
    make, said = REFUSED[kind]
    unchanged = make(out)
    before = sorted(os.listdir(tmp_path))
    r = acp(fixture_db, WRITERS[writer], out)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert said in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert unchanged(), f"{writer} changed the {kind} at {out}"
    assert sorted(os.listdir(tmp_path)) == before  # nothing made beside it either


@pytest.mark.parametrize("writer", list(WRITERS))
@pytest.mark.parametrize("kind", ["fifo", "device", "link", "directory"])
def test_force_replaces_only_a_regular_file(fixture_db: Path, tmp_path: Path, writer: str, kind: str) -> None:
    out = tmp_path / "out"
    make, said = REFUSED[kind]
    unchanged = make(out)
    r = acp(fixture_db, WRITERS[writer], out, "--force")
    assert r.returncode == 2 and said in r.stderr, (r.returncode, r.stderr)
    assert unchanged()


@pytest.mark.parametrize("writer", list(WRITERS))
def test_force_replaces_a_regular_file_and_a_new_path_is_written(fixture_db: Path, tmp_path: Path, writer: str) -> None:
    fresh = tmp_path / "fresh"
    r = acp(fixture_db, WRITERS[writer], fresh)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600 and fresh.stat().st_size > 0
    out = tmp_path / "out"
    out.write_bytes(ORIGINAL)
    os.chmod(out, 0o644)
    r = acp(fixture_db, WRITERS[writer], out, "--force")
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:16] == fresh.read_bytes()[:16]  # the same kind of document (timestamps differ)
    assert out.read_bytes() != ORIGINAL and stat.S_ISREG(os.lstat(out).st_mode)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh", "out"]  # no temporary file left


def test_the_rule_refuses_an_existing_device_without_touching_it() -> None:
    """The system's null device is only looked at (lstat): the rule refuses it, with --force too."""
    from acp_relay.fdio import UnsafeTarget, check_target

    before = os.stat("/dev/null")
    for force in (False, True):
        with pytest.raises(UnsafeTarget, match="is a character device"):
            check_target("/dev/null", force=force)
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)


def test_a_filesystem_without_hard_links_still_gets_the_file_and_never_a_replaced_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Publishing links the finished file to its name (so nothing there is replaced); where the filesystem
    has no hard links (FAT, some network mounts) the name is created exclusively first, with the same rule."""
    from acp_relay import fdio

    def no_links(src: str, dst: str) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(fdio.os, "link", no_links)
    out = tmp_path / "page.html"
    fdio.write_file_atomically(out, b"new")
    assert out.read_bytes() == b"new" and stat.S_IMODE(out.stat().st_mode) == 0o600
    with pytest.raises(FileExistsError, match="already exists"):
        fdio.write_file_atomically(out, b"again")
    assert out.read_bytes() == b"new" and sorted(os.listdir(tmp_path)) == ["page.html"]
