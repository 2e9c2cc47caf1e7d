"""The quantities people type on the command line: durations (`show --since`, `prune --older-than`) and
sizes (`prune --max-size`). One grammar each, so every option reads them alike."""

from __future__ import annotations

import re

_DURATION = re.compile(r"^\s*\+?(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h|d|w)?\s*$", re.IGNORECASE)
_SECONDS = {None: 1.0, "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?B?)\s*$", re.IGNORECASE)
_POWERS = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4}


def duration_seconds(text: str) -> float | None:
    """'12.5', '90s', '250ms', '2m', '12h', '30d', '2w' (no unit: seconds) -> seconds; None if it is not one."""
    m = _DURATION.match(text)
    if not m:
        return None
    unit = m.group(2)
    return float(m.group(1)) * _SECONDS[unit.lower() if unit else None]


def parse_duration(text: str) -> float:
    """A duration that must say its unit ('30d', '12h', '90m', '45s'), for options that delete: a bare `30`
    once read as seconds deleted every connection. ValueError with an example of what works."""
    seconds = duration_seconds(text)
    m = _DURATION.match(text)
    if seconds is None or m is None:
        raise ValueError(f"not a duration: {text!r} (try 30d, 12h, 90m)")
    if m.group(2) is None:
        raise ValueError(f"{text!r} has no unit: say 30d, 12h, 90m or 45s")
    return seconds


def parse_size(text: str) -> int:
    """'500MB', '2G', '100KiB', '4096B' -> bytes (KB = 1000, KiB = 1024); a bare number is refused (it was
    read as bytes, and `--max-size 1000` emptied the database)."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"not a size: {text!r} (try 500MB, 2GB)")
    if not m.group(2) and not m.group(3):
        raise ValueError(f"{text!r} has no unit: say 500MB, 2GB or 4096B")
    base = 1024 if m.group(3).lower().startswith("i") else 1000
    return int(float(m.group(1)) * base ** _POWERS[m.group(2).upper()])
