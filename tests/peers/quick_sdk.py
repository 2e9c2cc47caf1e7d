"""Imported by every SDK peer before the `agent-client-protocol` SDK: what makes the suite's ~70 SDK peer
processes cheap to start (importing the SDK costs about 1 s of CPU, most of it pydantic building models).

1. With $ACP_PEER_SERVER set (tests/conftest.py starts tests/peers/peer_server.py for each pytest process),
   this process hands its stdin, stdout and stderr, arguments, environment and working directory to that
   server, which forks a copy of itself that has already imported the SDK and runs the peer's script there.
   This process stays as the peer's stand-in: it forwards the signals it gets and exits as the peer exits
   (with its status, or by the same signal), and a stand-in killed outright takes the peer with it. With
   no server, one that declines (another interpreter, other flags or sys.path), or ACP_PEER_SERVER=off,
   the peer runs here as usual.
2. The SDK's models ask pydantic for attribute docstrings, which pydantic finds by reading and tokenizing
   each model's source: nearly half of `import acp`. They only fill in JSON Schema descriptions; nothing a
   peer sends, accepts or refuses depends on them, so they are skipped (a pydantic without the hook is left
   as it is).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any, NoReturn

SERVER = "ACP_PEER_SERVER"
FORWARDED = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2]
LOCAL = b"local"  # the server's answer when the peer is better run by its own process


def fingerprint() -> dict[str, Any]:
    """What a fork must share with a fresh process for the peer to run the same: the interpreter, its
    flags (-u, -X dev, PYTHON* variables) and the import path beyond the script's own directory (which a
    script may have put in front again: sdk_remote_agent.py)."""
    path = [p for p in sys.path if p != sys.path[0]]
    return {"executable": sys.executable, "flags": list(sys.flags), "path": path}


def end_as(status: int) -> NoReturn:
    """Exit with `status`, or, when it is negative, die by that signal (as the peer did)."""
    if status < 0:
        signal.signal(-status, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [-status])
        os.kill(os.getpid(), -status)
    os._exit(status & 0xFF)


def hand_off(path: str) -> None:
    """Run this script in the server's fork and exit as it does; return (to run it here) when there is no
    server to take it or it declines."""
    import json
    import socket

    link = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        link.settimeout(10)
        link.connect(path)
    except OSError:
        link.close()
        return
    link.settimeout(None)
    umask = os.umask(0)
    os.umask(umask)
    ignored = [int(s) for s in FORWARDED if signal.getsignal(s) is signal.SIG_IGN]
    request = {
        "argv": sys.argv,
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "script_dir": sys.path[0],
        "umask": umask,
        "ignored": ignored,
        **fingerprint(),
    }
    # Signals wait (blocked) until there is a peer to forward them to, or this process runs the peer itself.
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
    try:
        socket.send_fds(link, [json.dumps(request).encode()], [0, 1, 2])
        answer = link.recv(64)
    except OSError:
        answer = b""
    if answer in (b"", LOCAL):  # declined, or no fork made: the streams are still only ours
        link.close()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
        return
    pid = int(answer)

    def forward(signum: int, _frame: Any) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for sig in FORWARDED:
        if sig not in ignored:
            signal.signal(sig, forward)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
    # The peer owns the streams now: a copy held here would keep a pipe open after the peer closed it.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    try:
        status = int(link.recv(64))
    except (OSError, ValueError):  # the server is gone: its peer must not outlive it unseen
        forward(signal.SIGKILL, None)
        status = 1
    end_as(status)


def skip_attribute_docstrings() -> None:
    """pydantic's docstring extraction, replaced by one that finds none (see the module's docstring)."""
    try:
        from pydantic._internal import _fields
    except ImportError:  # another pydantic layout: the SDK imports at its usual cost
        return
    if hasattr(_fields, "extract_docstrings_from_cls"):

        def no_docstrings(cls: type, use_inspect: bool = False) -> dict[str, Any]:
            return {}

        _fields.extract_docstrings_from_cls = no_docstrings


# Only a plain `python SCRIPT ...` is handed off: interpreter options (-u, -X ...) would not carry over.
if os.environ.get(SERVER, "off") != "off" and sys.argv[0] and sys.orig_argv[1:2] == [sys.argv[0]]:
    hand_off(os.environ[SERVER])
skip_attribute_docstrings()
