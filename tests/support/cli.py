"""The one way tests run a command in-process: `acp-relay ARGS` through click's CliRunner, with stdout and
stderr apart (the diagnostics contract is about which one a line goes to)."""

from __future__ import annotations

from click.testing import CliRunner, Result

from acp_relay.cli import cli


def run(
    *args: str, input: bytes | str | None = None, env: dict[str, str] | None = None, crash_ok: bool = False
) -> Result:
    """`acp-relay ARGS...` in this process, stdout and stderr apart (`.stdout`, `.stderr`, `.exit_code`); a
    crash inside a command is re-raised, never taken for an exit status (unless `crash_ok`: a test that
    injects a fault the command does not handle yet)."""
    return CliRunner().invoke(cli, list(args), input=input, env=env, catch_exceptions=crash_ok, prog_name="acp-relay")


def run_on_terminal(
    *args: str, columns: int = 80, lines: int = 24, env: dict[str, str] | None = None, timeout: float = 30
) -> tuple[int, str]:
    """`acp-relay ARGS...` in a child process whose stdout is a terminal (a pty) of that size: its status and
    what it printed there (stderr apart, on a pipe, not returned)."""
    import fcntl
    import os
    import pty
    import select
    import struct
    import subprocess
    import sys
    import termios
    import time

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
    child_env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    child_env |= env or {}
    proc = subprocess.Popen(
        [sys.executable, "-m", "acp_relay", *args],
        stdin=slave,
        stdout=slave,
        stderr=subprocess.DEVNULL,
        env=child_env,
        close_fds=True,
    )
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:  # until EOF (EIO once every holder of the terminal closed it)
        ready, _, _ = select.select([master], [], [], 0.1)
        if not ready:
            continue
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    status = proc.wait(timeout=timeout)
    return status, out.decode("utf-8", "replace").replace("\r\n", "\n")
