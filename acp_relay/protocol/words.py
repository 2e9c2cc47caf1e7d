"""Counts in sentences: the one helper every message that prints a count uses (render/text.py re-exports
it), here so that protocol/ and transport/, which import nothing above protocol, use the same one."""

from __future__ import annotations


def counted(n: object, noun: str, plural: str | None = None, *, grouped: bool = False) -> str:
    """'1 turn', '2 turns' ('1 entry', '2 entries' with `plural`): counts read as English (a recorded count
    that is not a number is shown as it came, with the plural). `grouped` writes
    thousands apart ('100,000 frames')."""
    number = f"{n:,}" if grouped else f"{n}"
    return f"{number} {noun if n == 1 else plural or noun + 's'}"
