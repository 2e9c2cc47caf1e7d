"""Which JSON Schema validator `acp-relay check` uses, by measurement.

Validates a realistic message mix (mostly streamed session/update chunks, then tool call updates, prompts,
permission requests and their results) per method against the shipped v1/v2 schemas with each candidate,
and prints microseconds per message (and compile time). Same messages, same definitions, same run.

    .venv/bin/pip install jsonschema                   # the candidate acp-relay does not depend on
    .venv/bin/python tools/validator_bench.py [--rounds N]

Candidates: jsonschema (Draft 2020-12, with and without its format checker) and fastjsonschema (compiled to
Python code), each on the schemas as published and on the rewrite `check` applies (annotations dropped,
tagged unions testing their tag first; see acp_relay/protocol/check/schema.py), and last the engine's own
SchemaSet.validate (the rewrite plus session/update dispatched on its variant).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from acp_relay.protocol.check.schema import (  # noqa: E402
    overlay_v2,
    reachable,
    rewrite_unions,
    schema_set,
    strip_annotations,
)

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


def defs_of(version: int, rewritten: bool) -> dict[str, Any]:
    doc = json.loads((SCHEMAS / f"v{version}" / "schema.unstable.json").read_text())
    if version == 2:
        doc = overlay_v2(doc)
    return rewrite_unions(strip_annotations(doc["$defs"]), False) if rewritten else doc["$defs"]


Factory = Callable[[dict[str, Any]], Callable[[Any], bool]]


def bench(label: str, make: Factory, rounds: int, rewritten: bool) -> None:
    for version, mix in mixes().items():
        defs = defs_of(version, rewritten)
        t0 = time.perf_counter()
        validators = {}
        for name in {n for n, _, _, _ in mix}:
            root = {"$ref": f"#/$defs/{name}"}
            validators[name] = make({**root, "$defs": reachable(root, defs) if rewritten else defs})
        compile_ms = (time.perf_counter() - t0) * 1000
        bad = sum(not validators[n](v) for n, _, _, v in mix)
        t0 = time.perf_counter()
        for _ in range(rounds):
            for name, _, _, value in mix:
                validators[name](value)
        us = (time.perf_counter() - t0) / (rounds * len(mix)) * 1e6
        flag = f"  ({bad} rejected!)" if bad else ""
        print(f"{label:48s} v{version}: {us:8.1f} us/message   compile {compile_ms:7.0f} ms{flag}", flush=True)


def engine(rounds: int) -> None:
    for version, mix in mixes().items():
        s = schema_set(version)
        t0 = time.perf_counter()
        bad = sum(s.validate(m, k, v, "x") is not None for _, m, k, v in mix)
        compile_ms = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        for _ in range(rounds):
            for _, method, kind, value in mix:
                s.validate(method, kind, value, "x")
        us = (time.perf_counter() - t0) / (rounds * len(mix)) * 1e6
        flag = f"  ({bad} rejected!)" if bad else ""
        label = "check's SchemaSet (rewrite + update dispatch)"
        print(f"{label:48s} v{version}: {us:8.1f} us/message   compile {compile_ms:7.0f} ms{flag}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    rounds = ap.parse_args().rounds

    import fastjsonschema

    try:
        import jsonschema
    except ImportError:  # not a dependency of acp-relay: only this comparison needs it
        raise SystemExit("the comparison needs jsonschema: .venv/bin/pip install jsonschema") from None

    def js(schema: dict[str, Any]) -> Callable[[Any], bool]:
        return jsonschema.Draft202012Validator(schema).is_valid

    def js_formats(schema: dict[str, Any]) -> Callable[[Any], bool]:
        checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
        return jsonschema.Draft202012Validator(schema, format_checker=checker).is_valid

    formats = {f: (lambda _v: True) for f in ("int32", "int64", "uint16", "uint32", "uint64", "double")}

    def fjs(schema: dict[str, Any]) -> Callable[[Any], bool]:
        check = fastjsonschema.compile(schema, formats=formats)

        def run(value: Any) -> bool:
            try:
                check(value)
            except fastjsonschema.JsonSchemaException:
                return False
            return True

        return run

    from importlib.metadata import version

    print(f"jsonschema {version('jsonschema')}, fastjsonschema {version('fastjsonschema')}, {rounds} rounds")
    bench("jsonschema", js, rounds, False)
    bench("jsonschema + format checker", js_formats, rounds, False)
    bench("fastjsonschema", fjs, rounds, False)
    bench("jsonschema, rewritten schema", js, rounds, True)
    bench("fastjsonschema, rewritten schema", fjs, rounds, True)
    engine(rounds)


if __name__ == "__main__":
    main()
