"""The view case: writing the page, rendering it in Chromium, and scrolling it."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from .common import (
    BUDGET,
    MB,
    _sessions_db,
    alternate,
    log,
    median,
    relay_cmd,
    timed_run,
)


def _bare_page(html: Path, out: Path) -> Path:
    """The page's data block alone in a page with no script: what the browser pays to read the bytes."""
    page = html.read_bytes()
    start = page.index(b'<script type="application/json"')
    end = page.index(b"</script>", start) + len(b"</script>")
    out.write_bytes(
        b'<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>' + page[start:end] + b"</body></html>"
    )
    return out


def _browser_runs(pages: dict[str, Path], reps: int) -> dict[str, Any]:
    """Per page: ms from navigation to the first painted screen (the bare page: to DOM ready), scroll p95."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return {"skipped": "Playwright is not installed"}
    chromium = next((p for p in ("/usr/bin/chromium", shutil.which("chromium")) if p and os.access(p, os.X_OK)), None)
    if chromium is None:
        return {"skipped": "no system Chromium"}
    out: dict[str, Any] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for rep in range(reps):
            for name, path in pages.items():
                page = browser.new_page(viewport={"width": 1440, "height": 860})
                page.goto(path.resolve().as_uri(), timeout=120_000)
                if name.startswith("bare"):
                    ms = page.evaluate("() => performance.timing.domInteractive - performance.timing.navigationStart")
                    res = {"first_ms": ms}
                else:
                    page.wait_for_selector("body[data-timing]", timeout=120_000)
                    timing = json.loads(page.get_attribute("body", "data-timing") or "{}")
                    page.wait_for_timeout(1500)  # the transcript's later slices
                    steps = page.evaluate(SCROLL_JS)
                    res = {
                        "first_ms": timing["painted"],
                        "timing": timing,
                        "scroll_p50_ms": steps[len(steps) // 2],
                        "scroll_p95_ms": steps[int(len(steps) * 0.95)],
                    }
                log(
                    f"  view {name:22s} rep {rep}: first screen {res['first_ms']:6.0f} ms"
                    + (f"  scroll p95 {res['scroll_p95_ms']:5.1f} ms" if "scroll_p95_ms" in res else "")
                )
                out.setdefault(name, []).append(res)
                page.close()
        browser.close()
    return out


# The first chunk run opened (a flood is one run: opened, it is 100,000 rows), then 60 scroll steps of 80
# rows each; each step's time is the scroll, the redraw and two animation frames.
SCROLL_JS = """async () => {
  const run = document.querySelector('#rows .row.run');
  if (run) { run.click(); await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))); }
  const s = document.getElementById('scroller'), out = [];
  for (let i = 0; i < 60; i++) {
    const t = performance.now();
    s.scrollTop += 2400;
    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    out.push(performance.now() - t);
  }
  return out.sort((a, b) => a - b);
}"""


def case_view(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    db, why = _sessions_db(args, "view")
    if why or db is None:
        log(f"  view: SKIPPED ({why})")
        return {"skipped": why, "rows": [("view of 100k frames", f"skipped: {why}", "", None, "", "", None)]}
    sessions = {"mixed": "long", "chunk flood": "flood"}
    raw = {}
    for name, sid in sessions.items():
        r = subprocess.run([*relay_cmd(), "show", "--db", str(db), sid, "--raw"], capture_output=True)
        raw[name] = len(r.stdout)
    runs_cmd = {}
    for name, sid in sessions.items():
        runs_cmd[f"view {name}"] = [*relay_cmd(), "view", "--db", str(db), sid, "-o", str(tmp / f"view-{sid}.html")]
        runs_cmd[f"baseline: show --transcript {name}"] = [*relay_cmd(), "show", "--db", str(db), sid, "--transcript"]

    runs = alternate(args.reps_view, list(runs_cmd), lambda kind, rep: timed_run(runs_cmd[kind], kind, rep))
    s = {k: median([r["s"] for r in v]) for k, v in runs.items()}
    cpu = {k: median([r["cpu_s"] for r in v]) for k, v in runs.items()}
    pages = {}
    for name, sid in sessions.items():
        html = tmp / f"view-{sid}.html"
        pages[f"page {name}"] = html
        pages[f"bare {name}"] = _bare_page(html, tmp / f"bare-{sid}.html")
    browser = _browser_runs(pages, args.reps_view)
    rows: list[tuple[Any, ...]] = []
    factor, extra = BUDGET["view_size"]
    for name in sessions:
        w, b = s[f"view {name}"], s[f"baseline: show --transcript {name}"]
        ok = all(r["exit"] == 0 for r in runs[f"view {name}"])
        rows.append(
            (
                f"view: write {name} {args.view_frames:,} frames (s)",
                w,
                b,
                w / b,
                "< 5 s",
                "" if ok else "EXIT != 0",
                ok and w < BUDGET["view_write_s"],
            )
        )
        wc, bc = cpu[f"view {name}"], cpu[f"baseline: show --transcript {name}"]
        rows.append(("  the same in CPU seconds (user + sys)", wc, bc, wc / bc, "", "", None))
        size = (tmp / f"view-{sessions[name]}.html").stat().st_size
        limit = factor * raw[name] + extra
        rows.append(
            (
                "  page size MB (baseline: raw bytes)",
                size / MB,
                raw[name] / MB,
                size / raw[name],
                f"<= {factor}x + 0.3",
                "",
                size <= limit,
            )
        )
        if "skipped" in browser:
            rows.append(("  first screen in Chromium", f"skipped: {browser['skipped']}", "", None, "", "", None))
            continue
        first = median([r["first_ms"] for r in browser[f"page {name}"]]) / 1000
        bare = median([r["first_ms"] for r in browser[f"bare {name}"]]) / 1000
        rows.append(
            (
                "  first screen in Chromium (s) (baseline: bare data page)",
                first,
                bare,
                first / bare,
                "< 2 s",
                "",
                first < BUDGET["view_render_s"],
            )
        )
        scroll = median([r["scroll_p95_ms"] for r in browser[f"page {name}"]])
        rows.append(
            (
                "  scroll step p95 (ms) (baseline: 2 frames)",
                scroll,
                33.3,
                scroll / 33.3,
                "< 50 ms",
                "",
                scroll < BUDGET["view_scroll_ms"],
            )
        )
        p50 = median([r["scroll_p50_ms"] for r in browser[f"page {name}"]])
        rows.append(("  scroll step p50 (ms) (baseline: 2 frames)", p50, 33.3, p50 / 33.3, "", "", None))
    return {"runs": runs, "summary": s, "raw_bytes": raw, "browser": browser, "db": str(db), "rows": rows}
