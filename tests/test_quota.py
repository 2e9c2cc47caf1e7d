"""`quota_update` (the Quotas and Limits RFD): shown, searched, summarised in the transcript, counted in stats,
kept apart from `usage_update`, never replayed. The variant added through the vocabulary and its tables only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scripted_db import build_db, req, res, text, upd, v2_head

from acp_relay.protocol import vocab
from acp_relay.protocol.materialize import Event, materialize, replay_updates
from acp_relay.protocol.searchtext import message_text
from acp_relay.render.preview import _params_preview
from acp_relay.render.transcript import render_transcript
from acp_relay.stats.command import compute_stats
from acp_relay.store import db as dbmod
from acp_relay.store.search import search, update_index

SID = "s-quota"
QUOTA: dict[str, Any] = {
    "sessionUpdate": "quota_update",
    "updatedAt": "2026-10-06T13:10:00Z",
    "pools": [
        {
            "id": "plan",
            "label": "Plan usage",
            "state": "exhausted",
            "meters": [
                {"id": "five_hour", "label": "5-hour limit", "usedPercent": 100, "status": "exceeded"},
                {"id": "seven_day", "label": "Weekly limit", "usedPercent": 64, "resetsAt": "2026-10-09T09:00:00Z"},
            ],
        },
        {
            "id": "extra_usage",
            "label": "Extra usage",
            "meters": [
                {
                    "id": "monthly_cap",
                    "used": {"value": "12.40", "unit": "USD"},
                    "limit": {"value": "50.00", "unit": "USD"},
                }
            ],
        },
    ],
}
USAGE = {"sessionUpdate": "usage_update", "used": 31000, "size": 200000}


def _events(*updates: dict[str, Any]) -> list[Event]:
    msgs: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/w", "mcpServers": []}},
        {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": SID}},
        *({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SID, "update": u}} for u in updates),
    ]
    return [Event(n, 100.0 + n, "c2a" if n == 0 else "a2c", m) for n, m in enumerate(msgs)]


def _params(update: dict[str, Any]) -> dict[str, Any]:
    return {"sessionId": SID, "update": update}


def test_quota_update_is_a_live_only_usage_variant_outside_the_shipped_schemas() -> None:
    v = vocab.VARIANTS[vocab.QUOTA_UPDATE]
    assert (v.family, v.live_only, v.versions) == (vocab.Family.USAGE, True, frozenset())
    assert vocab.QUOTA_UPDATE in vocab.LIVE_ONLY
    assert vocab.QUOTA_UPDATE not in vocab.variants(1) | vocab.variants(2)


def test_shown_as_each_meter_of_each_pool() -> None:
    line = _params_preview("session/update", _params(QUOTA))
    assert (
        line
        == "plan (exhausted): five_hour 100% exceeded, seven_day 64%; extra_usage: monthly_cap 12.40/50.00 USD (live only)"
    )
    assert "31000" in _params_preview("session/update", _params(USAGE))
    assert "31000" not in line


def test_searched_by_the_labels_people_read() -> None:
    msg = {"jsonrpc": "2.0", "method": "session/update", "params": _params(QUOTA)}
    found = message_text(msg, "session/update")
    assert "Weekly limit" in found and "Extra usage" in found
    assert "five_hour" not in found  # ids are machinery, as in the rest of the index


def test_searched_in_a_recording(tmp_path: Path) -> None:
    path = build_db(
        tmp_path / "q.db", v2_head(SID) + [(1.0, "a2c", upd(SID, **QUOTA)), (1.1, "a2c", upd(SID, **USAGE))]
    )
    conn = dbmod.connect(path)
    try:
        update_index(conn)
        hits = list(search(conn, '"Weekly limit"'))
    finally:
        conn.close()
    assert [f.update_kind for f, _ in hits] == ["quota_update"]


def test_summarised_in_the_transcript_apart_from_the_context_window() -> None:
    lines = render_transcript(materialize(_events(USAGE, QUOTA), 2))
    quota = [line for line in lines if "Quota" in line]
    assert quota == [
        "[live-only] Quota as of 2026-10-06T13:10:00Z: Plan usage (exhausted): 5-hour limit 100% exceeded, "
        "Weekly limit 64% resets 2026-10-09T09:00:00Z; Extra usage: monthly_cap 12.40/50.00 USD"
    ]
    assert "Context: 31000/200000 tokens" in lines  # usage_update's line, untouched by the quota


def test_kept_apart_from_usage_update_in_the_state() -> None:
    state = materialize(_events(USAGE, QUOTA), 2)
    assert state.usage == {"used": 31000, "size": 200000}
    [entry] = [e for e in state.entries if e.variant == vocab.QUOTA_UPDATE]
    assert entry.kind == "quota" and entry.fields["pools"] == QUOTA["pools"]


def test_never_replayed_by_session_load() -> None:
    for version in (1, 2):
        state = materialize(_events(QUOTA, USAGE), version)
        replayed = [u["sessionUpdate"] for u in replay_updates(state, version)]
        assert replayed == ["usage_update"], version


def test_counted_in_stats_apart_from_usage_update(tmp_path: Path) -> None:
    """Stats counts every variant from the index (no table needed): this guards that quota stays its own row."""
    script = v2_head(SID) + [
        (1.0, "c2a", req(2, "session/prompt", {"sessionId": SID, "prompt": [text("hi")]})),
        (1.1, "a2c", upd(SID, **QUOTA)),
        (1.2, "a2c", upd(SID, **QUOTA)),
        (1.3, "a2c", upd(SID, **USAGE)),
        (1.4, "a2c", res(2, {"stopReason": "end_turn"})),
    ]
    conn = dbmod.connect(build_db(tmp_path / "s.db", script))
    try:
        st = compute_stats(conn, None)
    finally:
        conn.close()
    assert (st.variants["quota_update"], st.variants["usage_update"]) == (2, 1)
