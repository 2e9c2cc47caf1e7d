"""Per-method validation of params and results against the official ACP JSON Schemas (shipped beside this
module, Apache-2.0, see schemas/LICENSE and schemas/NOTICE): each version's schema.unstable.json, a superset
of its schema.json that requires nothing the stable one does not (tests/test_check_schema.py checks it), so
an agent keeping to the stable protocol gets no schema finding the stable schema would not give.

Validating a whole frame against the top-level schema proves almost nothing (every method falls through to
the extension fallbacks), so each message is validated against the `$defs` entry whose `x-method` and kind
(request, notification, response) match. The validator is jsonschema-rs (Rust, compiled per definition
in about a millisecond; chosen by measurement, see tools/validator_bench.py). session/update is checked
envelope first, then against the variant its `sessionUpdate` names, so a finding is about that variant.
"""

from __future__ import annotations

import base64
import binascii
import copy
import itertools
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import jsonschema_rs

from .. import vocab
from ..jsonrpc import short_json
from ..words import counted

_KIND_SUFFIX = {"request": "Request", "notification": "Notification", "response": "Response"}

KNOWN_VERSIONS = (1, 2)


@dataclass(frozen=True, slots=True)
class MethodInfo:
    """What the schema says about one method: which side handles it and which message kinds it has."""

    side: str  # agent (sent by the client) | client (sent by the agent) | both | protocol | proxy
    defs: dict[str, str]  # kind -> $defs name


def _load(version: int, name: str) -> Any:
    return json.loads(resources.files(__package__).joinpath("schemas", f"v{version}", name).read_text("utf-8"))


def _tag(branch: Any) -> tuple[str, Any] | None:
    """(key, const) when the branch is an object that requires key == const."""
    if not isinstance(branch, dict) or branch.get("type") != "object":
        return None
    for key, sub in (branch.get("properties") or {}).items():
        if isinstance(sub, dict) and "const" in sub and key in branch.get("required", ()):
            return key, sub["const"]
    return None


def _variants(union: Any, where: str) -> tuple[dict[str, str], str | None]:
    """A tagged union's branches by tag, and its untagged fallback (None when it has none), as JSON pointers
    below `where`."""
    variants: dict[str, str] = {}
    fallback = None
    for i, branch in enumerate(union):
        tag = _tag(branch)
        if tag is None:
            fallback = f"{where}/{i}"
        else:
            variants[tag[1]] = f"{where}/{i}"
    return variants, fallback


# -- what the lifecycle rules report instead of the v2 schema ------------------------------------------------
# The v2 draft requires `messageId` on the prompt result and on message updates and chunks; its absence is
# reported once, by the lifecycle rule that cites the Prompt Lifecycle page (lifecycle.accept-message-id,
# lifecycle.update-message-id), not a second time as a schema error. Its type is still the schema's.
_MESSAGE_ID_BY_LIFECYCLE = ("PromptResponse", "ContentChunk", "UserMessage", "AgentMessage", "AgentThought")


def overlay_v2(doc: dict[str, Any]) -> dict[str, Any]:
    """The v2 document with `messageId`'s presence left to the lifecycle rules (see above): a copy."""
    doc = copy.deepcopy(doc)
    for name in _MESSAGE_ID_BY_LIFECYCLE:
        body = doc["$defs"][name]
        body["required"] = [r for r in body.get("required", []) if r != "messageId"]
    return doc


