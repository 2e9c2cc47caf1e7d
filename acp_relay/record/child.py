"""The recorder child process: decodes the relay's records from its stdin and hands them to the writer.

Started by record/pipe.py as `python -m acp_relay.record.child CONFIG_JSON`; it ends on the pipe's EOF,
after committing, so a relay killed with SIGKILL still gets what it had sent recorded.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, BinaryIO

from .pipe import CLOSE, EOF_BASE, HEADER, PIPE_SIZE, SPAWNED, STREAMS

GC_THRESHOLD = 20_000  # young-generation collections every 20,000 net allocations (CPython's default: 700)


def _read_exact(f: BinaryIO, n: int) -> bytes | None:
    data = f.read(n)
    return data if data is not None and len(data) == n else None


def _tune_gc() -> None:
    """The recorder makes a few container objects per frame that live until their batch is written: with
    CPython's default thresholds the collector ran every 700 of them and walked the young generations
    over and over (a quarter of the indexing CPU under a flood). Nothing per frame forms a reference cycle;
    collect rarely, and never walk what start-up loaded (frozen once the modules are imported)."""
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD, 50, 1000)


def serve(config: dict[str, Any], inp: BinaryIO) -> int:
    """The child: decode the relay's records and hand them to a Recorder."""
    from ..fdio import warn
    from ..protocol.redact import Policy
    from .recorder import Recorder

    _tune_gc()
    p = config.get("policy") or {}
    recorder = Recorder(
        Path(config["db"]),
        argv=config["argv"],
        cwd=config["cwd"],
        label=config.get("label"),
        warn=warn,
        policy=Policy(enabled=p.get("enabled", True), paths=p.get("paths", []), regexes=p.get("regexes", [])),
        relay_pid=config.get("relay_pid"),
        transport=config.get("transport") or "stdio",
        endpoint=config.get("endpoint"),
    )
    recorder.start()
    final: dict[str, Any] | None = None
    while True:
        header = _read_exact(inp, HEADER.size)
        if header is None:
            break
        code, length, ts, mono = HEADER.unpack(header)
        payload = _read_exact(inp, length) if length else b""
        if payload is None:
            break
        if code < len(STREAMS):
            recorder.put(STREAMS[code], payload, ts, mono)
        elif EOF_BASE <= code < EOF_BASE + len(STREAMS):
            recorder.put(STREAMS[code - EOF_BASE], b"", ts, mono)
        elif code == SPAWNED:
            recorder.record_spawn(json.loads(payload).get("agent_pid"))
        elif code == CLOSE:
            final = json.loads(payload)
    if final is None:  # the relay died without saying goodbye (SIGKILL)
        final = {"status": "interrupted", "closed_by": "relay_killed"}
    recorder.close(**final)
    return 0


def main() -> None:
    try:
        os.nice(10)  # the forwarding path (editor, relay, agent) goes first when CPUs are scarce
    except OSError:
        pass
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)  # we end on the pipe's EOF, after committing
    with open(0, "rb", buffering=PIPE_SIZE) as inp:
        sys.exit(serve(json.loads(sys.argv[1]), inp))


if __name__ == "__main__":
    main()
