"""Blocking descriptor I/O shared by the commands that pump bytes (`run`'s relay and recorder, `replay`).

Blocking calls work the same on pipes, terminals, sockets, regular files and /dev/null, and never flip
O_NONBLOCK on a descriptor shared with the editor. A descriptor someone else made non-blocking is waited on
with select() instead of being taken for closed: EAGAIN is not end of file.
"""

from __future__ import annotations

import os
import select
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

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


def warn(message: str) -> None:
    """A diagnostic line on stderr (the caller gives the `acp-relay...:` prefix); never raises."""
    try:
        os.write(2, (message.rstrip("\n") + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


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
    import signal

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
