"""The query API behind `acp-relay show`: listing, views, filters, tail/limit, follow, raw bytes, errors."""

from __future__ import annotations

import io
import json
import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures.recordings import CRASH, V1, V2, stream
from helpers import wait_for
from support.cli import run as cli_run

from acp_relay.render.frames import RawWriter, Style, clean, frame_line, session_table
from acp_relay.store import db as dbmod
from acp_relay.store import queries as show
from acp_relay.store.scripted import ConnectionWriter


@pytest.fixture
def conn(fixture_db: Path) -> Iterator[sqlite3.Connection]:
    c = show.open_db(fixture_db)
    yield c
    c.close()


def ids(rows) -> list[int]:
    return [r.id for r in rows]


def frames(conn: sqlite3.Connection, session: str | None = None, connection: str | None = None, **kw) -> list[int]:
    flt = show.Filters.build(**{k: v for k, v in kw.items() if k not in ("limit", "tail")})
    view = show.resolve_view(conn, session, connection)
    return ids(show.iter_frames(conn, view, flt, limit=kw.get("limit"), tail=kw.get("tail")))


# -- listing ----------------------------------------------------------------------------------------------
def test_listing_is_newest_first_and_includes_connections_without_sessions(conn: sqlite3.Connection) -> None:
    rows = list(show.list_sessions(conn))
    assert [(r.session_id, r.connection_id) for r in rows] == [
        (None, 3),
        ("sess-v2-child", 2),
        ("sess-v2-beta", 2),
        ("sess-v1-alpha", 1),
    ]
    v1 = rows[-1]
    assert (v1.agent, v1.client, v1.protocol_version, v1.turns, v1.ended) == (
        "fixture-agent 1.2.3",
        "zed 0.200.0",
        1,
        2,
        "exit 0",
    )
    assert (v1.invalid, v1.errors, v1.unanswered) == (2, 1, 1)
    assert v1.frames == len(frames(conn, "sess-v1-alpha"))  # the listing counts what `show SESSION` prints
    crash = rows[0]
    assert (crash.agent, crash.ended, crash.frames, crash.unanswered) == ("python", "exit 1", 2, 1)
    assert [r.session_id for r in show.list_sessions(conn, limit=2)] == [None, "sess-v2-child"]


def test_session_table_is_plain_and_aligned(conn: sqlite3.Connection) -> None:
    lines = session_table(list(show.list_sessions(conn)))
    assert lines[0].split()[:3] == ["STARTED", "SESSION", "CONN"]
    assert all("\x1b" not in line for line in lines)
    assert len({line.index("CONN") if i == 0 else None for i, line in enumerate(lines)} - {None}) == 1


# -- resolving SESSION ------------------------------------------------------------------------------------
def test_session_by_id_prefix_last_and_connection(conn: sqlite3.Connection) -> None:
    assert show.resolve_view(conn, "sess-v1-alpha").connection_id == 1
    assert show.resolve_view(conn, "sess-v1").session_id == "sess-v1-alpha"
    assert show.resolve_view(conn, "last").session_id == "sess-v2-beta"  # not its subagent child, newer
    assert show.resolve_view(conn, "sess-v2-child").session_id == "sess-v2-child"  # by id it still is
    assert show.resolve_view(conn, "last", "1").session_id == "sess-v1-alpha"
    v = show.resolve_view(conn, None, "last")
    assert (v.connection_id, v.session_id) == (3, None)


@pytest.mark.parametrize(
    "session, connection, message",
    [
        ("sess-v2", None, "matches several sessions"),
        ("nope", None, "no session matches"),
        ("sess-v1-alpha", "2", "no session matches"),
        (None, "9", "no connection 9"),
        (None, "x", "takes a connection number"),
    ],
)
def test_bad_session_is_a_clear_error(conn: sqlite3.Connection, session, connection, message) -> None:
    with pytest.raises(show.ShowError, match=message):
        show.resolve_view(conn, session, connection)


