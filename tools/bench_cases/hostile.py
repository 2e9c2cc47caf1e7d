"""The hostile case (issue 19): read commands and `export` (each format) on a session holding a 64 MiB line of
terminal controls, recorded each way a session can be (imported, and through the relay)."""

from __future__ import annotations

import argparse
import hashlib
import os
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

from .common import MB, PY, MiB, _io, alternate, log, median, relay_cmd

# -- case 13: hostile --------------------------------------------------------------------------------------
HOSTILE_MB, HOSTILE_S = 300.0, 5.0  # issue 19's budget for each read command on a 64 MiB hostile line


_HOSTILE_GEN = r"""
import base64, hashlib, json, sys
MiB = 1 << 20
sid = "hostile-1"
text = "\x1b\x07\x9b" * ((64 * MiB) // 14)  # 14 bytes of JSON each: \u001b, \u0007 and two of UTF-8
chunk = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": {
    "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}}
line = json.dumps(chunk, ensure_ascii=False, separators=(",", ":")).encode()
del text, chunk
frames = [
    ("c2a", b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/p","mcpServers":[]}}'),
    ("a2c", b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"hostile-1"}}'),
    ("c2a", b'{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"hostile-1","prompt":'
            b'[{"type":"text","text":"go hostile"}]}}'),
    ("a2c", line),
    ("a2c", b"\x1b[31m\x00\x9b" * (8 * MiB)),
    ("a2c", b'{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'),
]
out = sys.argv[1]
with open(out + ".ndjson", "wb") as f:  # an ndjson capture (acp-relay's export format), for import
    for seq, (direction, raw) in enumerate(frames, 1):
        rec = {"seq": seq, "ts": 1.7e9 + seq, "direction": direction}
        try:
            rec["raw"] = raw.decode("utf-8")
        except UnicodeDecodeError:
            rec["raw_b64"] = base64.b64encode(raw).decode()
        f.write(json.dumps(rec, ensure_ascii=False).encode() + b"\n")
# For `run`: the editor's lines, and the agent's replies to its Nth line in OUT.reply.N (see _AGENT).
with open(out + ".editor", "wb") as editor, open(out + ".all", "wb") as every:
    n, reply = 0, None
    for direction, raw in frames:
        every.write(raw + b"\n")
        if direction == "c2a":
            editor.write(raw + b"\n")
            n += 1
            reply = open(f"{out}.reply.{n}", "wb")
        else:
            reply.write(raw + b"\n")
print(hashlib.sha256(line + b"\n").hexdigest())
"""

# The agent for `run`: answers the editor's Nth line with the lines of PREFIX.reply.N, copied in 1 MiB pieces.
_AGENT = r"""
import shutil, sys
for n, _ in enumerate(sys.stdin.buffer, 1):
    try:
        with open(f"{sys.argv[1]}.reply.{n}", "rb") as f:
            shutil.copyfileobj(f, sys.stdout.buffer, 1 << 20)
    except FileNotFoundError:
        break
    sys.stdout.buffer.flush()
"""

# How each session is recorded: imported from a capture; through the relay, with an agent writing the big
# lines; through the relay to `cat`, so each big line is in the session twice (the editor's and the echo).
WAYS = ("import", "run", "run -- cat")


