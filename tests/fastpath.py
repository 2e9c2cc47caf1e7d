"""The recorder's fast path (Tracker.feed_rows) against the reference (Tracker.feed): same frames, same
index fields, same tracker state. Shared by test_tracker.py (hand-picked cases) and test_fuzz.py."""

from __future__ import annotations

from typing import Any

from acp_relay.protocol.tracker import Frame, Tracker


def _fields(f: Any) -> tuple[Any, ...]:
    """A frame's stored index fields, from a Frame or a QuickRow."""
    if isinstance(f, tuple):
        seq, direction, ts, mono, raw, method, sid, kind, details, _ = f
        return (seq, direction, ts, mono, bytes(raw), False, "ok", "notification", method, None, sid, kind, details)
    assert isinstance(f, Frame)
    ix = f.index
    m = ix.single
    if m is None:
        members = tuple((b.kind, b.method, b.rpc_id, b.session_id, b.update_kind, b.details) for b in ix.messages)
        return (f.seq, f.direction, f.ts, f.mono, bytes(f.raw), f.unterminated, ix.parse, ix.kind, members)
    return (
        f.seq, f.direction, f.ts, f.mono, bytes(f.raw), f.unterminated, ix.parse, m.kind, m.method, m.rpc_id,
        m.session_id, m.update_kind, m.details,
    )  # fmt: skip


def _state(t: Tracker) -> tuple[Any, ...]:
    return (
        t.seq,
        {k: (s.first_seen, s.last_seen, s.origin, s.cwd, s.title, s.parent_session_id) for k, s in t.sessions.items()},
        set(t.dirty_sessions),
        list(t.backfill),
        {k: (p.seq, p.mono, p.method, p.session_id) for k, p in t.correlator.pending.items()},
        (t.info.protocol_version, t.info.client_info, t.info.agent_info, t.info_dirty),
        {d: fr.pending for d, fr in t.framers.items()},
    )


def check_fast_path(chunks: list[tuple[str, bytes]]) -> int:
    """Feed both ways (b"" is EOF); assert they agree; return how many frames took the fast path."""
    ref, fast = Tracker(), Tracker()
    quick = 0
    for i, (d, chunk) in enumerate(chunks):
        ts, mono = 1000.0 + i, i / 1000.0
        if chunk:
            a: list[Any] = ref.feed(d, chunk, ts, mono)
            b: list[Any] = fast.feed_rows(d, chunk, ts, mono)
        else:
            a, b = ref.eof(d, ts, mono), fast.eof(d, ts, mono)
        assert [_fields(f) for f in b] == [_fields(f) for f in a]
        assert _state(fast) == _state(ref)
        quick += sum(isinstance(f, tuple) for f in b)
    return quick