def test_session_in_two_connections_is_an_error_naming_them(tmp_path: Path) -> None:
    path = tmp_path / "two.db"
    c = dbmod.connect(path)
    for start in (0.0, 100.0):
        w = ConnectionWriter(c, started_at=1e9 + start, argv=["a"])
        w.feed("c2a", b'{"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"s1","cwd":"/"}}\n', 0.1)
        w.feed("a2c", b'{"jsonrpc":"2.0","id":1,"result":{}}\n', 0.2)
        w.close(ended_mono=1)
    c.close()
    ro = show.open_db(path)
    with pytest.raises(show.UserError, match="s1 is in connections 1, 2: say s1@N"):
        show.resolve_view(ro, "s1")
    assert show.resolve_view(ro, "s1", "1").connection_id == 1
    assert show.resolve_view(ro, "s1@2").connection_id == 2


# -- a session's frames -----------------------------------------------------------------------------------
def test_session_view_leads_with_initialize_and_leaves_out_other_connections_frames(conn) -> None:
    got = frames(conn, "sess-v1-alpha")
    assert got[:2] == [1, 2]  # the connection's initialize exchange
    assert 3 not in got and 32 not in got  # invalid lines of the connection belong to no session
    assert got == sorted(got) and len(got) == 30
    assert all(33 <= i <= 64 for i in frames(conn, "sess-v2-beta"))
    assert frames(conn, "sess-v2-beta")[:2] == [33, 34]


def test_creating_request_without_a_session_id_is_still_shown(fixture_db: Path, tmp_path: Path) -> None:
    """Recordings made before the recorder back-filled session/new requests keep them session-less."""
    old = tmp_path / "old.db"
    src = sqlite3.connect(fixture_db)
    src.backup(dst := sqlite3.connect(old))
    src.close()
    dst.execute("UPDATE frames SET session_id = NULL WHERE id IN (4, 35)")
    dst.commit()
    dst.close()
    c = show.open_db(old)
    assert frames(c, "sess-v1-alpha")[:4] == [1, 2, 4, 5]
    assert (
        show.resolve_view(c, "sess-v1-alpha").base == show.resolve_view(show.open_db(fixture_db), "sess-v1-alpha").base
    )


def test_batches_are_in_the_sessions_of_their_members(conn: sqlite3.Connection) -> None:
    assert {58, 59} <= set(frames(conn, "sess-v2-beta"))
    assert frames(conn, "sess-v2-beta", kinds=["batch"]) == [58, 59]
    # a member matches a method filter even though the batch frame itself has no method
    assert frames(conn, "sess-v2-beta", methods=["session/list"]) == [58, 59]


def test_connection_view_is_every_frame_in_order(conn: sqlite3.Connection) -> None:
    got = frames(conn, None, "1")
    assert got == list(range(1, 33))


@pytest.mark.parametrize(
    "kw, expected",
    [
        ({"methods": ["session/prompt"]}, [7, 21, 24, 30]),  # responses carry their request's method
        ({"methods": ["fs/*", "terminal/*"]}, [15, 16, 26, 27]),
        ({"kinds": ["error"]}, [23]),
        ({"kinds": ["result"]}, [2, 5, 14, 16, 21, 27, 30]),  # alias
        ({"updates": ["agent_*"]}, [8, 10, 11, 19, 25]),
        ({"direction": "c2a", "kinds": ["notification"]}, [29]),
        ({"grep": r"line 2 \xe2\x80\x94"}, [19]),  # bytes of an em dash, as recorded
        ({"grep": "(?i)PARSER\\.PY"}, [7, 9, 12, 13, 15]),
        ({"since": "2.7", "until": "3.05"}, [18, 19, 20, 21]),  # seconds since the connection started
        ({"since": "2026-01-01T00:00:05.5+00:00", "errors": True}, [31]),
        ({"errors": True}, [23, 28, 31]),  # error, unanswered request, CRLF line
        ({"methods": ["session/prompt"], "tail": 2}, [24, 30]),
        ({"methods": ["session/prompt"], "limit": 1}, [7]),
        ({"tail": 3}, [29, 30, 31]),
        ({"limit": 3}, [1, 2, 4]),
    ],
)
def test_filters(conn: sqlite3.Connection, kw, expected) -> None:
    assert frames(conn, "sess-v1-alpha", **kw) == expected


