"""The hostile case (issue 19): read commands on a session holding a 64 MiB line of terminal controls."""

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
frames = [
    ("c2a", b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/p","mcpServers":[]}}'),
    ("a2c", b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"hostile-1"}}'),
    ("c2a", b'{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"hostile-1","prompt":'
            b'[{"type":"text","text":"go hostile"}]}}'),
    ("a2c", line),
    ("a2c", b"\x1b[31m\x00\x9b" * (8 * MiB)),
    ("a2c", b'{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'),
]
with open(sys.argv[1], "wb") as f:  # an ndjson capture (acp-relay's export format), imported below
    for seq, (direction, raw) in enumerate(frames, 1):
        rec = {"seq": seq, "ts": 1.7e9 + seq, "direction": direction}
        try:
            rec["raw"] = raw.decode("utf-8")
        except UnicodeDecodeError:
            rec["raw_b64"] = base64.b64encode(raw).decode()
        f.write(json.dumps(rec, ensure_ascii=False).encode() + b"\n")
print(hashlib.sha256(line + b"\n").hexdigest())
"""


def _hostile_db(tmp: Path) -> tuple[Path, int, str]:
    """A session with a 64 MiB agent chunk of escapes and a 64 MiB non-JSON line of them, imported (the
    recorder's indexing and redaction, without a relay's pipes in the way); the chunk's frame id and the
    sha256 of its line. Generated in a child process: a child's peak RSS starts from its parent's at fork,
    so this process must never hold the big line."""
    src, db = tmp / "hostile.ndjson", tmp / "hostile.db"
    digest = subprocess.run([PY, "-c", _HOSTILE_GEN, str(src)], capture_output=True, text=True, check=True).stdout
    subprocess.run([*relay_cmd(), "import", "--db", str(db), str(src)], stdout=subprocess.DEVNULL, check=True)
    src.unlink()
    with sqlite3.connect(db) as conn:
        (fid,) = conn.execute("SELECT id FROM frames WHERE length > ? AND kind = 'notification'", (MiB,)).fetchone()
    return db, fid, digest.strip()


def case_hostile(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    db, fid, digest = _hostile_db(tmp)
    page = tmp / "hostile.html"
    base = "baseline: show --frame N --raw"
    commands = {
        "show SESSION": ["show", "hostile-1"],
        "show --transcript": ["show", "hostile-1", "--transcript"],
        "search": ["search", "hostile"],
        "check": ["check", "hostile-1"],
        "view": ["view", "hostile-1", "-o", str(page)],
        base: ["show", "--frame", str(fid), "--raw"],
    }

    def one(kind: str, rep: int) -> dict[str, Any]:
        page.unlink(missing_ok=True)
        t = time.perf_counter()
        p = subprocess.Popen([*relay_cmd(), *commands[kind], "--db", str(db)], stdout=subprocess.PIPE)
        h, n = hashlib.sha256(), 0
        while chunk := _io(p.stdout).read(1 << 20):  # streamed: this process stays small (see _hostile_db)
            h.update(chunk)
            n += len(chunk)
        _, status, usage = os.wait4(p.pid, 0)
        dt = time.perf_counter() - t
        rss = usage.ru_maxrss * 1024 / MB  # KiB on Linux
        ok = os.waitstatus_to_exitcode(status) in (0, 1) and (kind != base or h.hexdigest() == digest)
        log(f"  hostile {kind:32s} rep {rep}: {dt:6.2f} s  {rss:6.1f} MB  out {n:>10,} B  {'ok' if ok else 'BAD'}")
        return {"s": dt, "rss_mb": rss, "out": n, "ok": ok}

    runs = alternate(args.reps_big, list(commands), one)
    rows: list[tuple[Any, ...]] = []
    bs = median([r["s"] for r in runs[base]])
    for kind in commands:
        if kind == base:
            continue
        s, mb = median([r["s"] for r in runs[kind]]), max(r["rss_mb"] for r in runs[kind])
        ok = all(r["ok"] for r in runs[kind])
        rows.append(
            (f"hostile 64 MiB line: {kind} (s)", s, bs, s / bs, f"<= {HOSTILE_S:.0f} s", "", ok and s <= HOSTILE_S)
        )
        rows.append((f"  {kind}: peak RSS MB", mb, "", None, f"<= {HOSTILE_MB:.0f}", "", mb <= HOSTILE_MB))
    exact = all(r["ok"] for r in runs[base])
    rows.append(("  show --frame N --raw gives every byte", "yes" if exact else "NO", "", None, "exact", "", exact))
    return {"runs": runs, "rows": rows}
