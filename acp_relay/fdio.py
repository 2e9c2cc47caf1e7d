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


def write_file_atomically(path: str | os.PathLike[str], data: bytes, *, overwrite: bool = True) -> None:
    """Write `data` to `path` whole or not at all (see write_chunks_atomically)."""
    write_chunks_atomically(path, (data,), overwrite=overwrite)


def write_chunks_atomically(path: str | os.PathLike[str], chunks: Iterable[bytes], *, overwrite: bool = True) -> None:
    """Write the chunks to `path` whole or not at all (a full disk, or an error while the chunks are made,
    leaves no 0-byte or partial file): into a private temporary file beside it (0600), then renamed over
    it, or, without `overwrite`, linked to it (FileExistsError when something is there already). A chunk is
    written as it comes: the whole file is never in memory."""
    import tempfile

    target = os.fspath(path)
    fd, tmp = tempfile.mkstemp(prefix=".acp-relay-", suffix=".tmp", dir=os.path.dirname(target) or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
                del chunk  # not held while the next one is made
            f.flush()
            os.fsync(f.fileno())
        if overwrite:
            os.replace(tmp, target)
        else:
            os.link(tmp, target)
            os.unlink(tmp)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


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