def test_errors_on_a_connection_include_invalid_and_unterminated_lines(conn) -> None:
    assert frames(conn, None, "1", errors=True) == [3, 23, 28, 31, 32]
    assert frames(conn, None, "2", errors=True) == [59, 63, 64]


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"kinds": ["bogus"]}, "--kind must be"),
        ({"direction": "up"}, "--direction must be"),
        ({"grep": "("}, "bad regular expression"),
        ({"since": "yesterday-ish"}, "cannot read the time"),
    ],
)
def test_bad_filter_values(kw, message) -> None:
    with pytest.raises(show.ShowError, match=message):
        show.Filters.build(**kw)


def test_limit_and_tail_do_not_combine(conn: sqlite3.Connection) -> None:
    with pytest.raises(show.ShowError):
        frames(conn, "sess-v1-alpha", limit=1, tail=1)


def test_times_are_seconds_since_the_connection_started(conn: sqlite3.Connection) -> None:
    view = show.resolve_view(conn, "sess-v1-alpha")
    first = next(show.iter_frames(conn, view))
    line = frame_line(first, view.base)
    assert line.split()[:5] == ["1", "0.001", "-->", "request", "initialize"]  # not -0.199: one base


@pytest.mark.parametrize("session", ["sess-v1-alpha", "sess-v2-beta", "sess-v2-child"])
def test_a_frame_shows_one_time_in_every_view(fixture_db: Path, session: str) -> None:
    """`show --frame N` said +4.010s where `show SESSION` said 3.810 for the same frame: every view (the
    session, its connection, --frame, --json's t) prints the same seconds for it."""
    run_cli = cli_run

    def times(*args: str) -> dict[int, str]:
        out = run_cli("show", "--db", str(fixture_db), *args).stdout.splitlines()
        return {int(line.split()[0]): line.split()[1] for line in out if line[:7].strip().isdigit()}

    in_session = times(session)
    cid = json.loads(run_cli("show", "--db", str(fixture_db), session, "--json", "-n", "1").stdout)["connection"]
    in_connection = times("-c", str(cid))
    as_json = [json.loads(x) for x in run_cli("show", "--db", str(fixture_db), session, "--json").stdout.splitlines()]
    assert in_session and all(in_connection[n] == t for n, t in in_session.items())
    assert {r["frame"]: f"{r['t']:.3f}" for r in as_json} == in_session
    for n, t in list(in_session.items())[:3]:
        heading = run_cli("show", "--db", str(fixture_db), "--frame", str(n)).stdout.splitlines()[0]
        assert f"  t {t}s  " in heading, (heading, t)


# -- raw bytes --------------------------------------------------------------------------------------------
def raw_of(conn, session=None, connection=None, direction=None) -> bytes:
    out = io.BytesIO()
    w = RawWriter(out)
    view = show.resolve_view(conn, session, connection)
    for f in show.iter_frames(conn, view, show.Filters.build(direction=direction)):
        w.write(f)
    return out.getvalue()


@pytest.mark.parametrize("cid, script", [("1", V1), ("2", V2), ("3", CRASH)])
@pytest.mark.parametrize("direction", ["c2a", "a2c"])
def test_raw_one_direction_reproduces_the_stream(conn, cid, script, direction) -> None:
    assert raw_of(conn, None, cid, direction) == stream(script, direction)


def test_raw_keeps_an_unterminated_frame_on_its_own_line(conn: sqlite3.Connection) -> None:
    both = raw_of(conn, None, "1")
    assert both.endswith(b"\ngoodbye")  # last frame, recorded without \n
    assert b"\r\n" in both  # the CRLF line keeps its CR


