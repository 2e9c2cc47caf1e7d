"""What a view page embeds: one session's (or connection's) frames, header and transcript as compact JSON.

The page parses the raw bytes itself, lazily, so each frame's bytes are embedded once (as a JSON string, or
base64 when they are not UTF-8) and the index columns ride alongside in columns: delta-coded numbers,
one-character codes, and repeated strings (methods, row labels) interned in one table. That keeps the file
near the size of the recorded bytes, and a 100,000-frame session is written in a couple of seconds.
"""

from __future__ import annotations

import base64
import importlib
import importlib.util
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..protocol import vocab
from ..protocol.jsonrpc import loads, loads_or_none
from ..protocol.words import counted
from ..render.frames import fmt_id, frame_flags, frame_what, redaction_note
from ..render.transcript import transcript_parts
from ..store.pages import connection_row, session_row
from ..store.queries import FrameRow, View, ended_text, unanswered_entries
from ..store.rows import read_raw

VIEW_FRAME_MAX = 1 << 20  # bytes of one frame a page embeds at most (docs/view.md); the rest is left out, said so

KIND_CODES = {"request": "q", "notification": "n", "response": "r", "error": "e", "batch": "b", "invalid": "i"}
DIR_CODES = {"c2a": "c", "a2c": "a"}
# Streamed text: consecutive chunks of one entity collapse into one row of the page.
COLLAPSES: dict[str, bool] = vocab.variant_table(
    "view.data: consecutive frames of one entity collapse",
    {
        **dict.fromkeys(vocab.MESSAGE_CHUNKS, True),
        vocab.TERMINAL_OUTPUT_CHUNK: True,
        vocab.TOOL_CALL_CONTENT_CHUNK: True,
        vocab.COMPACTION_SUMMARY_CHUNK: True,
        vocab.SESSION_MESSAGE_CHUNK: False,
        **dict.fromkeys(vocab.MESSAGE_UPSERTS, False),
        vocab.TOOL_CALL: False,
        vocab.TOOL_CALL_UPDATE: False,
        vocab.PLAN: False,
        vocab.PLAN_UPDATE: False,
        vocab.PLAN_REMOVED: False,
        vocab.TERMINAL_UPDATE: False,
        vocab.STATE_UPDATE: False,
        vocab.CURRENT_MODE_UPDATE: False,
        vocab.CONFIG_OPTION_UPDATE: False,
        vocab.AVAILABLE_COMMANDS_UPDATE: False,
        vocab.SESSION_INFO_UPDATE: False,
        vocab.USAGE_UPDATE: False,
        vocab.QUOTA_UPDATE: False,
        vocab.NOTICE: False,
        vocab.COMPACTION_UPDATE: False,
        vocab.SUBAGENT_UPDATE: False,
        vocab.SESSION_MESSAGE: False,
    },
)
CHUNK_KINDS = frozenset(v for v, collapses in COLLAPSES.items() if collapses)
TICK = 10_000  # times are embedded in 0.1 ms steps
# `check`, when installed: its verdict (the very one `check` prints: message and transport rules) and its
# summary line, looked up at run time (an optional hook)
CHECK_MODULES = ("acp_relay.protocol.check.verdict", "acp_relay.render.findings")
CheckFrame = tuple[int, str, bytes, bool, str | None, float]  # what the check engine reads of a frame
# As collected while the page is built: a frame over VIEW_FRAME_MAX bytes has None for its bytes, read back
# whole when the check reaches it (the page keeps only its head; the check must see what `check` sees).
Collected = tuple[int, str, bytes | None, bool, str | None, float]
CHECK_AUTO_FRAMES = 20_000  # above this, check runs only when asked: it would double a big page's write time


@dataclass
class _Strings:
    """Interned strings: each distinct value once, rows refer to it by index."""

    values: list[str] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)

    def __call__(self, value: str | None) -> int:
        if value is None:
            return -1
        i = self.index.get(value)
        if i is None:
            i = self.index[value] = len(self.values)
            self.values.append(value)
        return i


@dataclass
class _Columns:
    """The frame columns as they are gathered (see `frames_data` for what each holds)."""

    ids: list[int] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    times: list[int] = field(default_factory=list)
    methods: list[int] = field(default_factory=list)
    whats: list[int] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)
    raw64: dict[int, str] = field(default_factory=dict)
    rpc_ids: dict[int, str] = field(default_factory=dict)
    latency: dict[int, float] = field(default_factory=dict)
    partner: dict[int, int] = field(default_factory=dict)
    flags: dict[int, list[str]] = field(default_factory=dict)
    redacted: dict[int, str] = field(default_factory=dict)
    cut: dict[int, str] = field(default_factory=dict)
    runs: list[list[int]] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)


