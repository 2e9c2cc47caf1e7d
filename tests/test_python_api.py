"""Each command as a Python API (the sqlite-utils way): `compute(conn, ...)` returns data, asserted here as
data, on the scripted fixture recordings (tests/fixtures/recordings.py). The printed forms are the CLI
tests' (test_show_golden, test_stats, ...); these check what a caller gets without any printing."""

from __future__ import annotations

import io
import json
import logging
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_relay.store import db as dbmod
from acp_relay.store.queries import open_db

V1, V2 = "sess-v1-alpha", "sess-v2-beta"


@pytest.fixture
def conn(fixture_db: Path) -> Iterator[sqlite3.Connection]:
    """The fixture recordings, read-only, as the reading commands open them."""
    c = open_db(fixture_db)
    yield c
    c.close()


def test_stats_compute_counts_frames_variants_and_turns(conn: sqlite3.Connection) -> None:
    from acp_relay.stats.command import compute

    st = compute(conn, V1)
    assert st.scope == f"session {V1} (connection 1)"
    assert (st.frames, dict(st.frames_by_direction), st.errors) == (30, {"c2a": 9, "a2c": 21}, 1)
    assert st.variants["agent_message_chunk"] == 4 and st.variants["usage_update"] == 1
    assert [(t.frame, t.stop_reason, t.duration_ms) for t in st.turns] == [
        (7, "end_turn", 2000.0),
        (24, "cancelled", 600.0),
    ]
    assert compute(conn).frames > st.frames  # no session: every recording


def test_info_compute_says_what_the_peers_declared(conn: sqlite3.Connection) -> None:
    from acp_relay.info.command import compute

    info = compute(conn, V1)
    assert (info.session_id, info.connection_id, info.protocol_version) == (V1, 1, 1)
    assert info.client == {"name": "zed", "title": "Zed", "version": "0.200.0"}
    assert info.agent == {"name": "fixture-agent", "version": "1.2.3"}
    assert info.counts == {"turns": 2, "tool_calls": 1, "permissions": 2, "errors": 1}
    rows = {r["capability"]: r for r in info.capabilities}
    assert rows["terminal"]["editor"] is True and rows["session load"]["agent"] is True


def test_check_compute_returns_findings_and_the_status(conn: sqlite3.Connection) -> None:
    from acp_relay.check.command import compute

    checked = compute(conn, None, "1")
    assert checked.frames == 32 and checked.status == 1  # connection 1's non-JSON line is an error
    assert ("rpc.not-json", "error", 3) in [(f.rule, f.severity, f.frame) for f in checked.findings]
    errors = compute(conn, every=True, min_severity="error")
    assert {f.severity for f in errors.findings} == {"error"} and {c for c, _ in errors.found} == {1, 2, 3}
    assert compute(conn, None, "1", ignore=("rpc.*",)).findings == [
        f for f in checked.findings if not f.rule.startswith("rpc.")
    ]


def test_diff_compute_returns_the_layers(conn: sqlite3.Connection) -> None:
    from acp_relay.diff.command import DiffError, compute

    compared = compute(conn, V1, V2, ignore=("timing",))
    assert (compared.a.name, compared.b.name) == (f"{V1}@1", f"{V2}@2")
    assert {layer.name: layer.differs for layer in compared.layers} == {
        "conversation": True,
        "protocol": True,
        "metadata": True,
        "timing": False,
    }
    assert compared.status == 1
    with pytest.raises(DiffError):
        compute(conn, V1, V1)


def test_search_compute_yields_the_matching_frames_and_messages(fixture_db: Path, tmp_path: Path) -> None:
    from acp_relay.search.command import FrameHit, compute
    from acp_relay.store.search import MessageHit

    copy = tmp_path / "search.db"  # the index is written into the database: never into the shared fixture
    shutil.copy(fixture_db, copy)
    conn = dbmod.connect(copy, create=False)
    try:
        hits = list(compute(conn, "pytest", session=V1))
        frames = [h for h in hits if isinstance(h, FrameHit)]
        assert frames and all(h.frame.session_id == V1 and "pytest" in h.frame.raw.decode() for h in frames)
        assert all(isinstance(h, FrameHit | MessageHit) for h in hits)
        assert list(compute(conn, "pytest", session=V2)) == []
        assert len(list(compute(conn, "pytest", limit=1))) == 1
    finally:
        conn.close()