# -- JSON -------------------------------------------------------------------------------------------------
def test_json_lines_carry_index_fields_and_the_message(fixture_db: Path) -> None:
    out = cli_run("show", "-c", "2", "--json", "--db", str(fixture_db)).stdout_bytes
    records = [json.loads(line) for line in out.splitlines()]
    by_frame = {r["frame"]: r for r in records}
    assert by_frame[59]["members"][1]["error_code"] == -32601
    assert by_frame[63]["message"] is None and by_frame[63]["raw_base64"]
    assert by_frame[38]["method"] == "session/prompt" and by_frame[38]["message"]["result"] == {}
    assert by_frame[47]["terminal_id"] == "term_9"


# -- one frame --------------------------------------------------------------------------------------------
def test_related_frames(conn: sqlite3.Connection) -> None:
    assert [(label, f.id) for label, f in show.related_frames(conn, show.get_frame(conn, 22))] == [("response", 23)]
    assert [(label, f.id) for label, f in show.related_frames(conn, show.get_frame(conn, 23))] == [("request", 22)]
    assert [(label, f.id) for label, f in show.related_frames(conn, show.get_frame(conn, 58))] == [("response", 59)]
    assert [(label, f.id) for label, f in show.related_frames(conn, show.get_frame(conn, 28))] == []
    with pytest.raises(show.ShowError, match="no frame 999"):
        show.get_frame(conn, 999)


def test_messages_pair_answers_with_their_requests(conn: sqlite3.Connection) -> None:
    view = show.resolve_view(conn, "sess-v2-beta")
    pairs = {(f.id, (m or {}).get("id")): req for f, m, req in show.iter_messages(conn, view) if isinstance(m, dict)}
    assert pairs[(59, 4)]["method"] == "session/set_config_option"
    assert pairs[(59, 3)]["method"] == "session/list"
    assert pairs[(38, 2)]["method"] == "session/prompt"


# -- follow -----------------------------------------------------------------------------------------------
def _line(i: int) -> bytes:
    return (
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"live","update":'
        b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%d"}}}}\n' % i
    )


def test_follow_prints_new_frames_and_stops_when_the_connection_ends(tmp_path: Path) -> None:
    path = tmp_path / "live.db"
    writer_conn = dbmod.connect(path)
    w = ConnectionWriter(writer_conn, started_at=1e9, argv=["agent"], relay_pid=os.getpid())
    w.feed("c2a", b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/"}}\n', 0.0)
    w.feed("a2c", b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"live"}}\n', 0.1)
    w.flush()
    writer_conn.executemany(
        "INSERT INTO sessions (session_id, connection_id, origin, first_seen, last_seen) VALUES (?, ?, ?, ?, ?)",
        [("live", w.id, "session/new", 1e9, 1e9)],
    )
    seen: list[int] = []
    done = threading.Event()

    def reader() -> None:
        ro = show.open_db(path)  # its own read-only connection, as another terminal would have
        for f in show.follow(ro, show.resolve_view(ro, "last"), interval=0.02):
            seen.append(f.seq)
        done.set()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    wait_for(lambda: len(seen) >= 2, "the frames already there")
    assert seen == [1, 2] and not done.is_set()
    for i in range(5):
        w.feed("a2c", _line(i), 0.2 + i)
        w.flush()
        time.sleep(0.03)  # a commit per poll or so: follow must pick up each one
    wait_for(lambda: len(seen) >= 7, "the new frames")
    assert seen == [1, 2, 3, 4, 5, 6, 7] and not done.is_set()
    w.feed("a2c", _line(9), 9.0)
    w.close(ended_mono=10.0)  # writes the last frame, then status 'ended'
    assert done.wait(5), "follow did not stop after the connection ended"
    assert seen == [1, 2, 3, 4, 5, 6, 7, 8]


