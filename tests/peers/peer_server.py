"""Starts SDK peers by forking: a process that has imported the SDK once, and forks a copy of itself for each
peer a stand-in hands it (tests/peers/quick_sdk.py says how a peer hands itself off).

Run: ``python tests/peers/peer_server.py SOCKET_PATH`` (tests/conftest.py does, once per pytest process).
It listens on a SOCK_SEQPACKET Unix socket. A stand-in sends one message, its request as JSON with its
stdin, stdout and stderr attached; the server answers `local` when a fork of it would not run the peer as
a fresh process would (quick_sdk.fingerprint differs), else forks and answers with the peer's pid, then,
once the peer has ended, with its exit status (negative: the signal that ended it). A stand-in that goes
away without its answer takes its peer with it (SIGKILL); a peer dies with the server (PR_SET_PDEATHSIG).
The server ends when its stdin reaches EOF (the pytest process that started it is gone), killing the
peers still running.
"""

from __future__ import annotations

import ctypes
import json
import os
import runpy
import selectors
import signal
import socket
import sys
import traceback
from collections.abc import Callable
from typing import Any, NoReturn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import quick_sdk

# isort: split
# What the peers import, imported once here for every fork (their scripts run again in each fork, cheaply).
import sdk_agent  # noqa: F401
import sdk_client  # noqa: F401
import sdk_remote_agent  # noqa: F401

PR_SET_PDEATHSIG = 1


class Server:
    """The listener, the wake-up pipe SIGCHLD writes to, and each running peer's link to its stand-in."""

    def __init__(self, path: str) -> None:
        """The socket appears at `path` only once it accepts: a stand-in that finds it is never refused (and
        left to run its peer itself where a test expected a fork)."""
        self.own = quick_sdk.fingerprint()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.listener.bind(path + ".new")
        self.listener.listen(64)
        os.rename(path + ".new", path)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda _n, _f: None)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C reaches the whole group: pytest ends us (stdin)
        self.picks = selectors.DefaultSelector()
        self.picks.register(self.listener, selectors.EVENT_READ, "accept")
        self.picks.register(self.wake_r, selectors.EVENT_READ, "reap")
        self.picks.register(0, selectors.EVENT_READ, "stdin")
        self.links: dict[int, socket.socket] = {}  # running peer's pid -> its stand-in's link

    def serve(self) -> None:
        """Until stdin's EOF, which kills the peers still running."""
        while True:
            for key, _ in self.picks.select():
                if key.data == "accept":
                    self.start(self.listener.accept()[0])
                elif key.data == "reap":
                    os.read(self.wake_r, 4096)
                elif key.data == "stdin":
                    if not os.read(0, 4096):
                        for pid in list(self.links):
                            _kill(pid)
                        return
                else:  # a stand-in gone without its answer
                    _kill(key.data)
                    self.close(key.data, None)
            self.reap()

    def start(self, link: socket.socket) -> None:
        """One stand-in's request: declined, or forked and its link kept until the peer ends."""
        try:
            data, fds, _, _ = socket.recv_fds(link, 1 << 20, 3)
        except OSError:
            link.close()
            return
        try:
            request = json.loads(data)
            if len(fds) != 3 or {k: request.get(k) for k in self.own} != self.own:
                link.send(quick_sdk.LOCAL)
                link.close()
                return
            pid = os.fork()
            if pid == 0:
                self.become_peer(link, request, fds)
        except (OSError, ValueError):
            link.close()
            return
        finally:
            for fd in fds:
                os.close(fd)
        try:
            link.send(str(pid).encode())
        except OSError:  # the stand-in is gone already: so is its peer
            _kill(pid)
            link.close()
            return
        self.links[pid] = link
        self.picks.register(link, selectors.EVENT_READ, pid)

    def become_peer(self, link: socket.socket, request: dict[str, Any], fds: list[int]) -> NoReturn:
        """In the fork: nothing of the server's kept open, then the peer; never back into a copy of the loop."""
        try:
            for other in (self.listener, link, *self.links.values()):
                other.close()
            self.picks.close()
            signal.set_wakeup_fd(-1)
            os.close(self.wake_r)
            os.close(self.wake_w)
            run_peer(request, fds)
        finally:
            os._exit(1)

    def close(self, pid: int, status: int | None) -> None:
        """Done with a peer's link: its exit status told (None: no one left to tell)."""
        link = self.links.pop(pid, None)
        if link is None:
            return
        self.picks.unregister(link)
        if status is not None:
            try:
                link.send(str(status).encode())
            except OSError:
                pass
        link.close()

    def reap(self) -> None:
        """Every peer that has ended: its status to its stand-in."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.close(pid, os.waitstatus_to_exitcode(status))


def _kill(pid: int) -> None:
    """SIGKILL to a peer that may have ended already (it is reaped, so its pid is not reused before)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_peer(request: dict[str, Any], fds: list[int]) -> NoReturn:
    """In the fork: become the stand-in's process (its streams, arguments, environment, directory, umask,
    ignored signals) and run its script, in a session of its own as a fresh agent of the relay's would be
    in a group of its own (a terminal's Ctrl-C reaches it through its stand-in only)."""
    status = 1
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() == 1:  # the server died before the line above: so do we
            os._exit(1)
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for sig in request["ignored"]:
            signal.signal(sig, signal.SIG_IGN)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.umask(request["umask"])
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = request["argv"]
        sys.path[0] = request["script_dir"]
        runpy.run_path(sys.argv[0], run_name="__main__")
        status = 0
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            status = (stop.code or 0) & 0xFF
        else:
            print(stop.code, file=sys.stderr)
    except KeyboardInterrupt:  # as Python itself ends on one: the traceback, then by SIGINT
        traceback.print_exc()
        status = -signal.SIGINT
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
    end_as: Callable[[int], NoReturn] = quick_sdk.end_as  # (mypy sees the peers' modules as Any)
    end_as(status)


if __name__ == "__main__":
    Server(sys.argv[1]).serve()