def _deltas(values: list[int]) -> list[int]:
    out, last = [], 0
    for v in values:
        out.append(v - last)
        last = v
    return out


def _findings(f: FrameRow) -> list[str]:
    """What is wrong with a frame on its own: parse problems, a cut line, an error answer, an unmatched one."""
    if (
        f.parse == "ok"
        and not f.unterminated
        and (f.kind in ("request", "notification", "batch") or f.request_seq is not None)
        and f.kind != "error"
    ):
        return []
    out = [x.strip("[]") for x in frame_flags(f).split()]
    if f.kind == "invalid":
        out.append(f"not a JSON-RPC message ({f.parse})")
    if f.kind == "error":
        out.append(f"error response (code {f.error_code})")
    if f.kind in ("response", "error") and f.request_seq is None:
        out.append("answers no request seen in this connection")
    return out


class _Gather:
    """One pass over the view's frames, building the columns, runs, pairs and turn starts."""

    def __init__(self, base: float, strings: _Strings, to_check: list[Collected] | None) -> None:
        self.c = _Columns()
        self.to_check = to_check
        self.base = base
        self.s = strings
        self.row_of_seq: dict[int, int] = {}
        self.run_key: tuple[Any, ...] | None = None
        self.run_start = 0
        self.whats: dict[tuple[Any, ...], str] = {}

    def add(self, f: FrameRow) -> None:
        """One frame into every column (the per-frame hot path: fields read once, appends bound)."""
        c, row = self.c, len(self.c.ids)
        seq, kind, method, raw = f.seq, f.kind, f.method, f.raw
        self.row_of_seq[seq] = row
        c.ids.append(f.id)
        c.seqs.append(seq)
        c.dirs.append(DIR_CODES.get(f.direction, "?"))
        c.kinds.append(KIND_CODES.get(kind, "i"))
        c.times.append(round((f.mono - self.base) * TICK))
        c.methods.append(self.s(method))
        c.whats.append(self.s(self._what(f)))
        whole: bytes | None = raw
        if len(raw) > VIEW_FRAME_MAX:  # the page holds the first VIEW_FRAME_MAX bytes and says so
            whole = None
            c.cut[row] = (
                f"the page holds the first {VIEW_FRAME_MAX} of this frame's {counted(len(raw), 'byte')}; "
                f"the whole frame: acp-relay show --frame {f.id} --raw"
            )
            raw = raw[:VIEW_FRAME_MAX]
        try:
            c.raw.append(raw.decode("utf-8"))
        except UnicodeDecodeError:  # kept exactly as base64, shown with U+FFFD in place of the bad bytes
            c.raw.append(raw.decode("utf-8", "replace"))
            c.raw64[row] = base64.b64encode(raw).decode("ascii")
        if kind == "notification":
            if f.parse != "ok" or f.unterminated:
                c.flags[row] = _findings(f)
        else:
            if f.rpc_id is not None:
                c.rpc_ids[row] = fmt_id(f.rpc_id)
            if f.latency_ms is not None:
                c.latency[row] = f.latency_ms
            found = _findings(f)
            if found:
                c.flags[row] = found
            if f.request_seq is not None and (kind == "response" or kind == "error"):
                req = self.row_of_seq.get(f.request_seq)
                if req is not None:
                    c.partner[row] = req
                    c.partner.setdefault(req, row)
            elif kind == "request" and method == vocab.PROMPT:
                c.turns.append(row)
        if f.redacted:
            c.redacted[row] = redaction_note(f)
        if self.to_check is not None:
            self.to_check.append((f.id, f.direction, whole, bool(f.unterminated), f.session_id, f.mono))
        self._run(f, row)

    def _what(self, f: FrameRow) -> str:
        """frame_what, remembered for the notifications that repeat (a stream of chunks has one label)."""
        if f.kind != "notification":
            return frame_what(f, f.message() if f.kind == "batch" else None)
        key: tuple[Any, ...] = (f.method, f.update_kind, f.message_id, f.tool_call_id, f.terminal_id, f.plan_id)
        key += (f.compaction_id, f.child_session_id)  # all that frame_what reads of a notification
        what = self.whats.get(key)
        if what is None:
            what = self.whats[key] = frame_what(f, None)
        return what

    def _run(self, f: FrameRow, row: int) -> None:
        key = None
        if f.update_kind in CHUNK_KINDS:
            key = (f.direction, f.session_id, f.update_kind, f.message_id, f.terminal_id, f.tool_call_id)
        if key != self.run_key or key is None:
            self.close_run(row)
            self.run_key, self.run_start = key, row

    def close_run(self, end: int) -> None:
        if self.run_key is not None and end - self.run_start >= 2:
            self.c.runs.append([self.run_start, end - self.run_start])
        self.run_key = None