def test_follow_ends_for_a_relay_that_died_without_closing(tmp_path: Path) -> None:
    path = tmp_path / "dead.db"
    c = dbmod.connect(path)
    w = ConnectionWriter(c, started_at=1e9, argv=["agent"], relay_pid=2**22 + 12345)  # no such process
    w.feed("c2a", b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}\n', 0.0)
    w.flush()
    ro = show.open_db(path)
    got = list(show.follow(ro, show.resolve_view(ro, None, "last"), interval=0.01))
    assert [f.seq for f in got] == [1]


# -- the command line -------------------------------------------------------------------------------------
def test_missing_database_is_a_clear_error(tmp_path: Path) -> None:
    result = cli_run("show", "--db", str(tmp_path / "none.db"))
    assert result.exit_code == 2
    assert "no database at" in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "none.db").exists()  # read-only: never creates one
    assert cli_run("stats", "--db", str(tmp_path / "none.db")).exit_code == 2


def test_empty_database_lists_nothing(tmp_path: Path) -> None:
    dbmod.connect(tmp_path / "empty.db").close()
    result = cli_run("show", "--db", str(tmp_path / "empty.db"))
    assert result.exit_code == 0 and "no recordings" in result.stderr
    result = cli_run("show", "last", "--db", str(tmp_path / "empty.db"))
    assert result.exit_code == 2 and "no sessions recorded yet" in result.stderr


def test_not_a_database(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.db"
    bogus.write_text("hello")
    result = cli_run("show", "--db", str(bogus))
    assert result.exit_code == 5 and "not an acp-relay database" in result.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["show", "nope"], "no session matches"),
        (["show", "sess-v1-alpha", "--kind", "x"], "--kind must be"),
        (["show", "--method", "x"], "give SESSION"),
        (["show", "last", "--transcript", "--tail", "3"], "--transcript shows a whole session"),
        (["show", "--frame", "12345"], "no frame 12345"),
        (["stats", "nope"], "no session matches"),
    ],
)
def test_command_errors_exit_2(fixture_db: Path, args, message) -> None:
    result = cli_run(*args, "--db", str(fixture_db))
    assert result.exit_code == 2, result.output
    assert message in result.stderr


