"""The search case: the first (index-building) and later searches of a generated database."""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

from .common import (
    BUDGET,
    MB,
    PY,
    _generated_db,
    _largest_session,
    alternate,
    log,
    median,
    relay_cmd,
    rm_db,
)

# -- case 6: search ----------------------------------------------------------------------------------------
SEARCH_FULL_READ = (
    "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
    "print(c.execute(\"SELECT count(*), sum(instr(raw, X'00')) FROM frames\").fetchone())"
)


SEARCH_IN_PROCESS = """
import json, sys, time
from acp_relay.store import db
from acp_relay.store.queries import resolve_view
from acp_relay.store.search import search, update_index
conn = db.connect(sys.argv[1], create=False)
out = {}
for args in json.loads(sys.argv[3]):
    t = time.perf_counter()
    update_index(conn)
    view = resolve_view(conn, args[args.index("--session") + 1]) if "--session" in args else None
    limit = int(args[args.index("--limit") + 1]) if "--limit" in args else None
    n = sum(1 for _ in search(conn, args[0], view=view, limit=limit))
    out[" ".join(args)] = time.perf_counter() - t
print(json.dumps(out))
"""


def case_search(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    src, why = _generated_db(args, "search")
    if why or src is None:
        log(f"  search: SKIPPED ({why})")
        return {"skipped": why, "rows": [("search", f"skipped: {why}", "", None, "", "", None)]}
    big = _largest_session(src)[0]
    conn = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    n = conn.execute("SELECT max(id) FROM frames").fetchone()[0] or 0
    # A phrase from the middle of that session (in the flood session, "token N": one match).
    phrase = conn.execute(
        "SELECT json_extract(CAST(raw AS TEXT), '$.params.update.content.text') FROM frames WHERE session_id = ? "
        "AND update_kind = 'agent_message_chunk' ORDER BY id LIMIT 1 OFFSET "
        "(SELECT count(*) / 2 FROM frames WHERE session_id = ? AND update_kind = 'agent_message_chunk')",
        (big, big),
    ).fetchone()[0]
    word = phrase.split()[0].replace('"', "")  # a word the session surely holds ("token" in the flood)
    phrase = '"' + " ".join(phrase.split()).replace('"', "") + '"'
    conn.close()
    work = tmp / "search.db"
    search = [*relay_cmd(), "search", "--db", str(work), "--color", "never"]

    def fresh() -> None:
        rm_db(work)
        shutil.copyfile(src, work)
        if Path(f"{src}-wal").exists():  # a database opened since it was made may hold pages there
            shutil.copyfile(f"{src}-wal", f"{work}-wal")

    def timed(cmd: list[str]) -> dict[str, Any]:
        t = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True)
        dt = time.perf_counter() - t
        return {
            "s": dt,
            "exit": r.returncode,
            "lines": r.stdout.count(b"\n"),
            "err": r.stderr[-300:].decode("utf-8", "replace"),
        }

    # The first search builds the index: each repetition on a fresh copy, beside one full read of the frames.
    first: dict[str, list[dict[str, Any]]] = {"first search (builds the index)": [], "baseline: read every frame": []}
    for rep in range(args.reps_search_first):
        fresh()
        for kind, cmd in (
            ("baseline: read every frame", [PY, "-c", SEARCH_FULL_READ, str(work)]),
            ("first search (builds the index)", search + ["overloaded", "--limit", "20"]),
        ):
            res = timed(cmd)
            log(f"  search {kind:36s} rep {rep}: {res['s']:7.2f} s  exit {res['exit']}")
            first[kind].append(res)
    later = {
        "rare word, every match": search + ["overloaded"],
        "common word, first 20": search + ["function", "--limit", "20"],
        "phrase, largest session": search + [phrase, "--session", big],
        "common word, largest session, first 20": search + [word, "--session", big, "--limit", "20"],
        "no match (exit 1)": search + ["zebra"],
        "baseline: acp-relay --help": [*relay_cmd(), "--help"],
    }

    def one(kind: str, rep: int) -> dict[str, Any]:
        res = timed(later[kind])
        log(f"  search {kind:36s} rep {rep}: {res['s'] * 1000:7.1f} ms  exit {res['exit']}  {res['lines']} lines")
        return res

    runs = alternate(args.reps_search, list(later), one)
    # The same later searches inside one process: what the index costs, without Python's start-up.
    inproc = subprocess.run(
        [PY, "-c", SEARCH_IN_PROCESS, str(work), big, json.dumps([c[len(search) :] for c in list(later.values())[:5]])],
        capture_output=True,
        text=True,
    )
    in_process = json.loads(inproc.stdout) if inproc.returncode == 0 else {}
    log(f"  search in process (s): {in_process or inproc.stderr[-300:]}")
    s = {k: median([r["s"] for r in v]) for k, v in {**first, **runs}.items()}
    size = work.stat().st_size
    rows: list[tuple[Any, ...]] = []
    k0, b0 = "first search (builds the index)", "baseline: read every frame"
    ok = all(r["exit"] == 0 for r in first[k0])
    rows.append((f"search: {k0} (s)", s[k0], s[b0], s[k0] / s[b0], "<= 60 s", "" if ok else "EXIT != 0",
                 ok and s[k0] <= float(BUDGET["search_first_s"])))  # fmt: skip
    base = s["baseline: acp-relay --help"]
    for k in list(later)[:5]:
        want = 1 if k.startswith("no match") else 0
        ok = all(r["exit"] == want for r in runs[k])
        rows.append((f"search: {k} (s)", s[k], base, s[k] / base, "< 0.5 s", "" if ok else "EXIT WRONG",
                     ok and s[k] < float(BUDGET["search_later_s"])))  # fmt: skip
    if in_process:
        rows.append(
            ("search: the same, in one process, median (s)", median(list(in_process.values())), "", None, "", "", None)
        )
    rows.append((f"  ({n:,} frames; database with its index {size / MB:,.0f} MB)", "", "", None, "", "", None))
    return {
        "in_process": in_process,
        "runs": {**first, **runs},
        "summary": s,
        "frames": n,
        "db_bytes": size,
        "largest_session": big,
        "commands": later,
        "rows": rows,
    }