# -- the schema set of one version ----------------------------------------------------------------------------
class SchemaSet:
    """Validators for one protocol version, compiled on first use of each method."""

    def __init__(self, version: int) -> None:
        doc = _load(version, "schema.unstable.json")
        if version == 2:
            doc = overlay_v2(doc)
        self.version = version
        self._plain: dict[str, Any] = doc["$defs"]
        self.methods: dict[str, MethodInfo] = {}
        for name, body in self._plain.items():
            method = body.get("x-method") if isinstance(body, dict) else None
            kind = next((k for k, suffix in _KIND_SUFFIX.items() if name.endswith(suffix)), None)
            if method and kind:
                side = body.get("x-side", "both")
                info = self.methods.setdefault(method, MethodInfo(side, {}))
                if info.side != side:  # mcp/message: the request is the client's to handle, the notification
                    info = self.methods[method] = MethodInfo("both", info.defs)  # the agent's
                info.defs[kind] = name
        for m in vocab.METHODS.values():  # dropped by 2.4.0: a recording made before is judged by side only
            if version in m.former:
                self.methods.setdefault(m.name, MethodInfo(m.side.value, {}))
        self._compiled: dict[str, Any] = {}
        self._root_keys: dict[tuple[str, str], frozenset[str] | None] = {}
        union = self._plain["SessionUpdate"]
        word = "anyOf" if "anyOf" in union else "oneOf"
        self._variants, self._fallback = _variants(union[word], f"/$defs/SessionUpdate/{word}")  # v1: no fallback
        defs = dict(self._plain)
        for name in self._plain:  # session/update's envelopes: `update` only an object with a tag
            body = self._plain[name]
            if isinstance(body, dict) and body.get("x-method") == vocab.UPDATE:
                props = {**body["properties"], "update": {"type": "object", "required": ["sessionUpdate"]}}
                defs[f"envelope.{name}"] = {**body, "properties": props}
        # One registry for the document: each validator compiles what its definition reaches, and no more.
        self._uri = f"urn:acp-relay:schema:v{version}"
        self._registry = jsonschema_rs.Registry([(self._uri, {"$id": self._uri, "$defs": defs})])

    def _check(self, pointer: str, value: Any, prefix: str) -> str | None:
        """None when `value` is valid against the schema at `pointer` in the document, else what is wrong with
        it (the first error, in the schema's order)."""
        validator = self._compiled.get(pointer)
        if validator is None:
            validator = self._compiled[pointer] = jsonschema_rs.Draft202012Validator(
                {"$ref": self._uri + "#" + pointer},
                validate_formats=False,
                registry=self._registry,
                keywords={"contentEncoding": _Base64},
            )
        try:
            if validator.is_valid(value):
                return None
            return _explain(list(itertools.islice(validator.iter_errors(value), 64)), prefix)
        except (RecursionError, TypeError, ValueError) as exc:  # pathological values (depth, non-JSON types)
            return f"{prefix} could not be validated ({type(exc).__name__})"

    def def_name(self, method: str, kind: str) -> str | None:
        info = self.methods.get(method)
        return info.defs.get(kind) if info else None

    def validate(self, method: str, kind: str, value: Any, prefix: str) -> str | None:
        """None when `value` (params or result) is valid for the method's message of this kind, else why not.
        session/update is checked envelope first, then against its variant alone."""
        name = self.def_name(method, kind)
        if name is None:
            return None
        if method == vocab.UPDATE and kind == "notification":
            return self._validate_update(name, value, prefix)
        return self._check(f"/$defs/{name}", value, prefix)

    def _validate_update(self, name: str, value: Any, prefix: str) -> str | None:
        # The envelope first, then the update against its own variant, so the finding is about that
        # variant (or says the tag is unknown, or an extension's).
        err = self._check(f"/$defs/envelope.{name}", value, prefix)
        if err is not None:
            return err
        tag = value["update"]["sessionUpdate"]
        if not isinstance(tag, str):
            return f"{prefix}.update.sessionUpdate must be a string"
        if tag.startswith("_"):
            return None  # an extension: reported as info by the engine, never validated
        branch = self._variants.get(tag)
        if branch is None:
            if self._fallback is None:
                return f"{prefix}.update.sessionUpdate {tag!r} is not a {vocab.UPDATE} variant of v{self.version}"
            return self._check(self._fallback, value["update"], prefix + ".update")
        return self._check(branch, value["update"], prefix + ".update")

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


class _Base64:
    """`contentEncoding: base64` asserted (image and audio data): 2020-12 makes it an annotation, but a
    peer sending undecodable data is worth a finding, as check has always reported."""

    def __init__(self, parent_schema: Any, value: Any, schema_path: Any) -> None:
        self.base64 = value == "base64"

    def validate(self, instance: Any) -> None:
        if self.base64 and isinstance(instance, str):
            try:
                base64.b64decode(instance)
            except (binascii.Error, ValueError):
                raise ValueError("not base64") from None


