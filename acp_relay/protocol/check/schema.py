"""Per-method validation of params and results against the official ACP JSON Schemas (shipped beside this
module, Apache-2.0, see schemas/LICENSE and schemas/NOTICE), v1 and v2, with the v2 Prompt Lifecycle page's
newer changes overlaid.

Validating a whole frame against the top-level schema proves almost nothing (every method falls through to
the extension fallbacks), so each message is validated against the `$defs` entry whose `x-method` and kind
(request, notification, response) match. The validator is fastjsonschema, chosen by measurement (see
tools/validator_bench.py); two schema rewrites that change no verdict make it fast enough:
  - annotations (descriptions, titles, `x-*` hints) are dropped: generated code rebuilds the definition it
    reports on every failed branch;
  - tagged unions (`anyOf`/`oneOf` whose branches each fix one discriminator with `const`) become
    `if`/`then` pairs, so only the matching branch is validated (and its error is the one reported);
  - session/update is dispatched on `sessionUpdate` here, one compiled validator per variant.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import marshal
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import fastjsonschema

from ..jsonrpc import short_json
from . import validator_store

_KIND_SUFFIX = {"request": "Request", "notification": "Notification", "response": "Response"}
_ANNOTATIONS = frozenset({"description", "title", "examples", "default", "$comment"})

KNOWN_VERSIONS = (1, 2)


@dataclass(frozen=True, slots=True)
class MethodInfo:
    """What the schema says about one method: which side handles it and which message kinds it has."""

    side: str  # agent (sent by the client) | client (sent by the agent) | both | protocol
    defs: dict[str, str]  # kind -> $defs name


def _load(version: int, name: str) -> Any:
    return json.loads(resources.files(__package__).joinpath("schemas", f"v{version}", name).read_text("utf-8"))


def strip_annotations(node: Any) -> Any:
    """The schema without annotations. Keys inside `properties` are property names, never annotations."""
    if isinstance(node, list):
        return [strip_annotations(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key in ("properties", "$defs", "patternProperties"):
            out[key] = {k: strip_annotations(v) for k, v in value.items()}
        elif key not in _ANNOTATIONS and not key.startswith("x-"):
            out[key] = strip_annotations(value)
    return out


def _tag(branch: Any) -> tuple[str, Any] | None:
    """(key, const) when the branch is an object that requires key == const."""
    if not isinstance(branch, dict) or branch.get("type") != "object":
        return None
    for key, sub in (branch.get("properties") or {}).items():
        if isinstance(sub, dict) and "const" in sub and key in branch.get("required", ()):
            return key, sub["const"]
    return None


def _tagged(alts: Any) -> tuple[str, list[Any], list[tuple[Any, Any]], Any] | None:
    """(key, consts, [(const, branch)], fallback or None) when `alts` is a tagged union."""
    if not isinstance(alts, list) or len(alts) < 2:
        return None
    tags = [_tag(b) for b in alts]
    keys = {t[0] for t in tags if t}
    consts = [t[1] for t in tags if t]
    rest = [b for b, t in zip(alts, tags, strict=True) if t is None]
    if len(keys) != 1 or len(consts) < 2 or len({json.dumps(c) for c in consts}) != len(consts):
        return None
    if len(rest) > 1 or any(not isinstance(b, dict) or b.get("type") != "object" or "not" not in b for b in rest):
        return None  # a fallback that does not exclude the tags itself may overlap them: leave it alone
    pairs = [(t[1], b) for b, t in zip(alts, tags, strict=True) if t is not None]
    key = next(iter(keys))
    fallback = None
    if rest:  # its `not` lists the tags: the guard below says the same in one test
        fallback = {k: v for k, v in rest[0].items() if k != "not"}
        fallback = {"allOf": [{"properties": {key: {"not": {"enum": consts}}}}, fallback]}
    return key, consts, pairs, fallback


def rewrite_unions(node: Any, precise: bool) -> Any:
    """Rewrite tagged unions (same verdicts: the branches exclude each other by their tag, and the untagged
    fallback only takes tags no branch names).

    fast: an `anyOf` whose branches test their tag first, so a wrong branch fails at once and the union
    stops at the first match (`oneOf` would try every branch).
    precise: `if`/`then` pairs, so a failure reports what is wrong inside the branch the tag selects; used
    only to explain a failure."""
    if isinstance(node, list):
        return [rewrite_unions(x, precise) for x in node]
    if not isinstance(node, dict):
        return node
    node = {k: rewrite_unions(v, precise) for k, v in node.items()}
    for word in ("anyOf", "oneOf"):
        found = _tagged(node.get(word))
        if found is None:
            continue
        key, consts, pairs, fallback = found
        node = {k: v for k, v in node.items() if k != word}
        if precise:
            parts: list[Any] = [
                {"if": {"properties": {key: {"const": c}}, "required": [key]}, "then": b} for c, b in pairs
            ]
            parts.append({"if": {"properties": {key: {"not": {"enum": consts}}}}, "then": fallback or False})
            node["allOf"] = [*node.get("allOf", []), *parts]
        else:
            alts = [{"allOf": [{"properties": {key: {"const": c}}, "required": [key]}, b]} for c, b in pairs]
            node["anyOf"] = alts + ([fallback] if fallback else [])
    return node


def _refs(node: Any, out: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            out.add(ref[8:])
        for v in node.values():
            _refs(v, out)
    elif isinstance(node, list):
        for v in node:
            _refs(v, out)


def reachable(schema: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """The definitions `schema` refers to, transitively: compiling against all 270 costs a second each."""
    seen: set[str] = set()
    todo: set[str] = set()
    _refs(schema, todo)
    while todo:
        name = todo.pop()
        if name in seen or name not in defs:
            continue
        seen.add(name)
        _refs(defs[name], todo)
    return {name: defs[name] for name in sorted(seen)}  # one order, whatever the set's: the cache key's


# -- the Prompt Lifecycle page's changes to the v2 draft schema ----------------------------------------------
def _variant(tag: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"sessionUpdate": {"type": "string", "const": tag}, **props},
        "required": ["sessionUpdate", *required],
    }


def overlay_v2(doc: dict[str, Any]) -> dict[str, Any]:
    """Apply the seed page where it is newer than the schema files. `messageId` presence on prompt results
    and message updates is left to the lifecycle rules (one finding, citing the page), types stay here."""
    doc = copy.deepcopy(doc)
    d = doc["$defs"]
    meta = {"type": ["object", "null"]}
    ids = {"anyOf": [{"type": "string"}, {"type": "null"}]}
    # "2. Prompt Accepted": the result is {messageId}.
    d["PromptResponse"]["properties"]["messageId"] = {"$ref": "#/$defs/MessageId"}
    for name in ("ContentChunk", "UserMessage", "AgentMessage", "AgentThought"):
        d[name]["required"] = [r for r in d[name].get("required", []) if r != "messageId"]
    # "Session Updates": subagent_update, session_message, session_message_chunk.
    new = [
        {**_variant("subagent_update", {"_meta": meta}, []), "additionalProperties": True},
        _variant(
            "session_message",
            {
                "messageId": {"$ref": "#/$defs/MessageId"},
                "content": {"type": ["array", "null"], "items": {"$ref": "#/$defs/ContentBlock"}},
                "senderSessionId": ids,
                "recipientSessionId": ids,
                "_meta": meta,
            },
            [],
        ),
        _variant(
            "session_message_chunk",
            {
                "messageId": {"$ref": "#/$defs/MessageId"},
                "content": {"$ref": "#/$defs/ContentBlock"},
                "senderSessionId": ids,
                "recipientSessionId": ids,
                "_meta": meta,
            },
            ["content"],
        ),
    ]
    union = d["SessionUpdate"]["anyOf"]
    d["SessionUpdate"]["anyOf"] = union[:-1] + new + union[-1:]  # the `other` fallback stays last
    _exclude_from_fallback(union[-1], "sessionUpdate", ["subagent_update", "session_message", "session_message_chunk"])
    # "Session States": unknown.
    states = d["StateUpdate"]["anyOf"]
    unknown = {
        "type": "object",
        "properties": {"state": {"type": "string", "const": "unknown"}, "_meta": meta},
        "required": ["state"],
    }
    d["StateUpdate"]["anyOf"] = states[:-1] + [unknown] + states[-1:]
    _exclude_from_fallback(states[-1], "state", ["unknown"])
    return doc


def _exclude_from_fallback(fallback: dict[str, Any], tag: str, values: list[str]) -> None:
    """A variant the overlay adds is no longer "custom or future": the `other` fallback must stop accepting
    its tag, or a malformed instance of it (a chunk without content) would pass as an unknown variant."""
    excluded = fallback.setdefault("not", {"anyOf": []}).setdefault("anyOf", [])
    for value in values:
        excluded.append({"type": "object", "properties": {tag: {"type": "string", "const": value}}, "required": [tag]})


# -- the schema set of one version ----------------------------------------------------------------------------
class SchemaSet:
    """Validators for one protocol version, compiled on first use of each method."""

    def __init__(self, version: int) -> None:
        doc = _load(version, "schema.unstable.json")
        if version == 2:
            doc = overlay_v2(doc)
        self.version = version
        plain = strip_annotations(doc["$defs"])
        self._plain = plain
        self._defs = {False: rewrite_unions(plain, False), True: rewrite_unions(plain, True)}
        self.methods: dict[str, MethodInfo] = {}
        for name, body in doc["$defs"].items():
            method = body.get("x-method") if isinstance(body, dict) else None
            kind = next((k for k, suffix in _KIND_SUFFIX.items() if name.endswith(suffix)), None)
            if method and kind:
                info = self.methods.setdefault(method, MethodInfo(body.get("x-side", "both"), {}))
                info.defs[kind] = name
        self._compiled: dict[tuple[str, bool], Any] = {}
        self._root_keys: dict[tuple[str, str], frozenset[str] | None] = {}
        self._fast: dict[str, Any] = {}  # session/update: envelope (by def name) and variants (by tag)
        self._envelopes: dict[str, Any] = {}
        found = _tagged(plain["SessionUpdate"].get("anyOf") or plain["SessionUpdate"].get("oneOf"))
        assert found is not None, "SessionUpdate is a tagged union"
        self._variants: dict[str, Any] = dict(found[2])
        self._fallback: Any = found[3]  # None for v1's closed union

    def _check(self, key: str, schema: Any, value: Any, prefix: str) -> str | None:
        """Validate fast; on failure, validate again with the precise rewrite to say what is wrong."""
        err = _run(self._validator(key, schema, False), value, prefix)
        if err is None or isinstance(err, Extension):
            return err
        return self._explain(self._validator(key, schema, True), value, prefix, 0) or err

    def _explain(self, fn: Any, value: Any, prefix: str, depth: int) -> str | None:
        """Why `value` fails: a union none of whose shapes fits is explained by the one shape its JSON type
        allows (`{"name": "zed"}` for "an Implementation or null": the Implementation's missing field)."""
        try:
            fn(value)
        except fastjsonschema.JsonSchemaValueException as exc:
            name = exc.name or ""
            path = prefix + name[4:] if name.startswith("data") else prefix
            branches = exc.definition.get(exc.rule) if isinstance(exc.definition, dict) else None
            if exc.rule in ("anyOf", "oneOf") and isinstance(branches, list) and depth < 8:
                consts = [b["const"] for b in branches if isinstance(b, dict) and "const" in b]
                if consts and len(consts) == len(branches):
                    allowed = ", ".join(str(c) for c in consts)
                    return f"{path} must be one of {allowed} (got {short_json(exc.value)})"
                fits = [b for b in branches if self._fits(b, exc.value)]
                if len(fits) == 1:
                    inner = self._explain(self._branch(fits[0]), exc.value, path, depth + 1)
                    if inner is not None:
                        return inner
            return _run(fn, value, prefix)
        except (RecursionError, TypeError, ValueError):
            return _run(fn, value, prefix)
        return None

    def _fits(self, branch: Any, value: Any) -> bool:
        """Whether the branch's declared JSON type (through one $ref) admits the value's type."""
        seen = 0
        while isinstance(branch, dict) and "$ref" in branch and "type" not in branch and seen < 4:
            branch = self._defs[True].get(str(branch["$ref"]).rpartition("/")[2])
            seen += 1
        want = branch.get("type") if isinstance(branch, dict) else None
        if want is None:
            return True
        return _schema_type(value) in (want if isinstance(want, list) else [want])

    def _branch(self, branch: Any) -> Any:
        key = "branch:" + json.dumps(branch, sort_keys=True)
        return self._validator(key, branch, True)

    def _validator(self, key: str, schema: Any, precise: bool) -> Any:
        fn = self._compiled.get((key, precise))
        if fn is None:
            defs = self._defs[precise]
            root = rewrite_unions(schema, precise)
            fn = compile_validator({**root, "$defs": reachable(root, defs)})
            self._compiled[(key, precise)] = fn
        return fn

    def def_name(self, method: str, kind: str) -> str | None:
        info = self.methods.get(method)
        return info.defs.get(kind) if info else None

    def validate(self, method: str, kind: str, value: Any, prefix: str) -> str | None:
        """None when `value` (params or result) is valid for the method's message of this kind, else why not.
        session/update is checked envelope first, then against its variant alone."""
        name = self.def_name(method, kind)
        if name is None:
            return None
        if method == "session/update" and kind == "notification":
            return self._validate_update(name, value, prefix)
        return self._check(name, {"$ref": f"#/$defs/{name}"}, value, prefix)

    def _validate_update(self, name: str, value: Any, prefix: str) -> str | None:
        # The hot path (most frames are updates): compiled validators called directly, the precise
        # rewrite only once one has failed.
        envelope = self._fast.get(name)
        if envelope is None:
            body = self._defs[False][name]
            props = {**body["properties"], "update": {"type": "object", "required": ["sessionUpdate"]}}
            self._envelopes[name] = {**body, "properties": props}
            envelope = self._fast[name] = self._validator(name + "#envelope", self._envelopes[name], False)
        try:
            envelope(value)
        except fastjsonschema.JsonSchemaValueException:
            return self._check(name + "#envelope", self._envelopes[name], value, prefix)
        except (RecursionError, TypeError, ValueError):
            return _run(envelope, value, prefix)
        tag = value["update"]["sessionUpdate"]
        if not isinstance(tag, str):
            return f"{prefix}.update.sessionUpdate must be a string"
        if tag.startswith("_"):
            return None  # an extension: reported as info by the engine, never validated
        fn = self._fast.get(tag)
        if fn is None:
            branch = self._variants.get(tag)
            if branch is None:
                if self._fallback is None:
                    return f"{prefix}.update.sessionUpdate {tag!r} is not a session/update variant of v{self.version}"
                return self._check("update:#other", self._fallback, value["update"], prefix + ".update")
            fn = self._fast[tag] = self._validator("update:" + tag, branch, False)
        try:
            fn(value["update"])
        except fastjsonschema.JsonSchemaValueException:
            return self._check("update:" + tag, self._variants[tag], value["update"], prefix + ".update")
        except (RecursionError, TypeError, ValueError):
            return _run(fn, value["update"], prefix + ".update")
        return None

    def is_variant(self, tag: str) -> bool:
        return tag in self._variants

    def consts(self, name: str) -> frozenset[str]:
        """The string constants a union definition names (its branches' `const`, or their `type` tag)."""
        body = self._plain.get(name)
        branches = (body.get("anyOf") or body.get("oneOf") or []) if isinstance(body, dict) else []
        out: set[str] = set()
        for b in branches:
            if not isinstance(b, dict):
                continue
            value = b.get("const")
            if value is None:
                tag = (b.get("properties") or {}).get("type")
                value = tag.get("const") if isinstance(tag, dict) else None
            if isinstance(value, str):
                out.add(value)
        return frozenset(out)

    def root_keys(self, method: str, kind: str) -> frozenset[str] | None:
        """The keys the params or result of `method` may have at its root: every property any branch of its
        definition declares (through $ref, allOf, anyOf, oneOf). None when a branch is open (an object with no
        declared properties: a custom or future variant), where nothing can be called unknown."""
        key = (method, kind)
        if key not in self._root_keys:
            name = self.def_name(method, kind)
            self._root_keys[key] = self._keys({"$ref": f"#/$defs/{name}"}, set()) if name else None
        return self._root_keys[key]

    def _keys(self, node: Any, seen: set[str]) -> frozenset[str] | None:
        if not isinstance(node, dict):
            return frozenset()
        ref = node.get("$ref")
        if isinstance(ref, str):
            name = ref.rpartition("/")[2]
            if name in seen:
                return frozenset()
            return self._keys(self._plain.get(name), seen | {name})
        out: set[str] = set(node.get("properties") or ())
        parts = [b for word in ("allOf", "anyOf", "oneOf") for b in node.get(word) or ()]
        if not out and not parts and node.get("type") in ("object", None):
            return None  # open: any key may be there
        for part in parts:
            inner = self._keys(part, seen)
            if inner is None:
                return None
            out |= inner
        return frozenset(out)

    def properties(self, name: str) -> frozenset[str]:
        """The property names a definition declares (empty when it has none or is unknown)."""
        body = self._plain.get(name)
        props = body.get("properties") if isinstance(body, dict) else None
        return frozenset(props) if isinstance(props, dict) else frozenset()

    def open_enums(self) -> dict[str, frozenset[str]]:
        """v2's open enums that sessions.py judges: site -> defined values (v1's closed ones fail the schema)."""
        if self.version != 2:
            return {}
        names = {
            "tool-kind": "ToolKind",
            "tool-status": "ToolCallStatus",
            "plan-priority": "PlanEntryPriority",
            "plan-status": "PlanEntryStatus",
            "auth": "AuthMethod",
        }
        return {site: self.consts(name) for site, name in names.items()}


def _schema_type(value: Any) -> str:
    """The JSON Schema `type` name of a parsed value (integer apart from number, unlike engine's message words)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    names: dict[type, str] = {str: "string", list: "array", dict: "object"}
    return names.get(type(value), "object")


_REQUIRED = re.compile(r"^(\S+) must contain \[(.*)\] properties$")


def _sentence(msg: str) -> str:
    """fastjsonschema's wording, for people: which required field is missing, what a union wanted."""
    m = _REQUIRED.match(msg)
    if m:
        fields = re.findall(r"'([^']*)'", m.group(2))
        names = ", ".join(f"`{f}`" for f in fields)
        return f"{m.group(1)} is missing the required field{'s' if len(fields) > 1 else ''} {names}"
    msg = msg.replace(" cannot be validated by any definition", " matches none of the shapes it may take")
    return re.sub(
        r" must be valid exactly by one definition \((\d+) matches found\)",
        r" must match exactly one of its shapes (it matches \1)",
        msg,
    )


def _run(fn: Any, value: Any, prefix: str) -> str | None:
    try:
        fn(value)
    except fastjsonschema.JsonSchemaValueException as exc:
        msg = exc.message
        msg = prefix + msg[4:] if msg.startswith("data") else msg
        tag = _extension_tag(exc.value, exc.rule)
        if tag is not None:
            return Extension(f"{msg.split(' ', 1)[0]} variant {tag}")
        msg = _sentence(msg)
        if exc.rule not in ("required", "additionalProperties"):  # those name what is missing or extra
            msg += f" (got {short_json(exc.value)})"
        return msg
    except (RecursionError, TypeError, ValueError) as exc:  # pathological values (depth, huge numbers)
        return f"{prefix} could not be validated ({type(exc).__name__})"
    return None


class Extension(str):
    """Not a violation: the value that failed is a `_`-prefixed (custom) variant of a closed union."""


TAG_KEYS = ("type", "sessionUpdate", "kind", "outcome", "state", "status", "mode")


def _extension_tag(value: Any, rule: str | None) -> str | None:
    """The `_`-prefixed discriminator of a failing object, if it has one (only the fallback of a tagged
    union can take it, so its failure is the union's being closed to extensions)."""
    if isinstance(value, dict):
        for key in TAG_KEYS:
            tag = value.get(key)
            if isinstance(tag, str) and tag.startswith("_"):
                return f"{key}={tag}"
    elif isinstance(value, str) and value.startswith("_") and rule in ("anyOf", "oneOf", "const", "enum"):
        return value  # a closed enum of strings (a v1 stop reason) given a custom value
    return None


def compile_validator(definition: dict[str, Any]) -> Any:
    """fastjsonschema's validator for `definition`, from the store when it holds one made by this Python
    and this fastjsonschema, with these options, for this very schema (in its own key order: the generated
    code checks properties in that order, which decides the error it reports). An entry starts with the
    digest of its key and its code, so a damaged entry, or one filed under another key, is compiled again
    and replaced. Formats are annotations in JSON Schema 2020-12 unless a validator opts in (peers send
    relative "uris"; int32, uint64... are Rust type hints): none is asserted."""
    store = validator_store.store
    if store is None:
        return fastjsonschema.compile(definition, use_formats=False)
    schema = json.dumps(definition, separators=(",", ":")).encode()
    salt = importlib.util.MAGIC_NUMBER + f"{fastjsonschema.VERSION} use_formats=False\0".encode()
    key = hashlib.sha256(salt + schema).hexdigest()
    data = store.get(key)
    if data is not None and data[:32] == hashlib.sha256(key.encode() + data[32:]).digest():
        try:
            return _load_validator(marshal.loads(data[32:]))
        except Exception:  # written by this code, yet not loadable: made again below, and replaced
            pass
    code = compile(fastjsonschema.compile_to_code(definition, use_formats=False), "<validator>", "exec")
    payload = marshal.dumps(code)
    store.put(key, hashlib.sha256(key.encode() + payload).digest() + payload)
    return _load_validator(code)


def _load_validator(code: Any) -> Any:
    namespace: dict[str, Any] = {}
    exec(code, namespace)
    return namespace["validate"]


@cache
def schema_set(version: int) -> SchemaSet:
    """The shared SchemaSet of a known version (compiled validators are cached inside it)."""
    return SchemaSet(version)


@cache
def methods_of_other_versions(version: int) -> frozenset[str]:
    """Methods some other known version defines: calling one is a version mix-up, not an extension."""
    out: set[str] = set()
    for v in KNOWN_VERSIONS:
        if v != version:
            out.update(_load(v, "meta.unstable.json").get("agentMethods", {}).values())
            out.update(_load(v, "meta.unstable.json").get("clientMethods", {}).values())
    return frozenset(out - set(schema_set(version).methods))