def test_export_compute_writes_the_file_or_returns_the_document(conn: sqlite3.Connection, tmp_path: Path) -> None:
    from acp_relay.export.command import compute, render

    dest = tmp_path / "v1.db"
    exported = compute(conn, V1, output=str(dest))
    assert (exported.what, exported.output, exported.chunks) == (f"session {V1}@1", str(dest), None)
    written = sqlite3.connect(dest)
    try:
        assert exported.frames == written.execute("SELECT count(*) FROM frames").fetchone()[0] > 0
    finally:
        written.close()
    document = compute(conn, V1, fmt="ndjson")
    assert document.output is None and document.chunks is not None
    out = io.BytesIO()
    render(document, out)
    assert len(out.getvalue().splitlines()) == exported.frames


def test_import_compute_returns_the_connections_brought_in(
    conn: sqlite3.Connection, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from acp_relay.export.command import compute as export
    from acp_relay.import_.command import ImportFailed, compute

    capture = tmp_path / "v1.ndjson"
    export(conn, V1, fmt="ndjson", output=str(capture))
    frames = len(capture.read_bytes().splitlines())  # one line per frame
    target = dbmod.connect(tmp_path / "new.db")
    try:
        with caplog.at_level(logging.INFO, logger="acp_relay"):
            [imported] = compute(target, capture, label="mine")
        assert (imported.file, imported.format, imported.frames, imported.sessions) == (
            str(capture),
            "ndjson",
            frames,
            [V1],
        )
        assert caplog.records == []  # our own export: nothing a reader had to leave out
        with pytest.raises(ImportFailed, match="imported before|already"):
            compute(target, capture)
    finally:
        target.close()


def test_show_compute_returns_each_shape(conn: sqlite3.Connection) -> None:
    from acp_relay.show.command import FrameDetail, Frames, Listing, ShowOptions, Transcript, compute

    listing = compute(conn, ShowOptions())
    assert isinstance(listing, Listing)
    assert [(s.session_id, s.connection_id) for s in listing.sessions][-2:] == [(V2, 2), (V1, 1)]
    frames = compute(conn, ShowOptions(session=V1))
    assert isinstance(frames, Frames) and frames.ending is not None and frames.ending.row[0] == "ended"
    shown = list(frames.rows)
    assert len(shown) == 30 and [s.frame.seq for s in shown] == sorted(s.frame.seq for s in shown)
    detail = compute(conn, ShowOptions(frame=shown[0].frame.id))
    assert isinstance(detail, FrameDetail) and [label for label, _ in detail.related] == ["response"]
    transcript = compute(conn, ShowOptions(session=V1, mode="transcript"))
    assert isinstance(transcript, Transcript) and len(transcript.state.turns) == 2


def test_view_compute_returns_the_page_data(conn: sqlite3.Connection) -> None:
    from acp_relay.view.command import compute, render

    page = compute(conn, V1, check=False)
    assert page.title == f"acp-relay view: session {V1}"
    assert {"frames", "header", "transcript", "version"} <= set(page.data)
    out = io.BytesIO()
    render(page, out)
    html = out.getvalue()
    assert html.lower().startswith(b"<!doctype html>") and b"acp-relay view: session " + V1.encode() in html


def test_otel_compute_exports_and_summarises(conn: sqlite3.Connection, tmp_path: Path) -> None:
    from acp_relay.otel.command import ExportOptions, compute

    target = tmp_path / "trace.jsonl"
    summary = compute(conn, ExportOptions(session=V1, file=str(target)))
    assert (summary.where, summary.selected, summary.sessions, summary.failed, summary.status) == (
        str(target),
        1,
        1,
        0,
        0,
    )
    lines = target.read_bytes().splitlines()
    spans = [
        s for line in lines for r in json.loads(line)["resourceSpans"] for x in r["scopeSpans"] for s in x["spans"]
    ]
    assert summary.spans == len(spans) > 0
