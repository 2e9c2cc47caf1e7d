#!/usr/bin/env python3
"""Run the fuzz targets of tests/test_fuzz.py for a while: `tools/fuzz.py --minutes N`.

The same hypothesis targets CI runs briefly, here under the `acp-relay-fuzz-long` profile (no example
database, a fresh random seed each round), round after round until each target's share of the time is
used. Prints how many examples each target ran, the known findings still open, and any new finding
(with hypothesis' falsifying example; the failing input's bytes are saved under --save).

Exit status: 0 no finding; 1 a new finding; 2 no new finding, but known findings (strict-xfail
reproducers in tests/test_fuzz.py) are still open.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0, help="total time, shared equally by the targets")
    ap.add_argument("--examples", type=int, default=100, help="examples per hypothesis round (default 100)")
    ap.add_argument("--targets", default="", help="comma-separated subset (names as printed)")
    ap.add_argument(
        "--save",
        type=Path,
        default=Path(tempfile.gettempdir()) / "acp-relay-fuzz-findings",
        help="where failing inputs go (default: $TMPDIR/acp-relay-fuzz-findings)",
    )
    args = ap.parse_args()

    os.environ["ACP_RELAY_FUZZ_PROFILE"] = "acp-relay-fuzz-long"
    os.environ["ACP_RELAY_FUZZ_EXAMPLES"] = str(args.examples)
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT))
    import test_fuzz as tf

    targets = {
        name[len("test_fuzz_") :]: fn for name, fn in vars(tf).items() if name.startswith("test_fuzz_") and callable(fn)
    }
    if args.targets:
        wanted = [t.strip() for t in args.targets.split(",") if t.strip()]
        unknown = [t for t in wanted if t not in targets]
        if unknown:
            ap.error(f"unknown targets {unknown}; have {sorted(targets)}")
        targets = {t: targets[t] for t in wanted}
    budget = args.minutes * 60.0 / len(targets)
    print(
        f"fuzzing {len(targets)} targets for {args.minutes:g} min ({budget:.0f} s each, {args.examples} examples "
        f"per round); known findings open: {sorted(tf.OPEN) or 'none'}",
        flush=True,
    )

    report: list[tuple[str, int, int, float, str]] = []
    findings = 0
    for name, fn in targets.items():
        start = time.monotonic()
        rounds, status = 0, "ok"
        before = sum(tf.COUNTS.values())
        while time.monotonic() - start < budget:
            try:
                fn()
            except Exception:
                findings += 1
                status = "FINDING"
                print(f"\n=== FINDING in {name} ===\n{traceback.format_exc()}", flush=True)
                data = next((v for k, v in tf.LAST_INPUT.items() if name.startswith(k) or k.startswith(name)), None)
                if data is not None:
                    args.save.mkdir(parents=True, exist_ok=True)
                    path = args.save / f"{name}-{hashlib.sha256(data).hexdigest()[:12]}.bin"
                    path.write_bytes(data)
                    print(f"failing input saved to {path} (copy it to tests/corpus/ once understood)", flush=True)
                break
            rounds += 1
        examples = sum(tf.COUNTS.values()) - before
        seconds = time.monotonic() - start
        report.append((name, examples, rounds, seconds, status))
        print(f"{name:22} {examples:>9} examples {rounds:>5} rounds {seconds:7.1f} s  {status}", flush=True)

    print("\ntarget                  examples   rounds  seconds  status")
    for name, examples, rounds, seconds, status in report:
        print(f"{name:22} {examples:>9} {rounds:>8} {seconds:8.1f}  {status}")
    print(f"total                  {sum(r[1] for r in report):>9}")
    if tf.KNOWN_HITS:
        print(
            "known findings hit (examples abandoned):", ", ".join(f"{k}={v}" for k, v in sorted(tf.KNOWN_HITS.items()))
        )
    if findings:
        print(f"{findings} new finding(s)")
        return 1
    if tf.OPEN:
        print(f"no new finding; known findings still open: {', '.join(sorted(tf.OPEN))}")
        return 2
    print("no finding")
    return 0


if __name__ == "__main__":
    sys.exit(main())