def _record(way: str, src: Path, db: Path) -> None:
    if way == "import":
        subprocess.run(
            [*relay_cmd(), "import", "--db", str(db), f"{src}.ndjson"], stdout=subprocess.DEVNULL, check=True
        )
        return
    agent = [PY, "-c", _AGENT, str(src)] if way == "run" else ["cat"]
    with open(f"{src}.editor" if way == "run" else f"{src}.all", "rb") as f:
        done = subprocess.run(
            [*relay_cmd(), "run", "--db", str(db), "--", *agent],
            stdin=f,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
    if done.returncode or done.stderr:
        raise SystemExit(f"hostile: recording through `run` failed: {done.stderr.decode(errors='replace')}")


def _hostile_dbs(tmp: Path) -> tuple[dict[str, tuple[Path, int]], str]:
    """The same session (a 64 MiB agent chunk of escapes and a 64 MiB non-JSON line of them) recorded each
    of the WAYS: each database and its chunk's frame id, and the sha256 of the chunk's line. Generated in a
    child process: a child's peak RSS starts from its parent's at fork, so this process must never hold the
    big line."""
    src = tmp / "hostile"
    digest = subprocess.run([PY, "-c", _HOSTILE_GEN, str(src)], capture_output=True, text=True, check=True).stdout
    dbs = {}
    for i, way in enumerate(WAYS):
        db = tmp / f"hostile-{i}.db"
        _record(way, src, db)
        with sqlite3.connect(db) as conn:
            (fid,) = conn.execute(
                "SELECT max(id) FROM frames WHERE length > ? AND kind = 'notification'", (MiB,)
            ).fetchone()
        dbs[way] = (db, fid)
    for leftover in tmp.glob("hostile.*"):
        leftover.unlink()
    return dbs, digest.strip()


def case_hostile(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    dbs, digest = _hostile_dbs(tmp)
    page, copy = tmp / "hostile.html", tmp / "hostile-export.db"
    base = "baseline: show --frame N --raw"
    commands = {
        "show SESSION": ["show", "hostile-1"],
        "show --transcript": ["show", "hostile-1", "--transcript"],
        "search": ["search", "hostile"],
        "check": ["check", "hostile-1"],
        "view": ["view", "hostile-1", "-o", str(page)],
        # export writes every byte (the text formats to stdout, read here): its output is several times the
        # session's 130 MiB, so its time is compared with the baseline's as well as with the budget
        "export ndjson": ["export", "hostile-1", "--format", "ndjson"],
        "export acp-devtools": ["export", "hostile-1", "--format", "acp-devtools"],
        "export sqlite": ["export", "hostile-1", "--format", "sqlite", "-o", str(copy)],
        base: ["show", "--frame", "{fid}", "--raw"],
    }
    variants = [f"{way}: {kind}" for way in WAYS for kind in commands]

    def one(variant: str, rep: int) -> dict[str, Any]:
        way, _, kind = variant.partition(": ")
        db, fid = dbs[way]
        page.unlink(missing_ok=True)
        copy.unlink(missing_ok=True)
        argv = [a.replace("{fid}", str(fid)) for a in commands[kind]]
        t = time.perf_counter()
        p = subprocess.Popen([*relay_cmd(), *argv, "--db", str(db)], stdout=subprocess.PIPE)
        h, n = hashlib.sha256(), 0
        while chunk := _io(p.stdout).read(1 << 20):  # streamed: this process stays small (see _hostile_dbs)
            h.update(chunk)
            n += len(chunk)
        _, status, usage = os.wait4(p.pid, 0)
        dt = time.perf_counter() - t
        rss = usage.ru_maxrss * 1024 / MB  # KiB on Linux
        ok = os.waitstatus_to_exitcode(status) in (0, 1) and (kind != base or h.hexdigest() == digest)
        log(f"  hostile {variant:44s} rep {rep}: {dt:6.2f} s  {rss:6.1f} MB  out {n:>10,} B  {'ok' if ok else 'BAD'}")
        return {"s": dt, "rss_mb": rss, "out": n, "ok": ok}

    runs = alternate(args.reps_big, variants, one)
    rows: list[tuple[Any, ...]] = []
    for way in WAYS:
        bs = median([r["s"] for r in runs[f"{way}: {base}"]])
        for kind in commands:
            if kind == base:
                continue
            got = runs[f"{way}: {kind}"]
            s, mb = median([r["s"] for r in got]), max(r["rss_mb"] for r in got)
            ok = all(r["ok"] for r in got)
            name = f"hostile 64 MiB line ({way}): {kind} (s)"
            rows.append((name, s, bs, s / bs, f"<= {HOSTILE_S:.0f} s", "", ok and s <= HOSTILE_S))
            rows.append((f"  {kind}: peak RSS MB", mb, "", None, f"<= {HOSTILE_MB:.0f}", "", mb <= HOSTILE_MB))
        exact = all(r["ok"] for r in runs[f"{way}: {base}"])
        rows.append(
            (f"  show --frame N --raw gives every byte ({way})", "yes" if exact else "NO", "", None, "exact", "", exact)
        )
    return {"runs": runs, "rows": rows}