def frames_data(
    conn: sqlite3.Connection, view: View, strings: _Strings, to_check: list[Collected] | None = None
) -> tuple[dict[str, Any], list[list[Any]], dict[int, int]]:
    """The columns the page reads, the transcript in sections (each with the row of its first frame), and
    the row of each frame id. `to_check`, when given, collects what the check engine reads of each frame."""
    g = _Gather(view.base, strings, to_check)
    transcript = transcript_parts(conn, view, g.add)
    g.close_run(len(g.c.ids))
    c = g.c
    return (
        {
            "n": len(c.ids),
            "id": _deltas(c.ids),  # frame ids (what `show --frame N` takes), delta-coded
            "seq": _deltas(c.seqs),
            "dir": "".join(c.dirs),  # c: editor to agent, a: agent to editor
            "kind": "".join(c.kinds),  # KIND_CODES
            "t": _deltas(c.times),  # TICK steps since the view's time 0, delta-coded
            "m": c.methods,  # index into strings: the method (a response's is its request's)
            "w": c.whats,  # index into strings: the row label (as `show` prints it)
            "raw": c.raw,
            "raw64": c.raw64,  # row -> base64 of the exact bytes, for frames that are not UTF-8
            "rid": c.rpc_ids,
            "lat": c.latency,
            "partner": c.partner,  # request row <-> response row
            "flags": c.flags,
            "red": c.redacted,
            "cut": c.cut,  # row -> what of a frame over VIEW_FRAME_MAX bytes the page left out  # row -> how the stored copy differs from the wire's (redacted frames)
            "runs": c.runs,  # [first row, count] of collapsed chunk runs
            "turns": c.turns,  # rows of the session/prompt requests
        },
        [[-1 if seq is None else g.row_of_seq.get(seq, -1), "\n".join(lines)] for seq, lines in transcript],
        {fid: row for row, fid in enumerate(c.ids)},
    )


def _info(text: str | None) -> dict[str, Any]:
    value = loads_or_none(text)
    return value if isinstance(value, dict) else {}


def _capabilities(value: Any, prefix: str = "") -> list[str]:
    """Dotted names of the capabilities switched on (true, or an object/list that is present)."""
    out: list[str] = []
    if not isinstance(value, dict):
        return out
    for key, v in value.items():
        if key == "_meta":
            continue
        name = f"{prefix}{key}"
        if isinstance(v, dict) and v:
            out += _capabilities(v, name + ".")
        elif v is True or isinstance(v, dict) or (isinstance(v, list) and v):  # v2: a present {} is "on"
            out.append(name)
    return out


