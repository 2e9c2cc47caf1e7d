"""The one way acp-relay says things about itself: the `acp_relay` logger, its formatter and its handler."""

from __future__ import annotations

import io
import logging
import sys
from pathlib import Path

import pytest

from acp_relay import diagnostics


def record(message: str, **extra: object) -> logging.LogRecord:
    rec = logging.LogRecord("acp_relay.x", logging.WARNING, __file__, 1, "%s", (message,), None)
    rec.__dict__.update(extra)
    return rec


def test_prefix_names_the_innermost_command() -> None:
    fmt = diagnostics.Formatter()
    assert fmt.format(record("hello")) == "acp-relay: hello"
    with diagnostics.command("demo"):
        assert fmt.format(record("a")) == "acp-relay: demo: a"
        with diagnostics.command("show"):
            assert fmt.format(record("b")) == "acp-relay: show: b"
        assert fmt.format(record("c")) == "acp-relay: demo: c"
    assert fmt.format(record("d", command="run")) == "acp-relay: run: d"


def test_controls_and_bidi_are_escaped_in_message_and_hint() -> None:
    line = diagnostics.Formatter().format(record("id \x1b[31mred\u202e\x07", hint="try \x9b2J now\n"))
    assert line == "acp-relay: id red\\u202e\\x07\n  hint: try \\x9b2J now\\n"


def test_handler_never_raises_on_a_broken_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken(io.StringIO):
        def write(self, s: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stderr", Broken())
    handler = diagnostics.Handler()
    handler.setFormatter(diagnostics.Formatter())
    handler.emit(record("lost, and nothing raised"))  # the assertion is that this returns


def test_install_is_idempotent_and_writes_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    log = diagnostics.install()
    diagnostics.install()
    assert sum(isinstance(h, diagnostics.Handler) for h in log.handlers) == 1
    with diagnostics.command("stats"):
        logging.getLogger("acp_relay.stats").warning("no such session %s", "abc", extra={"hint": "see `show`"})
    assert out.getvalue() == "acp-relay: stats: no such session abc\n  hint: see `show`\n"


def test_caplog_sees_module_loggers(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="acp_relay"):
        logging.getLogger("acp_relay.run.relay").info("agent exited %d", 3)
    assert [r.getMessage() for r in caplog.records] == ["agent exited 3"]


def test_a_library_call_logs_to_its_module_logger(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    """The shells' functions take no callback: what they say is a record of their module's logger."""
    from acp_relay.record.recover import run_recover

    out: list[str] = []
    with caplog.at_level(logging.INFO, logger="acp_relay"):
        assert run_recover(tmp_path / "none.db", out.append) == 2
    assert out == []
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        ("acp_relay.record.recover", "WARNING", f"no database at {tmp_path / 'none.db'}")
    ]
