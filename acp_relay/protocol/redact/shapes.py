"""Redaction's value patterns: credentials recognizable by their form wherever they stand (API-key
prefixes, JWTs, PEM blocks, Bearer/Basic, URL userinfo and query), the free-text and command-line rules, and
the byte literals that rule them out cheaply (sans-I/O)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .keys import PLACEHOLDER, secret_key

_TOKEN = (
    r"(?<![A-Za-z0-9])(?:"
    r"sk-[A-Za-z0-9_-]{16,}"
    r"|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|glpat-[A-Za-z0-9_-]{20,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|npm_[A-Za-z0-9]{36}"
    r"|hf_[A-Za-z0-9]{30,}"
    r"|A[KS]IA[0-9A-Z]{16}"
    r"|AIza[0-9A-Za-z_-]{35}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"
    r")"
)
_PEM = r"-----BEGIN (?P<label>[A-Z0-9 ]*PRIVATE KEY)-----(?s:.*?)(?:-----END (?P=label)-----|\Z)"
# An Authorization scheme and its credential: kept the scheme, replaced the credential (which must look like
# one: a digit or symbol, or two capitals, so "Basic understanding" stays prose).
_SCHEME = r"(?i:\b(?:bearer|basic)[ \t]+)(?=\S*[0-9._~+/=-]|(?:\S*[A-Z]){2})[A-Za-z0-9._~+/=-]{8,}"
_URL = r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>\\]+"
_SHAPES = re.compile(f"(?P<token>{_TOKEN})|(?P<pem>{_PEM})|(?P<scheme>{_SCHEME})|(?P<url>{_URL})")
_SCHEME_WORD = re.compile(r"(?i)\b(?:bearer|basic)[ \t]+")
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^/?#@]*)@")
_QUERY = re.compile(r"([?&;])([^=&#;?]+)=([^&#;]*)")
# What a string must hold for _SHAPES to match anywhere in it (a cheap test that rules out most strings).
_STR_ANCHOR = re.compile(
    r"sk-|[sr]k_(?:live|test)_|gh[pousr]_|github_pat_|glpat-|xox[abposr]-|npm_|hf_|A[KS]IA|AIza|eyJ|-----BEGIN"
    r"|(?i:bearer|basic)[ \t]|://[^\s\"'/@]*@|://[^\s\"'?]*\?[^\s\"']*="
)
# key=value and key: value in free text (stderr lines, command lines): the name must look like a credential.
_ASSIGN = re.compile(
    r"(?<![A-Za-z0-9])([A-Za-z0-9_.-]*?(?:token|secret|passw(?:or)?d|passphrase|api[-_]?key|auth(?:orization)?"
    r"|credentials?|cookie|private[-_]?key|access[-_]?key))([\"']?[ \t]*[=:][ \t]*[\"']?)([^\s\"',;&]+)",
    re.IGNORECASE,
)


# The byte anchors of the shapes above: a string with none of them holds no shape that a byte scan can find.
# The rarer shapes (npm_, hf_, ghu_, ghr_, ASIA, sk_live_, Basic) have none: they are found in every string of
# a frame something else sends to the walk, not by themselves.
SHAPE_LITERALS = (
    b"sk-",
    b"eyJ",
    b"ghp_",
    b"gho_",
    b"ghs_",
    b"_pat_",
    b"glpat-",
    b"xox",
    b"AKIA",
    b"AIza",
    b"-----BEGIN",
    b"earer ",
    b"://",
)
# Keys the structural rules look for in any message: a `_meta`, a `headers`, and any \\u escape (which may
# spell either).
WATCHED_LITERALS = (b"_meta", b'"headers"', b"\\u", *SHAPE_LITERALS)
_finders: dict[tuple[bytes, ...], Any] = {}


def any_literal_in(data: bytes | bytearray | memoryview, literals: tuple[bytes, ...]) -> bool:
    """Whether any of the literals occurs in the bytes: one pass over them, whatever their number.

    The recorder asks this of every chunk of a flood. A literal `in` per pattern cost 0.6 ns a byte each
    (10.6 ns for the 16 of WATCHED_LITERALS, 2 us a 200 B frame) and a regex alternation as much; an
    Aho-Corasick automaton in leftmost-first mode gets a SIMD prefilter (ahocorasick_rs, the Rust crate's
    binding) and costs about 0.1 ns a byte, with the GIL released. Built on first use: the relay process
    imports this module, but only the recorder child scans."""
    finder = _finders.get(literals)
    if finder is None:
        import ahocorasick_rs

        finder = _finders[literals] = ahocorasick_rs.BytesAhoCorasick(
            list(literals), matchkind=ahocorasick_rs.MATCHKIND_LEFTMOST_FIRST
        )
    # Leftmost-first reports the leftmost occurrence of any literal: the list is empty only when none occurs.
    return bool(finder.find_matches_as_indexes(data))


def shapes_maybe_in(data: bytes | bytearray | memoryview) -> bool:
    """Whether the bytes may hold a credential shape (one of SHAPE_LITERALS): False rules the common ones
    out."""
    return any_literal_in(data, SHAPE_LITERALS)


def _url(url: str) -> tuple[str, int]:
    n = 0
    m = _USERINFO.match(url)
    if m and m.group(2) and m.group(2) != PLACEHOLDER:
        url = m.group(1) + PLACEHOLDER + "@" + url[m.end() :]
        n += 1
    if "?" in url:
        head, _, tail = url.partition("?")

        def query(q: re.Match[str]) -> str:
            nonlocal n
            if secret_key(q.group(2)) and q.group(3) and q.group(3) != PLACEHOLDER:
                n += 1
                return f"{q.group(1)}{q.group(2)}={PLACEHOLDER}"
            return q.group()

        url = head + "?" + _QUERY.sub(query, "&" + tail)[1:]
    return url, n


def _case_variants(word: str) -> list[bytes]:
    out = [b""]
    for ch in word:
        out = [o + c.encode() for o in out for c in {ch.lower(), ch.upper()}]
    return out


# Literals one of which a string must hold for _STR_ANCHOR to match in it (a superset: every branch of the
# anchor needs one of them), searched in one Aho-Corasick pass when a string is too long for the regex.
_STR_LITERALS = (
    *(b"sk-", b"k_live_", b"k_test_", b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_", b"github_pat_", b"glpat-"),
    *(b"xox", b"npm_", b"hf_", b"AKIA", b"ASIA", b"AIza", b"eyJ", b"-----BEGIN", b"://"),
    *(w + sep for w in _case_variants("bearer") + _case_variants("basic") for sep in (b" ", b"\t")),
)
LONG_TEXT = 1 << 16  # characters past which the anchor regex (about 60 ns a character) gives way to the literals


def shape_maybe_in_text(text: str) -> bool:
    """Whether a string may hold a credential shape (every shape's anchor, the rarer ones too): False rules
    them all out. The literals first (one pass, about 0.1 ns a byte; the anchor regex costs 60 ns a
    character)."""
    return any_literal_in(text.encode("utf-8", "surrogatepass"), _STR_LITERALS) and _STR_ANCHOR.search(text) is not None


def _shape_text(text: str) -> tuple[str, int]:
    """The string with each credential-shaped part replaced, and how many there were."""
    if len(text) > LONG_TEXT and not any_literal_in(text.encode("utf-8", "surrogatepass"), _STR_LITERALS):
        return text, 0  # a big file or terminal output with none of the anchors' literals: 0.8 s -> 0.03 s
    if _STR_ANCHOR.search(text) is None:
        return text, 0
    n = 0

    def one(m: re.Match[str]) -> str:
        nonlocal n
        if m.group("url") is not None:
            new, hits = _url(m.group())
            n += hits
            return new
        if m.group("scheme") is not None:
            n += 1
            word = _SCHEME_WORD.match(m.group())
            return (word.group() if word else "") + PLACEHOLDER
        n += 1
        return PLACEHOLDER

    out = _SHAPES.sub(one, text)
    return out, n


def redact_text(text: str) -> tuple[str, int]:
    """A line of free text (the agent's stderr, a command line): shapes, and `name=value` / `name: value`
    where the name looks like a credential (API_KEY=..., "password": "...", Authorization: ...)."""
    out, n = _shape_text(text)

    def assign(m: re.Match[str]) -> str:
        nonlocal n
        if m.group(3).startswith(PLACEHOLDER) or m.group(3).lower() in ("bearer", "basic"):
            return m.group()
        n += 1
        return m.group(1) + m.group(2) + PLACEHOLDER

    out = _ASSIGN.sub(assign, out)
    return out, n


def redact_argv(argv: Sequence[Any]) -> tuple[list[Any], int]:
    """A command line: `--api-key X` and `--token=X` (any credential-like flag), `NAME=secret`, and every
    argument's shapes and URLs. Items that are not strings are kept."""
    out: list[Any] = []
    n = 0
    secret_next = False
    for arg in argv:
        if not isinstance(arg, str):
            out.append(arg)
            secret_next = False
            continue
        if secret_next and arg and not arg.startswith("-"):
            out.append(PLACEHOLDER)
            n += 1
            secret_next = False
            continue
        secret_next = False
        if arg.startswith("-") and len(arg) > 1:
            name, eq, value = arg.lstrip("-").partition("=")
            if secret_key(name):
                if eq:
                    out.append(arg[: len(arg) - len(value)] + PLACEHOLDER if value else arg)
                    n += bool(value)
                else:
                    out.append(arg)
                    secret_next = True
                continue
        new, hits = redact_text(arg)
        out.append(new)
        n += hits
    return out, n
