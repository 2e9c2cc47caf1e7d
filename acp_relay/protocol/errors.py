"""The exit-code contract every command follows, and the one exception a command raises for the user.

Kept in protocol/ (pure, imported by every layer) so that store/, render/ and each command raise the same
UserError, and the CLI turns it into `acp-relay: COMMAND: message` and the status it carries.
"""

from __future__ import annotations

OK = 0  # success: `check` clean, `diff` same, `search` matched
ANSWER = 1  # the answer a script tests for: `check` findings, `diff` differences, `search` no match
USAGE = 2  # usage errors, a missing database, a missing or ambiguous session
TIMEOUT = 3  # a turn or a wait ran out of time
PEER_DIED = 4  # the agent (or the editor) exited or crashed early
DB_UNUSABLE = 5  # the database is full, read-only, corrupt, or locked past the busy timeout
SIGNAL_BASE = 128  # 128+N: stopped by signal N (130 for Ctrl-C); `run` keeps the agent's own status

EXIT_CODES: tuple[tuple[int, str], ...] = (
    (OK, "success: `check` found no error, `diff` found them the same, `search` matched"),
    (ANSWER, "the answer a script tests for: `check` findings, `diff` differences, `search` no match"),
    (USAGE, "usage error, no database, no such session, an ambiguous session"),
    (TIMEOUT, "a timeout (a rerun turn that did not end)"),
    (PEER_DIED, "the peer died (the agent exited or crashed early)"),
    (DB_UNUSABLE, "the database is unusable: full, read-only, corrupt, or locked past the busy timeout"),
    (SIGNAL_BASE, "128+N: stopped by signal N (130 for Ctrl-C); `run` exits with the agent's own status"),
)


class UserError(Exception):
    """A problem the user can fix (bad option, no database, no such or an ambiguous session): every command's
    error. The CLI prints `acp-relay: COMMAND: message` (and the hint on a second line) and exits `status`."""

    def __init__(self, message: str, status: int = USAGE, hint: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.hint = hint
