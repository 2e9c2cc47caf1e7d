"""Imported by every SDK peer before the `agent-client-protocol` SDK: what makes the suite's ~70 SDK peer
processes cheap to start (importing the SDK costs about 1 s of CPU, most of it pydantic building models).

1. With $ACP_PEER_SERVER set (tests/conftest.py starts tests/peers/peer_server.py for each pytest process),
   this process hands its stdin, stdout and stderr, arguments, environment and working directory to that
   server, which forks a copy of itself that has already imported the SDK and runs the peer's script there.
   This process stays as the peer's stand-in: it forwards the signals it gets and exits as the peer exits
   (with its status, or by the same signal), and a stand-in killed outright takes the peer with it. With
   no server, or one that does not answer, the peer runs here as usual.
2. The SDK's models ask pydantic for attribute docstrings, which pydantic finds by reading and tokenizing
   each model's source: nearly half of `import acp`. They only fill in JSON Schema descriptions; nothing a
   peer sends, accepts or refuses depends on them, so they are skipped (a pydantic without the hook is left
   as it is).
"""

from __future__ import annotations

import os
import sys
from typing import Any

SERVER = "ACP_PEER_SERVER"
FORWARDED = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")


def hand_off(path: str) -> None:
    """Run this script in the server's fork and exit as it does; return (to run it here) when the server
    cannot take it."""
    import json
    import signal
    import socket

    request = {"argv": sys.argv, "cwd": os.getcwd(), "env": dict(os.environ), "path": sys.path[0]}
    link = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        link.settimeout(10)
        link.connect(path)
        socket.send_fds(link, [json.dumps(request).encode()], [0, 1, 2])
        pid = int(link.recv(64))
    except (OSError, ValueError):
        link.close()
        return
    link.settimeout(None)
    # The peer owns the streams now: a copy held here would keep a pipe open after the peer closed it.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)

    def forward(signum: int, _frame: Any) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for name in FORWARDED:
        signal.signal(getattr(signal, name), forward)
    try:
        status = int(link.recv(64) or b"1")
    except (OSError, ValueError):
        status = 1
    if status < 0:  # the peer died of a signal: so does its stand-in
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    os._exit(status & 0xFF)


def skip_attribute_docstrings() -> None:
    try:
        from pydantic._internal import _fields
    except ImportError:  # another pydantic layout: the SDK imports at its usual cost
        return
    if hasattr(_fields, "extract_docstrings_from_cls"):

        def no_docstrings(cls: type, use_inspect: bool = False) -> dict[str, Any]:
            return {}

        _fields.extract_docstrings_from_cls = no_docstrings


# Only a plain `python SCRIPT ...` is handed off: interpreter options (-u, -X ...) would not carry over.
if os.environ.get(SERVER) and sys.argv[0] and sys.orig_argv[1:2] == [sys.argv[0]]:
    hand_off(os.environ[SERVER])
skip_attribute_docstrings()