def test_color_only_when_asked_or_on_a_terminal(fixture_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = cli_run("show", "sess-v1-alpha", "--db", str(fixture_db)).stdout_bytes
    assert b"\x1b[" not in plain
    colored = cli_run("show", "sess-v1-alpha", "--color", "always", "--db", str(fixture_db))
    assert b"\x1b[" in colored.stdout_bytes
    monkeypatch.setenv("NO_COLOR", "1")

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert Style.detect(Tty()).color is False
    monkeypatch.delenv("NO_COLOR")
    assert Style.detect(Tty()).color is True and Style.detect(io.StringIO()) == Style(False, None)


def test_terminal_width_cuts_lines(conn: sqlite3.Connection) -> None:
    view = show.resolve_view(conn, "sess-v1-alpha")
    for f in show.iter_frames(conn, view):
        lines = frame_line(f, view.base, Style(False, 60)).split("\n")  # a narrow row may stack
        assert all(len(line) <= 60 for line in lines) and not any(line.endswith("~") for line in lines), lines


def test_recorded_control_characters_cannot_reach_the_terminal() -> None:
    assert clean("a\x1b[31mred\x1b[0m\x07\nb") == "ared\\x07\\nb"


def test_show_does_not_write_to_the_database(fixture_db: Path) -> None:
    before = fixture_db.stat().st_mtime_ns
    cli_run("show", "--db", str(fixture_db))
    cli_run("stats", "--db", str(fixture_db))
    assert fixture_db.stat().st_mtime_ns == before


def test_requests_in_flight_on_a_live_connection_are_no_anomaly(tmp_path: Path) -> None:
    """A running relay's session listed `2 unanswered` (in red, as anomalies) for requests still under way."""
    path = tmp_path / "live.db"
    c = dbmod.connect(path)
    w = ConnectionWriter(c, started_at=1e9, argv=["agent"])
    w.feed("c2a", b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}\n', 0.1)
    w.feed("a2c", b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}\n', 0.2)
    for rid in (2, 3):
        prompt = b'{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}\n' % rid
        w.feed("c2a", prompt, 0.3)
    w.close(ended_mono=1, status="running")
    c.close()
    (row,) = [json.loads(x) for x in cli_run("show", "--db", str(path), "--json").stdout.splitlines()]
    assert (row["in_flight"], row["unanswered"], row["anomalies"]) == (2, 0, 0)
    table = cli_run("show", "--db", str(path)).stdout
    assert "2 in flight" in table and "unanswered" not in table


def test_a_frame_asked_for_with_a_connection_or_session_must_be_in_it(fixture_db: Path) -> None:
    """`show -c N --frame M` (or SESSION --frame M) shows M only when that view lists it; a frame of another
    connection or session is a clear error, exit 2, in every mode (issue 30 item 18)."""
    from acp_relay.show.command import ShowOptions, compute

    db = str(fixture_db)
    with show.open_db(fixture_db) as c:
        one, two = frames(c, None, "1"), frames(c, None, "2")
        beta, alpha = frames(c, "sess-v2-beta"), frames(c, "sess-v1-alpha")
    assert 22 in one and 22 not in two
    for args in (["-c", "2"], ["sess-v2-beta"], ["sess-v2-beta@2"], ["-c", "last"]):
        for mode in ([], ["--json"], ["--raw"]):
            r = cli_run("show", "--db", db, *args, "--frame", "22", *mode)
            assert (r.exit_code, r.stdout) == (2, ""), (args, mode, r.stdout)
            assert "frame 22 is in connection 1, not in " in r.stderr and "Traceback" not in r.stderr
    outside = next(i for i in one if i not in alpha)  # of the connection, not of its session (a stray line)
    r = cli_run("show", "--db", db, "sess-v1-alpha", "--frame", str(outside))
    assert r.exit_code == 2 and f"frame {outside} is not in session sess-v1-alpha" in r.stderr
    for args, frame in (
        (["-c", "1"], 22),
        (["sess-v1-alpha"], 22),
        (["sess-v2-beta"], beta[0]),
        (["-c", "2"], two[-1]),
    ):
        r = cli_run("show", "--db", db, *args, "--frame", str(frame))
        assert r.exit_code == 0 and r.stdout, (args, frame, r.stderr)
    with show.open_db(fixture_db) as c, pytest.raises(show.UserError, match="frame 22 is in connection 1"):
        compute(c, ShowOptions(connection="2", frame=22))


@pytest.mark.parametrize("width", [60, 80, 100, 120, 200])
def test_a_frame_row_keeps_its_numbers_whole_at_every_width(conn: sqlite3.Connection, width: int) -> None:
    """Planted beyond the issue's repro: answers with a long method, a frame id of 7 digits, a string id, a
    latency of minutes and a redaction flag. Each row stays within the width, and the id, the latency, the
    method and the flag's count are printed whole (a narrow row stacks instead of cutting them)."""
    view = show.resolve_view(conn, "sess-v1-alpha")
    answer = next(f for f in show.iter_frames(conn, view) if f.kind == "response" and f.latency_ms)
    method = "_vendor.example/a_rather_long_extension_method"
    planted = [
        answer._replace(id=1234567, method=method, rpc_id="req-7", latency_ms=754321.0, redacted=12),
        answer._replace(method=method, rpc_id=4096, latency_ms=0.5),
        answer._replace(kind="error", rpc_id=31, latency_ms=61234.0, parse="duplicate_id"),
    ]
    for f in planted:
        lines = frame_line(f, view.base, Style(False, width)).split("\n")
        assert all(len(line) <= width and not line.endswith("~") for line in lines), lines
        text = " ".join(lines)
        piped = frame_line(f, view.base)
        for whole in re.findall(r"#\S+|\b[\d.]+m?s\b|\[[^\]]+\]|_vendor\S+", piped[39:]):
            assert whole in text, (whole, lines)
