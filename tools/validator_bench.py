"""Which JSON Schema validator `acp-relay check` uses, by measurement: validate a realistic message mix
(mostly streamed session/update chunks, some tool calls, prompts, permission requests, responses) per method
against the shipped v1/v2 schemas with each candidate, and print microseconds per message.

    .venv/bin/python tools/validator_bench.py
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

TRANSFORM = False
SCHEMAS = Path(__file__).resolve().parent.parent / "acp_relay" / "protocol" / "check" / "schemas"

TEXT = {"type": "text", "text": "Let me look at the loop body before I suggest a fix. " * 3}
MIX_V1: list[tuple[str, str, Any]] = (
    [("SessionNotification", "", {"sessionId": "s1", "update": {"sessionUpdate": "agent_message_chunk", "content": TEXT}})] * 60
    + [("SessionNotification", "", {"sessionId": "s1", "update": {"sessionUpdate": "agent_thought_chunk", "content": TEXT}})] * 15
    + [("SessionNotification", "", {"sessionId": "s1", "update": {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Read main.py", "kind": "read", "status": "pending", "locations": [{"path": "/p/main.py", "line": 3}]}})] * 5
    + [("SessionNotification", "", {"sessionId": "s1", "update": {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed", "content": [{"type": "content", "content": TEXT}]}})] * 10
    + [("PromptRequest", "", {"sessionId": "s1", "prompt": [TEXT, {"type": "resource_link", "uri": "file:///p/a.py", "name": "a.py"}]})] * 3
    + [("PromptResponse", "", {"stopReason": "end_turn"})] * 3
    + [("RequestPermissionRequest", "", {"sessionId": "s1", "toolCall": {"toolCallId": "c1", "title": "Edit"}, "options": [{"optionId": "a", "name": "Allow", "kind": "allow_once"}]})] * 2
    + [("RequestPermissionResponse", "", {"outcome": {"outcome": "selected", "optionId": "a"}})] * 2
)
MIX_V2: list[tuple[str, str, Any]] = (
    [("UpdateSessionNotification", "", {"sessionId": "s1", "update": {"sessionUpdate": "agent_message_chunk", "messageId": "m1", "content": TEXT}})] * 70
    + [("UpdateSessionNotification", "", {"sessionId": "s1", "update": {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress", "title": "Run tests"}})] * 15
    + [("UpdateSessionNotification", "", {"sessionId": "s1", "update": {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}})] * 5
    + [("PromptRequest", "", {"sessionId": "s1", "prompt": [TEXT]})] * 5
    + [("PromptResponse", "", {})] * 5
)


ANNOTATIONS = {"description", "title", "examples", "default"}


def strip(node: Any) -> Any:
    """Drop annotations (descriptions, x-* hints): they do not change what validates, and a generated
    validator rebuilds the definitions it reports on every failed anyOf branch."""
    if isinstance(node, list):
        return [strip(x) for x in node]
    if isinstance(node, dict):
        return {k: (v if k in ("properties", "$defs") and False else strip(v)) for k, v in node.items() if not (k in ANNOTATIONS and not isinstance(v, dict) or k.startswith("x-"))}
    return node


def defs_schema(version: str, name: str) -> dict[str, Any]:
    doc = json.loads((SCHEMAS / version / "schema.unstable.json").read_text())
    defs = doc["$defs"]
    if TRANSFORM:
        defs = strip(defs)
        import sys; sys.path.insert(0, "/tmp"); from tr2 import tagged; defs = tagged(defs)
    return {"$schema": doc["$schema"], "$ref": f"#/$defs/{name}", "$defs": defs}


def bench(label: str, make: Any, rounds: int = 40) -> None:
    for version, mix in (("v1", MIX_V1), ("v2", MIX_V2)):
        t0 = time.perf_counter()
        validators = {name: make(defs_schema(version, name)) for name in {n for n, _, _ in mix}}
        compile_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(rounds):
            for name, _, value in mix:
                validators[name](value)
        per = (time.perf_counter() - t0) / (rounds * len(mix)) * 1e6
        print(f"{label:34s} {version}: {per:7.1f} us/message  (compile {compile_s * 1000:6.0f} ms for {len(validators)} methods)")


def main() -> None:
    import fastjsonschema
    import jsonschema

    def js(schema: dict[str, Any]) -> Any:
        v = jsonschema.Draft202012Validator(schema)
        return lambda x: v.is_valid(x)

    def js_fmt(schema: dict[str, Any]) -> Any:
        v = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
        return lambda x: v.is_valid(x)

    def fjs(schema: dict[str, Any]) -> Any:
        check = fastjsonschema.compile(schema, formats={f: (lambda _v: True) for f in ("int32", "int64", "uint16", "uint32", "uint64", "double")})

        def run(x: Any) -> bool:
            try:
                check(x)
                return True
            except fastjsonschema.JsonSchemaException:
                return False

        return run

    bench(f"jsonschema {jsonschema.__version__ if hasattr(jsonschema, '__version__') else ''}", js)
    bench("jsonschema + FORMAT_CHECKER", js_fmt)
    bench(f"fastjsonschema {fastjsonschema.VERSION}", fjs)
    global TRANSFORM
    TRANSFORM = True
    bench("jsonschema, annotations stripped", js)
    bench("fastjsonschema, annotations stripped", fjs)


if __name__ == "__main__":
    main()