def _path(prefix: str, where: Any) -> str:
    return prefix + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in where)


def _explain(errors: list[Any], prefix: str, depth: int = 0) -> str:
    """A sentence people can act on for jsonschema-rs's error: where, what failed, and the value (never the
    library's own message, which quotes the whole value however long). A union none of whose shapes fits
    is explained by the one shape its tag or JSON type selects (`{"name": "zed"}` for "an Implementation
    or null": the Implementation's missing field). `errors` are one validation's, in the library's order (the
    schema's): the first is explained, with every missing field beside it when it is a missing field."""
    error = errors[0]
    kind, path = error.kind, _path(prefix, error.instance_path)
    name = type(kind).__name__
    if name in ("AnyOf", "OneOfNotValid", "Constant", "Enum"):
        tag = _extension_tag(error.instance, name)
        if tag is not None:
            return Extension(f"{path} variant {tag}")
    if name in ("AnyOf", "OneOfNotValid"):
        branches = [list(b) for b in kind.context]
        consts = [b[0].kind.expected_value for b in branches if len(b) == 1 and type(b[0].kind).__name__ == "Constant"]
        if branches and len(consts) == len(branches):
            return f"{path} must be one of {', '.join(map(str, consts))} (got {short_json(error.instance)})"
        where = list(error.instance_path)
        fits = [b for b in branches if b and not any(_rules_out(e, where) for e in b)]
        said = {_explain(b, prefix, depth + 1) for b in fits} if depth < 8 else set()
        if len(said) == 1:
            return said.pop()
        if len(said) > 1:  # what every shape the value may take says alike (a missing tag, mostly)
            each = [[_explain([e], prefix, depth + 1) for e in b] for b in fits]
            common = set(each[0]).intersection(*each[1:])
            if common:
                return next(x for x in each[0] if x in common)
        wanted = [
            t
            for b in branches
            for e in b
            if type(e.kind).__name__ == "Type" and list(e.instance_path) == where
            for t in e.kind.types
        ]
        if not fits and len(wanted) >= len(branches):  # every shape wants another JSON type
            return f"{path} must be {' or '.join(dict.fromkeys(wanted))} (got {short_json(error.instance)})"
        return f"{path} matches none of the shapes it may take (got {short_json(error.instance)})"
    if name == "Required":
        at = list(error.instance_path)
        missing = sorted(
            {e.kind.property for e in errors if type(e.kind).__name__ == "Required" and list(e.instance_path) == at}
        )
        s = "s" if len(missing) > 1 else ""
        return f"{path} is missing the required field{s} " + ", ".join(f"`{f}`" for f in missing)
    if name == "AdditionalProperties":
        return f"{path} has properties the schema does not allow: {', '.join(f'`{k}`' for k in kind.unexpected)}"
    if name == "OneOfMultipleValid":
        return f"{path} must match exactly one of its shapes (it matches several; got {short_json(error.instance)})"
    what = {
        "Type": lambda: "must be " + " or ".join(kind.types),
        "Constant": lambda: f"must be {short_json(kind.expected_value)}",
        "Enum": lambda: "must be one of " + ", ".join(map(str, kind.options)),
        "Minimum": lambda: f"must be >= {kind.limit}",
        "Maximum": lambda: f"must be <= {kind.limit}",
        "MinItems": lambda: f"must have at least {counted(kind.limit, 'item')}",
        "MinLength": lambda: f"must be at least {counted(kind.limit, 'character')} long",
        "Custom": lambda: "must be encoded by base64" if kind.keyword == "contentEncoding" else "is not valid",
    }.get(name, lambda: f"fails the schema's `{list(error.schema_path)[-1]}`")()
    return f"{path} {what} (got {short_json(error.instance)})"