def _initialize(frames: dict[str, Any], strings: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(client capabilities, agent capabilities, auth method ids) from the view's initialize exchange."""
    client: list[str] = []
    agent: list[str] = []
    auth: list[str] = []
    for row, m in enumerate(frames["m"]):
        if m < 0 or strings[m] != vocab.INITIALIZE:
            continue
        try:
            msg = loads(frames["raw"][row].encode("utf-8"))
        except (ValueError, RecursionError):
            continue
        if not isinstance(msg, dict):
            continue
        params, result = msg.get("params"), msg.get("result")
        if isinstance(params, dict):
            client = _capabilities(params.get("clientCapabilities") or params.get("capabilities"))
        if isinstance(result, dict):
            agent = _capabilities(result.get("agentCapabilities") or result.get("capabilities"))
            methods = result.get("authMethods")
            auth = [str(a.get("id")) for a in methods if isinstance(a, dict)] if isinstance(methods, list) else []
        if row > 8:
            break
    return client, agent, auth


def header_data(conn: sqlite3.Connection, view: View, frames: dict[str, Any], strings: list[str]) -> dict[str, Any]:
    """The page header: who talked, which protocol, what they can do, how it ended, the counts."""
    c = connection_row(conn, view.connection_id)
    s = session_row(conn, view)
    client_caps, agent_caps, auth = _initialize(frames, strings)
    argv = loads_or_none(c.get("argv")) or []
    pending = [p for p in unanswered_entries(c.get("unanswered")) if view.session_id in (None, p.get("session_id"))]
    return {
        "title": view.name,
        "session": view.session_id,
        "connection": view.connection_id,
        "label": c.get("label"),
        "session_title": s.get("title"),
        "origin": s.get("origin"),
        "cwd": s.get("cwd") or c.get("cwd"),
        "started": c.get("started_at"),
        "duration": None if c.get("ended_at") is None else c["ended_at"] - c["started_at"],
        "agent": _info(c.get("agent_info")),
        "client": _info(c.get("client_info")),
        "argv": [str(a) for a in argv] if isinstance(argv, list) else [],
        "protocol": view.protocol_version,
        "client_caps": client_caps,
        "agent_caps": agent_caps,
        "auth": auth,
        "ended": ended_text(c.get("status"), c.get("exit_code"), c.get("exit_signal")),
        "closed_by": c.get("closed_by"),
        "error": c.get("error"),
        "frames": frames["n"],
        "turns": len(frames["turns"]),
        "unanswered": len(pending),
        "bytes": {"c2a": c.get("bytes_c2a"), "a2c": c.get("bytes_a2c"), "stderr": c.get("bytes_stderr")},
        "stderr_tail": c.get("stderr_tail"),
    }


def check_installed() -> bool:
    """`check` is part of this installation (whether or not its engine imports cleanly)."""
    try:
        return importlib.util.find_spec(CHECK_MODULES[0].rpartition(".")[0]) is not None
    except ImportError:
        return False


def check_data(conn: sqlite3.Connection, view: View, frames: Iterable[CheckFrame]) -> dict[str, Any]:
    """`check`'s verdict on the view: its summary line, findings by frame id, connection-wide findings."""
    try:
        judge, render = (importlib.import_module(name) for name in CHECK_MODULES)
        from ..store.check_queries import check_inputs  # what `check` reads besides the frames, read as it does

        found, checked = judge.verdict(frames, **check_inputs(conn, view))
        summary = render.summary_line(found, checked)
    except Exception as exc:  # a broken or buggy engine must not cost the user the page
        return {"summary": f"could not run: {type(exc).__name__}: {exc}", "errors": 0, "findings": {}, "connection": []}
    by_frame: dict[int, list[str]] = {}
    wide: list[str] = []
    for f in found:
        text = f"{f.severity} {f.rule}: {f.message}"
        if f.frame is None:
            wide.append(text)
        else:
            by_frame.setdefault(f.frame, []).append(text)
    errors = sum(1 for f in found if f.severity == "error")
    return {"summary": summary, "errors": errors, "findings": by_frame, "connection": wide}


def page_data(conn: sqlite3.Connection, view: View, check: bool | None = None) -> dict[str, Any]:
    """Everything the page embeds for this view. `check`: run `check` over the frames (True), never (False),
    or when installed and the view has at most CHECK_AUTO_FRAMES frames (None: it doubles the write time)."""
    strings = _Strings()
    to_check: list[Collected] | None = [] if check is not False and check_installed() else None
    frames, transcript, row_of_id = frames_data(conn, view, strings, to_check)
    header = header_data(conn, view, frames, strings.values)
    if to_check is not None and check is None and len(to_check) > CHECK_AUTO_FRAMES:
        header["check"] = {
            "summary": f"not run on {counted(len(to_check), 'frame', grouped=True)} (view --check runs it)",
            "errors": 0,
        }
        header["check"]["connection"] = []
    elif to_check is not None:
        whole = ((r[0], r[1], read_raw(conn, r[0]) if r[2] is None else r[2], *r[3:]) for r in to_check)
        found = check_data(conn, view, whole)
        for fid, texts in found["findings"].items():
            row = row_of_id.get(fid)
            if row is not None:
                frames["flags"].setdefault(row, []).extend(texts)
        header["check"] = {k: found[k] for k in ("summary", "errors", "connection")}
    return {"version": 1, "header": header, "strings": strings.values, "frames": frames, "transcript": transcript}
