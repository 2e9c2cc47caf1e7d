"""Starts SDK peers by forking: a process that has imported the SDK once, and forks a copy of itself for each
peer a stand-in hands it (tests/peers/quick_sdk.py says how a peer hands itself off).

Run: ``python tests/peers/peer_server.py SOCKET_PATH`` (tests/conftest.py does, once per pytest process).
It listens on a SOCK_SEQPACKET Unix socket. A stand-in sends one message, its request as JSON with its
stdin, stdout and stderr attached; the server forks, answers with the peer's pid, and once the peer has
ended, with its exit status (negative: the signal that ended it). A stand-in that goes away without its
answer takes its peer with it (SIGKILL). The server ends when its stdin reaches EOF (the pytest process
that started it is gone), killing the peers still running.
"""

from __future__ import annotations

import json
import os
import runpy
import selectors
import signal
import socket
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import quick_sdk  # noqa: F401  (before the SDK: see quick_sdk.py)

# isort: split
# What the peers import, imported once here for every fork (their scripts run again in each fork, cheaply).
import sdk_agent  # noqa: F401
import sdk_client  # noqa: F401
import sdk_remote_agent  # noqa: F401


def main(path: str) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda _n, _f: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C reaches the whole group: pytest ends us (stdin)
    picks = selectors.DefaultSelector()
    picks.register(listener, selectors.EVENT_READ, "accept")
    picks.register(wake_r, selectors.EVENT_READ, "reap")
    picks.register(0, selectors.EVENT_READ, "stdin")
    links: dict[int, socket.socket] = {}  # running peer's pid -> its stand-in's link

    def close(pid: int, status: int | None) -> None:
        link = links.pop(pid, None)
        if link is None:
            return
        picks.unregister(link)
        if status is not None:
            try:
                link.send(str(status).encode())
            except OSError:
                pass
        link.close()

    while True:
        for key, _ in picks.select():
            if key.data == "accept":
                link, _ = listener.accept()
                request, fds, _, _ = socket.recv_fds(link, 1 << 20, 3)
                if len(fds) != 3:
                    for fd in fds:
                        os.close(fd)
                    link.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    for other in (listener, link, *links.values()):
                        other.close()
                    picks.close()
                    signal.set_wakeup_fd(-1)
                    os.close(wake_r)
                    os.close(wake_w)
                    run_peer(json.loads(request), fds)
                for fd in fds:
                    os.close(fd)
                link.send(str(pid).encode())
                links[pid] = link
                picks.register(link, selectors.EVENT_READ, pid)
            elif key.data == "reap":
                os.read(wake_r, 4096)
            elif key.data == "stdin":
                if not os.read(0, 4096):
                    for pid in list(links):
                        _kill(pid)
                    return
            else:  # a stand-in gone without its answer
                _kill(key.data)
                close(key.data, None)
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            close(pid, os.waitstatus_to_exitcode(status))


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_peer(request: dict[str, object], fds: list[int]) -> None:
    """In the fork: become the stand-in's process (its streams, arguments, environment, directory) and run
    its script; never returns."""
    status = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        env = request["env"]
        argv = request["argv"]
        assert isinstance(env, dict) and isinstance(argv, list)
        os.chdir(str(request["cwd"]))
        os.environ.clear()
        os.environ.update(env)
        sys.argv = argv
        sys.path[0] = str(request["path"])
        runpy.run_path(argv[0], run_name="__main__")
        status = 0
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            status = stop.code or 0
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
        if status < 0:
            signal.signal(-status, signal.SIG_DFL)
            os.kill(os.getpid(), -status)
        os._exit(status & 0xFF)


if __name__ == "__main__":
    main(sys.argv[1])