def _rules_out(error: Any, where: list[Any]) -> bool:
    """Whether a branch's error shows the branch is not the value's shape: its tag differs (a `const` one
    level down), its JSON type differs, or it is the fallback that excludes the known tags (`not`)."""
    name, at = type(error.kind).__name__, list(error.instance_path)
    return (name == "Constant" and at[:-1] == where and len(at) == len(where) + 1) or (
        name in ("Type", "Not") and at == where
    )


class Extension(str):
    """Not a violation: the value that failed is a `_`-prefixed (custom) variant of a closed union."""


TAG_KEYS = ("type", "sessionUpdate", "kind", "outcome", "state", "status", "mode")


def _extension_tag(value: Any, rule: str) -> str | None:
    """The `_`-prefixed discriminator of a failing object, if it has one (only the fallback of a tagged
    union can take it, so its failure is the union's being closed to extensions)."""
    if isinstance(value, dict):
        for key in TAG_KEYS:
            tag = value.get(key)
            if isinstance(tag, str) and tag.startswith("_"):
                return f"{key}={tag}"
    elif isinstance(value, str) and value.startswith("_"):
        return value  # a closed enum of strings (a v1 stop reason) given a custom value
    return None


@cache
def schema_set(version: int) -> SchemaSet:
    """The shared SchemaSet of a known version (compiled validators are cached inside it)."""
    return SchemaSet(version)


@cache
def methods_of_other_versions(version: int) -> frozenset[str]:
    """Methods some other known version defines: calling one is a version mix-up, not an extension. Read from
    the schemas' `x-method`s (the SDK package ships no meta file; the old one named the same methods)."""
    out = {m for v in KNOWN_VERSIONS if v != version for m in schema_set(v).methods}
    return frozenset(out - set(schema_set(version).methods))


@cache
def _own_keys(version: int) -> frozenset[str]:
    """The initialize request's and result's fields only this version declares (v1 `clientCapabilities`,
    `agentInfo`; v2 `capabilities`, `info`)."""
    mine = schema_set(version)
    out: set[str] = set()
    for name in ("InitializeRequest", "InitializeResponse"):
        others = {k for v in KNOWN_VERSIONS if v != version for k in schema_set(v).properties(name)}
        out |= mine.properties(name) - others
    return frozenset(out)


def _as_version(value: Any) -> int | None:
    """A protocolVersion that is not an integer but names one ("1", 1.0), or None."""
    if isinstance(value, bool) or not isinstance(value, (str, float)):
        return None
    try:
        number = float(value)
        whole = int(number)
    except (ValueError, OverflowError):
        return None
    return whole if whole == number and whole in KNOWN_VERSIONS else None


def shown_version(params: Any, result: Any, answered: Any, hint: int | None) -> tuple[int | None, str]:
    """The version to judge an initialize exchange's connection by, and how the messages show it ("": the
    answer, as negotiated). An answer that is no version this checker knows (a string, a float, null, missing,
    an unknown integer): the fields only one version declares, else the version the client asked for, else the
    answer read as a number, else the version the recorder stored; (None, ""): nothing shows one, so only the
    JSON-RPC rules apply. A known answer newer than the client asked for, in an exchange whose fields are all
    the asked version's: the asked one (both sides speak it)."""
    keys = {k for obj in (params, result) if isinstance(obj, dict) for k in obj}
    shaped = [v for v in KNOWN_VERSIONS if keys & _own_keys(v)]
    fields = shaped[0] if len(shaped) == 1 else None
    asked = params.get("protocolVersion") if isinstance(params, dict) else None
    asked = asked if type(asked) is int and asked in KNOWN_VERSIONS else None
    if type(answered) is int and answered in KNOWN_VERSIONS:
        if asked is not None and asked < answered and fields == asked:
            return asked, f"the version the client asked for: the initialize messages' fields are v{asked}'s"
        return answered, ""
    if fields is not None:
        return fields, f"the initialize messages' fields are v{fields}'s"
    if asked is not None:
        return asked, "the version the client asked for"
    read = _as_version(answered)
    if read is not None:
        return read, "the version the answer names"
    if hint in KNOWN_VERSIONS:
        return hint, "the version the recorder stored"
    return None, ""
