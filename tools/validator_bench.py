"""Which JSON Schema validator `acp-relay check` uses, by measurement.

Validates a realistic message mix (mostly streamed session/update chunks, then tool call updates, prompts,
permission requests and their results) per method against the shipped v1/v2 schemas with each candidate
on the published definitions, and prints microseconds per message (and compile time). Same messages, same
definitions, same run. Then `check`'s own SchemaSet.validate, of this tree and of a baseline tree (`git
archive` of --baseline, default main) side by side, each in a fresh process: the per-session time (import,
compile, and one session's mix validated once; the baseline also with its on-disk cache of compiled
validators already filled, as the CLI ran it) and the steady time per message.

    .venv/bin/pip install jsonschema fastjsonschema    # candidates acp-relay does not depend on (optional)
    .venv/bin/python tools/validator_bench.py [--rounds N] [--baseline REV] [--reps N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from acp_relay.protocol.check.schema import overlay_v2  # noqa: E402

SCHEMAS = ROOT / "acp_relay" / "protocol" / "check" / "schemas"
TEXT = {"type": "text", "text": "Let me look at the loop body before I suggest a fix. "}
Mix = list[tuple[str, str, str, Any]]  # (def name, method, kind, value)


def _update(v: int, sid: str, update: dict[str, Any]) -> tuple[str, str, str, Any]:
    name = "SessionNotification" if v == 1 else "UpdateSessionNotification"
    return (name, "session/update", "notification", {"sessionId": sid, "update": update})


def mixes() -> dict[int, Mix]:
    chunk1 = {"sessionUpdate": "agent_message_chunk", "content": TEXT}
    chunk2 = {**chunk1, "messageId": "m1"}
    tool = {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"}
    tool_out = {**tool, "content": [{"type": "content", "content": TEXT}]}
    perm1 = {
        "sessionId": "s1",
        "toolCall": {"toolCallId": "c1", "title": "Edit"},
        "options": [{"optionId": "a", "name": "Allow", "kind": "allow_once"}],
    }
    perm2 = {
        "sessionId": "s1",
        "title": "Edit main.py",
        "options": [{"optionId": "a", "name": "Allow", "kind": "allow_once"}],
    }
    selected = {"outcome": {"outcome": "selected", "optionId": "a"}}
    prompt = {"sessionId": "s1", "prompt": [TEXT, {"type": "resource_link", "uri": "file:///p/a.py", "name": "a.py"}]}
    return {
        1: [_update(1, "s1", chunk1)] * 70
        + [_update(1, "s1", {"sessionUpdate": "agent_thought_chunk", "content": TEXT})] * 10
        + [_update(1, "s1", {**tool, "sessionUpdate": "tool_call", "title": "Read", "kind": "read"})] * 4
        + [_update(1, "s1", tool_out)] * 8
        + [("PromptRequest", "session/prompt", "request", prompt)] * 2
        + [("PromptResponse", "session/prompt", "response", {"stopReason": "end_turn"})] * 2
        + [("RequestPermissionRequest", "session/request_permission", "request", perm1)] * 2
        + [("RequestPermissionResponse", "session/request_permission", "response", selected)] * 2,
        2: [_update(2, "s1", chunk2)] * 70
        + [_update(2, "s1", {"sessionUpdate": "state_update", "state": "running"})] * 4
        + [_update(2, "s1", tool_out)] * 14
        + [_update(2, "s1", {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"})] * 4
        + [("PromptRequest", "session/prompt", "request", prompt)] * 2
        + [("PromptResponse", "session/prompt", "response", {"messageId": "u1"})] * 2
        + [("RequestPermissionRequest", "session/request_permission", "request", perm2)] * 2
        + [("RequestPermissionResponse", "session/request_permission", "response", selected)] * 2,
    }


def defs_of(version: int) -> dict[str, Any]:
    doc = json.loads((SCHEMAS / f"v{version}" / "schema.unstable.json").read_text())
    return (overlay_v2(doc) if version == 2 else doc)["$defs"]


Factory = Callable[[dict[str, Any]], Callable[[Any], bool]]


def bench(label: str, make: Factory, rounds: int) -> None:
    for version, mix in mixes().items():
        defs = defs_of(version)
        t0 = time.perf_counter()
        validators = {name: make({"$ref": f"#/$defs/{name}", "$defs": defs}) for name in {n for n, _, _, _ in mix}}
        compile_ms = (time.perf_counter() - t0) * 1000
        bad = sum(not validators[n](v) for n, _, _, v in mix)
        t0 = time.perf_counter()
        for _ in range(rounds):
            for name, _, _, value in mix:
                validators[name](value)
        us = (time.perf_counter() - t0) / (rounds * len(mix)) * 1e6
        flag = f"  ({bad} rejected!)" if bad else ""
        print(f"{label:40s} v{version}: {us:8.1f} us/message   compile {compile_ms:7.0f} ms{flag}", flush=True)


# Run in a fresh process with a tree's root first on sys.path: argv = root, rounds, cache dir or "".
SESSION = """
import json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
from acp_relay.protocol.check.schema import SchemaSet
if sys.argv[3]:  # the baseline's cache of compiled validators (gone since jsonschema-rs)
    from acp_relay.fdio import FileCache
    from acp_relay.protocol.check.validator_store import keep_validators_in
    keep_validators_in(FileCache(sys.argv[3]))
