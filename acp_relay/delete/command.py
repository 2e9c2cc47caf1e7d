"""`acp-relay delete`'s Python API: one session's frames removed (store/retention does the SQL), refused while a
relay is still recording that session's connection."""

from __future__ import annotations

import sqlite3
from typing import NamedTuple

from ..protocol.errors import UserError
from ..protocol.words import counted
from ..render.text import clean
from ..store import retention
from ..store.liveness import live_writer
from ..store.queries import resolve_view


class Deleted(NamedTuple):
    session: str
    connection: int
    frames: int

    def line(self) -> str:
        return f"deleted session {clean(self.session)}@{self.connection} ({counted(self.frames, 'frame')})"


def compute(conn: sqlite3.Connection, session: str) -> Deleted:
    """Delete SESSION (an id, a unique prefix, `last`, ID@N); a UserError names a session still recorded."""
    view = resolve_view(conn, session)
    assert view.session_id is not None
    writer = live_writer(conn, view.connection_id)
    if writer is not None:  # `last` is usually the session being recorded: say which one, touch nothing
        raise UserError(
            f"session {clean(view.session_id)}@{view.connection_id} is still being recorded (relay pid {writer});"
            " nothing deleted",
            hint="delete it once that relay has exited",
        )
    frames = retention.delete_session(conn, view.session_id, view.connection_id)
    return Deleted(view.session_id, view.connection_id, frames)
