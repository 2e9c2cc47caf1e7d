"""`acp-relay run --connect URL`: the editor spawns us as its stdio agent; the agent is remote.

The shell is the stdio relay's (run/shell.run_shell): trio owns the signals (here they end the
connection, 128+N), the connection's tasks and the recorder's lifetime.

The same recorder as the stdio relay (record/pipe.py) takes both directions' bytes and the transport's
events; the connection row says which transport carried them. Everything remote is imported here, when
--connect is given, so the stdio relay's start-up does not pay for it.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..protocol.redact import Policy
from ..protocol.remote import shown_endpoint, transport_of
from ..record.pipe import RecorderClient
from ..transport.upstream import link_to

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)


def run_connect(
    url: str,
    db_path: Path,
    *,
    headers: list[tuple[str, str]],
    insecure: bool = False,
    timeout: float = 30.0,
    label: str | None = None,
    policy: Policy | None = None,
) -> int:
    """Relay stdio to the remote agent at `url` until either side ends; return the exit status."""
    kind = transport_of(url)
    policy = policy or Policy()
    if not policy.enabled:
        log.warning(f"--no-redact: credentials sent to the agent are stored as they are in {db_path}")
    if insecure and url.lower().startswith(("https:", "wss:")):
        log.warning(
            f"--insecure: the certificate of {shown_endpoint(url)} is NOT verified; anyone on the path can read and change this session"
        )
    endpoint = shown_endpoint(url)
    recorder = RecorderClient(
        db_path,
        argv=[endpoint],
        cwd=os.getcwd(),
        label=label,
        policy=policy,
        transport=kind,
        endpoint=endpoint,
    )
    recorder.launch()  # no agent start-up to make way for
    recorder.event(
        {"event": "config", "side": "agent", "headers": [[n, "[redacted]"] for n, _ in headers], "insecure": insecure}
    )
    from ..transport.bridge import bridge
    from .shell import Final, run_shell

    link = link_to(url, headers, recorder, insecure=insecure, timeout=timeout)

    async def connect(signals: Any) -> Final:
        ending = await bridge(link, recorder, signals=signals)
        if ending.message:
            log.warning(ending.message)
        return ending.code, {
            "status": "ended",
            "exit_code": ending.code,
            "closed_by": ending.closed_by,
            "error": ending.message,
        }

    return run_shell(recorder, connect)