mixes = {int(k): v for k, v in json.load(sys.stdin).items()}
sets = {v: SchemaSet(v) for v in mixes}
bad = sum(sets[v].validate(m, k, x, "x") is not None for v, mix in mixes.items() for _, m, k, x in mix)
session_ms = (time.perf_counter() - t0) * 1000
rounds, n = int(sys.argv[2]), sum(map(len, mixes.values()))
t0 = time.perf_counter()
for _ in range(rounds):
    for v, mix in mixes.items():
        for _, m, k, x in mix:
            sets[v].validate(m, k, x, "x")
us = (time.perf_counter() - t0) / (rounds * n) * 1e6
print(json.dumps({"session_ms": session_ms, "us": us, "bad": bad}))
"""


def session(root: Path, rounds: int, cache: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", SESSION, str(root), str(rounds), cache],
        input=json.dumps(mixes()),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def engines(rounds: int, baseline: str, reps: int) -> None:
    """This tree's SchemaSet against the baseline's, alternating, `reps` times each; medians."""
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        base.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", baseline], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
        cache = str(Path(tmp) / "validators")
        has_cache = (base / "acp_relay" / "protocol" / "check" / "validator_store.py").exists()
        runs: dict[str, list[dict[str, float]]] = {"this tree": [], f"{baseline}, no cache": []}
        if has_cache:
            runs[f"{baseline}, cache filled"] = []
            session(base, 1, cache)  # fills it
        for _ in range(reps):
            runs["this tree"].append(session(ROOT, rounds, ""))
            runs[f"{baseline}, no cache"].append(session(base, rounds, ""))
            if has_cache:
                runs[f"{baseline}, cache filled"].append(session(base, rounds, cache))
    n = sum(map(len, mixes().values()))
    ours = {k: statistics.median(r[k] for r in runs["this tree"]) for k in ("session_ms", "us")}
    print(f"check's SchemaSet, one session of {n} messages (v1 and v2) in a fresh process, median of {reps}:")
    for label, rs in runs.items():
        med = {k: statistics.median(r[k] for r in rs) for k in ("session_ms", "us")}
        flag = f"  ({rs[0]['bad']:.0f} rejected!)" if rs[0]["bad"] else ""
        print(
            f"  {label:28s} session {med['session_ms']:8.1f} ms ({med['session_ms'] / ours['session_ms']:5.1f}x"
            f" this tree)   steady {med['us']:6.2f} us/message ({med['us'] / ours['us']:5.1f}x){flag}",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--baseline", default="main", help="the git revision to compare check's SchemaSet with")
    args = ap.parse_args()
    from importlib.metadata import version

    import jsonschema_rs

    print(f"jsonschema-rs {version('jsonschema-rs')}, {args.rounds} rounds", flush=True)
    bench(
        "jsonschema-rs", lambda s: jsonschema_rs.Draft202012Validator(s, validate_formats=False).is_valid, args.rounds
    )
    try:
        import jsonschema

        bench(f"jsonschema {version('jsonschema')}", lambda s: jsonschema.Draft202012Validator(s).is_valid, args.rounds)
    except ImportError:
        print("jsonschema: not installed (optional)")
    try:
        import fastjsonschema

        def fjs(schema: dict[str, Any]) -> Callable[[Any], bool]:
            check = fastjsonschema.compile(schema, use_formats=False)

            def run(value: Any) -> bool:
                try:
                    check(value)
                except fastjsonschema.JsonSchemaException:
                    return False
                return True

            return run

        bench(f"fastjsonschema {version('fastjsonschema')}", fjs, args.rounds)
    except ImportError:
        print("fastjsonschema: not installed (optional; the baseline tree needs it)")
    engines(args.rounds, args.baseline, args.reps)


if __name__ == "__main__":
    main()
