"""What the stored copy must not keep: credentials that editors, agents and their command lines carry.

Only the recorded copy is redacted; the forwarded bytes are never touched. One pure package and one entry
point per thing stored: `redact_frame` for a frame's bytes (the recorder, `import` and `export` all call
it), `redact_text` for a line of the agent's stderr, `redact_argv` for a command line. Each returns the
copy to store and how many values it replaced with PLACEHOLDER. Sans-I/O: bytes and dicts in and out.

Rules (docs/security.md lists them for users):
- by place: mcpServers env and header values, args (as a command line) and URL; terminal/create env values
  and args; every value of an authenticate / auth/login request (but methodId) and of its result; the
  values of any `headers` object or list anywhere;
- by key name: credential-like keys (SECRET_KEY) inside any `_meta`, and anywhere in the params of
  extension methods (`_vendor/...`) and of methods ACP does not define; an object under such a key is
  descended into (gemini-cli's `"api-key": {"provider": "google"}` holds no secret), not replaced;
- by shape, in every string: API-key prefixes (sk-, ghp_, xoxb-, AKIA...), JWTs, private-key PEM blocks,
  Bearer/Basic credentials, URL userinfo and credential-named query parameters. A prompt keeps its text;
  only the key-shaped token inside it is replaced.

The package, one module per part: keys (which methods and key names carry credentials), shapes (credentials
known by their form, free text, command lines, the byte literals), walk (the structural rules over a parsed
message), policy (one relay's rules and the cheap tests before any walk), frame (a frame's bytes, a line).
"""

from __future__ import annotations

from .frame import WITHHELD, redact_frame, redact_line
from .keys import PLACEHOLDER, secret_key
from .policy import SHAPE_SCAN_MAX, WALK_BUDGET, WALK_FROM, Policy, watched_keys_in
from .shapes import (
    SHAPE_LITERALS,
    WATCHED_LITERALS,
    any_literal_in,
    redact_argv,
    redact_text,
    shape_maybe_in_text,
    shapes_maybe_in,
)

__all__ = [
    "PLACEHOLDER",
    "SHAPE_LITERALS",
    "SHAPE_SCAN_MAX",
    "WALK_BUDGET",
    "WALK_FROM",
    "WATCHED_LITERALS",
    "WITHHELD",
    "Policy",
    "any_literal_in",
    "redact_argv",
    "redact_frame",
    "redact_line",
    "redact_text",
    "secret_key",
    "shape_maybe_in_text",
    "shapes_maybe_in",
    "watched_keys_in",
]
