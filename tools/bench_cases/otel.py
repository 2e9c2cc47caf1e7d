"""The otel case: `acp-relay otel export` of two long sessions, to a file and to a loopback collector."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .common import (
    BUDGET,
    _sessions_db,
    alternate,
    log,
    median,
    relay_cmd,
    timed_run,
)


class _NullCollector:
    """An OTLP/HTTP endpoint on loopback that reads each request and answers 200 (the otel case)."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def case_otel(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    db, why = _sessions_db(args, "otel", "export")
    if why or db is None:
        log(f"  otel: SKIPPED ({why})")
        return {"skipped": why, "rows": [("otel export of 100k frames", f"skipped: {why}", "", None, "", "", None)]}
    collector = _NullCollector()
    sessions = {"mixed": "long", "chunk flood": "flood"}
    runs_cmd = {}
    for name, prefix in sessions.items():
        runs_cmd[f"file {name}"] = [
            *relay_cmd(),
            "otel",
            "export",
            "--db",
            str(db),
            prefix,
            "--file",
            str(tmp / "t.jsonl"),
        ]
        runs_cmd[f"http {name}"] = [
            *relay_cmd(),
            "otel",
            "export",
            "--db",
            str(db),
            prefix,
            "--endpoint",
            collector.url,
        ]
        runs_cmd[f"baseline {name}"] = [*relay_cmd(), "show", "--db", str(db), prefix, "--transcript"]

    try:
        runs = alternate(args.reps_view, list(runs_cmd), lambda kind, rep: timed_run(runs_cmd[kind], kind, rep))
    finally:
        collector.close()
    rows: list[tuple[Any, ...]] = []
    factor = BUDGET["otel_factor"]
    for name in sessions:
        base = runs[f"baseline {name}"]
        for how in ("file", "http"):
            mine = runs[f"{how} {name}"]
            ok = all(r["exit"] == 0 for r in mine)
            w, b = median([r["s"] for r in mine]), median([r["s"] for r in base])
            label = "OTLP JSON file" if how == "file" else "OTLP/HTTP"
            spans = mine[-1]["out"].split("(")[-1].split(")")[0] if ok else "?"
            rows.append(
                (
                    f"otel export {name} 100k frames, {label}, {spans} (s)",
                    w,
                    b,
                    w / b,
                    f"<= {factor:g}x",
                    "" if ok else "EXIT != 0",
                    ok and w <= factor * b,
                )
            )
            wc, bc = median([r["cpu_s"] for r in mine]), median([r["cpu_s"] for r in base])
            rows.append(("  the same in CPU seconds (user + sys)", wc, bc, wc / bc, "", "", None))
    return {"runs": runs, "rows": rows}
