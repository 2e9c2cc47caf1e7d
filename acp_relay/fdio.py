"""Blocking descriptor I/O shared by the commands that pump bytes (`run`'s relay and recorder, `replay`),
and the one function that starts an agent (or a relay in front of one) with pipes to it.

Blocking calls work the same on pipes, terminals, sockets, regular files and /dev/null, and never flip
O_NONBLOCK on a descriptor shared with the editor. A descriptor someone else made non-blocking is waited on
with select() instead of being taken for closed: EAGAIN is not end of file.
"""

from __future__ import annotations

import os
import select
import signal
import stat
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Literal

CHUNK = 1 << 16


def read_chunk(fd: int, size: int = CHUNK) -> bytes:
    """Up to `size` bytes, blocking until there are some; b"" only at end of file."""
    while True:
        try:
            return os.read(fd, size)
        except BlockingIOError:
            select.select([fd], [], [])
        except InterruptedError:
            continue


def write_all(fd: int, data: bytes) -> None:
    """Write every byte, waiting whenever a non-blocking descriptor is full."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            select.select([], [fd], [])
            continue
        except InterruptedError:
            continue
        view = view[n:]


Group = Literal["forwarded", "session", "inherited"]


def _pdeathsig() -> Callable[[], None] | None:
    """What the child runs before exec so that, if its parent dies without cleaning up (SIGKILL), it gets
    SIGTERM (Linux's PR_SET_PDEATHSIG). libc is loaded here, in the parent: the child imports nothing."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except Exception:
        return None

    def set_it() -> None:
        try:
            prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except Exception:
            pass

    return set_it


def spawn(
    argv: list[str],
    group: Group,
    *,
    stderr: int | None = subprocess.PIPE,
    cwd: str | None = None,
    pdeathsig: bool = False,
) -> subprocess.Popen[bytes]:
    """Start `argv` with pipes to its stdin and stdout (stderr: a pipe, or None to share ours), unbuffered.

    The process-group and signal policy is the caller's, one of three:
    - "forwarded" (`run`'s stdio relay, run/relay.py): the agent gets a process group of its own in our
      session, so the terminal's Ctrl-C reaches it once, through us (we forward SIGTERM, SIGINT, SIGHUP to
      it and pass its status on), not twice; with `pdeathsig` it gets SIGTERM if we die without cleaning up.
    - "session" (`serve`'s agents, transport/agent.py; `rerun`'s relay, rerun/shell.py): a session of its
      own, so our Ctrl-C is only ours; the caller ends it itself (stdin closed, then its group SIGTERM'd,
      then SIGKILL'd; rerun first passes its own stop signal on to the relay, which forwards it).
    - "inherited" (`demo`'s client starting `acp-relay run`, demo.py): our group and session, so a Ctrl-C at
      the terminal reaches the relay too, as it would from an editor.
    Raises OSError (FileNotFoundError, PermissionError) when it cannot be started.
    """
    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        bufsize=0,
        cwd=cwd,
        process_group=0 if group == "forwarded" else None,
        start_new_session=group == "session",
        preexec_fn=_pdeathsig() if pdeathsig else None,
    )


class UnsafeTarget(OSError):
    """An output path acp-relay will not write: not a regular file (a device, a FIFO, a socket, a directory),
    a symbolic link, or, without `force`, a regular file that is there already (then a FileExistsError too)."""


class TargetExists(UnsafeTarget, FileExistsError):
    pass


_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def check_target(path: str | os.PathLike[str], *, force: bool = False) -> None:
    """The one rule for every file acp-relay writes: absent, or (with `force`) a regular file, which is then
    replaced. Anything else is refused before a byte is written: a device or a FIFO (`-o /dev/null` must
    not replace the system's /dev/null), a directory, a socket, and a symbolic link even to a regular file
    (a final link is never followed: whoever planted it chose where we would write)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISREG(mode):
        if not force:
            raise TargetExists(f"{os.fspath(path)} already exists (--force replaces it)")
        return
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    raise UnsafeTarget(f"{os.fspath(path)} is {kind}: acp-relay writes only regular files")


def publish(tmp: str, target: str | os.PathLike[str], *, force: bool = False) -> None:
    """Give the finished file `tmp` (beside `target`) the name `target`: linked (never replacing anything;
    where links are not supported, the name is first created exclusively) or, with `force`, renamed over
    the regular file there (checked again just before)."""
    if force:
        check_target(target, force=True)
        os.replace(tmp, target)
        return
    try:
        _link(tmp, target)
    except FileExistsError:
        check_target(target)  # what appeared there meanwhile, said as check_target says it
        raise


def _link(tmp: str, target: str | os.PathLike[str]) -> None:
    """`tmp` named `target` too, then unnamed; FileExistsError when anything is at `target`."""
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise
    except OSError:  # a filesystem without hard links (FAT, some network mounts): claim the name, then
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        os.replace(tmp, target)  # over the empty file just made ours
        return
    os.unlink(tmp)


def write_file_atomically(path: str | os.PathLike[str], data: bytes, *, force: bool = False) -> None:
    """Write `data` to `path` whole or not at all (see write_chunks_atomically)."""
    write_chunks_atomically(path, (data,), force=force)


def write_chunks_atomically(path: str | os.PathLike[str], chunks: Iterable[bytes], *, force: bool = False) -> None:
    """Write the chunks to `path` whole or not at all (a full disk, or an error while the chunks are made,
    leaves no 0-byte or partial file): checked (check_target), then into a private temporary file beside it
    (0600), then published there (publish). A chunk is written as it comes: the whole file is never in
    memory."""
    import tempfile

    check_target(path, force=force)
    target = os.fspath(path)
    fd, tmp = tempfile.mkstemp(prefix=".acp-relay-", suffix=".tmp", dir=os.path.dirname(target) or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
                del chunk  # not held while the next one is made
            f.flush()
            os.fsync(f.fileno())
        publish(tmp, target, force=force)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def open_target(path: str | os.PathLike[str], *, force: bool = False) -> int:
    """A descriptor to write `path` in place (a stream that is not published whole), by check_target's rule,
    0600 from the start: created, or with `force` a regular file emptied. O_NOFOLLOW and O_NONBLOCK close
    the gap after the check: a link planted meanwhile fails, a FIFO does not hang, and what was opened is
    checked again before it is emptied."""
    check_target(path, force=force)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | (0 if force else os.O_EXCL)
    fd = os.open(path, flags, 0o600)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafeTarget(f"{os.fspath(path)} is not a regular file: acp-relay writes only regular files")
        os.set_blocking(fd, True)
        os.ftruncate(fd, 0)
        os.fchmod(fd, 0o600)  # private like a new one, whatever the replaced file allowed
    except BaseException:
        os.close(fd)
        raise
    return fd


STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")


class Stopped(Exception):
    """A stop signal (SIGTERM, SIGINT, SIGHUP) arrived: raised from its handler, in the main thread, so the
    command can end what it started and exit 128+N."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextmanager
def stopping_on_signals() -> Iterator[None]:
    """Within the block, SIGTERM, SIGINT and SIGHUP raise Stopped; the handlers before are put back after."""

    def stop(signum: int, frame: object) -> None:
        for name in STOP_SIGNALS:  # a second signal while we clean up: once is enough
            signal.signal(getattr(signal, name), signal.SIG_IGN)
        raise Stopped(signum)

    previous = {name: signal.signal(getattr(signal, name), stop) for name in STOP_SIGNALS}
    try:
        yield
    finally:
        for name, handler in previous.items():
            signal.signal(getattr(signal, name), handler)
