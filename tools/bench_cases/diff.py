"""The diff case: `acp-relay diff` of two long sessions that differ in a few places."""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .common import (
    BUDGET,
    ROOT,
    alternate,
    log,
    median,
    relay_cmd,
)


# -- case 8: diff ------------------------------------------------------------------------------------------
def _diff_session(sid: str, frames: int, variant: bool) -> list[tuple[str, bytes]]:
    """A v1 session of about `frames` frames: turns of streamed chunks, a tool call, a permission."""
    from gen_db import _msg, _update

    out: list[tuple[str, bytes]] = [
        ("c2a", _msg(id=0, method="initialize", params={"protocolVersion": 1, "clientInfo": {"name": "ed"}})),
        ("a2c", _msg(id=0, result={"protocolVersion": 1, "agentInfo": {"name": "bench-agent"}})),
        ("c2a", _msg(id=1, method="session/new", params={"cwd": "/w", "mcpServers": []})),
        ("a2c", _msg(id=1, result={"sessionId": sid})),
    ]
    turn = 0
    while len(out) < frames:
        turn += 1
        rid = turn + 1
        out.append(
            (
                "c2a",
                _msg(
                    id=rid,
                    method="session/prompt",
                    params={"sessionId": sid, "prompt": [{"type": "text", "text": f"step {turn}"}]},
                ),
            )
        )
        chunks = 40 + (1 if variant and turn % 40 == 0 else 0)
        for i in range(chunks):
            word = "changed" if variant and turn % 50 == 0 and i == 3 else f"w{i}"
            out.append(
                (
                    "a2c",
                    _update(
                        sid,
                        {
                            "sessionUpdate": "agent_message_chunk",
                            "messageId": f"m{turn}",
                            "content": {"type": "text", "text": word + " "},
                        },
                    ),
                )
            )
        tc = f"t{turn}"
        out.append(
            ("a2c", _update(sid, {"sessionUpdate": "tool_call", "toolCallId": tc, "title": "Read", "kind": "read"}))
        )
        out.append(
            (
                "a2c",
                _msg(
                    id=turn,
                    method="session/request_permission",
                    params={
                        "sessionId": sid,
                        "toolCall": {"toolCallId": tc},
                        "options": [{"optionId": "a", "kind": "allow_once", "name": "A"}],
                    },
                ),
            )
        )
        out.append(("c2a", _msg(id=turn, result={"outcome": {"outcome": "selected", "optionId": "a"}})))
        out.append(
            ("a2c", _update(sid, {"sessionUpdate": "tool_call_update", "toolCallId": tc, "status": "completed"}))
        )
        out.append(("a2c", _msg(id=rid, result={"stopReason": "end_turn"})))
    return out


def _diff_db(path: Path, frames: int) -> None:
    sys.path.insert(0, str(ROOT))
    from acp_relay.store import db as dbmod
    from acp_relay.store.scripted import ConnectionWriter

    conn = dbmod.connect(path)
    for n, (sid, variant) in enumerate((("bench-a", False), ("bench-b", True))):
        conn.execute("BEGIN")
        w = ConnectionWriter(conn, started_at=1_767_225_600.0 + n * 3600, argv=["bench-agent"], label=sid)
        mono = 0.0
        for i, (direction, line) in enumerate(_diff_session(sid, frames, variant)):
            mono += 0.001
            w.line(direction, line, mono)
            if i % 5000 == 0:
                w.flush()
        w.flush()
        w.close(ended_mono=mono + 0.01)
        conn.execute("COMMIT")
    conn.close()


def case_diff(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    db = tmp / "diff.db"
    t = time.perf_counter()
    _diff_db(db, args.diff_frames)
    log(f"  generated two {args.diff_frames:,}-frame sessions in {time.perf_counter() - t:.1f} s")
    base = [*relay_cmd(), "show", "--db", str(db), "--raw"]
    cmds = {
        "diff": [*relay_cmd(), "diff", "--db", str(db), "bench-a", "bench-b"],
        "baseline": ["sh", "-c", " && ".join(" ".join(base + [s]) + " >/dev/null" for s in ("bench-a", "bench-b"))],
    }

    def cpu() -> float:
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        return ru.ru_utime + ru.ru_stime

    def one(kind: str, rep: int) -> dict[str, Any]:
        t, c = time.perf_counter(), cpu()
        r = subprocess.run(cmds[kind], capture_output=True)
        dt, dc = time.perf_counter() - t, cpu() - c
        log(f"  diff {kind:9s} rep {rep}: {dt:6.2f} s  cpu {dc:6.2f} s  exit {r.returncode}")
        return {"s": dt, "cpu": dc, "exit": r.returncode, "out": r.stdout[:2000].decode("utf-8", "replace")}

    runs = alternate(args.reps_diff, list(cmds), one)
    s = {k: median([r["s"] for r in v]) for k, v in runs.items()}
    c = {k: median([r["cpu"] for r in v]) for k, v in runs.items()}
    ok = all(r["exit"] == 1 for r in runs["diff"]) and all(r["exit"] == 0 for r in runs["baseline"])
    rows = [
        (
            f"diff: two {args.diff_frames:,}-frame sessions (s)",
            s["diff"],
            s["baseline"],
            s["diff"] / s["baseline"],
            "< 5 s",
            "" if ok else "UNEXPECTED EXIT",
            ok and s["diff"] < BUDGET["diff_s"],
        ),
        (
            "diff: CPU seconds (user + sys, all processes)",
            c["diff"],
            c["baseline"],
            c["diff"] / c["baseline"],
            "",
            "",
            None,
        ),
        ("  (baseline: `show --raw` of both sessions)", "", "", None, "", "", None),
    ]
    return {"runs": runs, "summary": s, "cpu": c, "rows": rows}
