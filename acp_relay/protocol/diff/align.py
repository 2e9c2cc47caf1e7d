"""Sequence alignment for `acp-relay diff`: Myers' O(ND) algorithm in linear space, and unified hunks.

Sessions hold up to millions of frames, so the table-filling diff (quadratic in time or memory) is out.
Myers finds a shortest edit script in O((N+M)·D) time, D being the number of edits: two runs of the same
agent differ in a handful of places, so D is small and the cost is close to reading both sequences. The
linear-space variant finds the "middle snake" and recurses on both halves, keeping memory at O(N+M).

Items are compared as small ints (`intern`): equal items get equal numbers, so the inner loop compares
ints whatever the items are. When an alignment would need more than `max_edits` edits in one region
(two unrelated sessions), that region is reported as replaced as a whole instead of aligned: the result
is still a correct edit script, and the time stays bounded.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

MAX_EDITS = 2000  # per region; beyond it the region is reported replaced (see the module docstring)

Opcode = tuple[str, int, int, int, int]  # (tag, a_lo, a_hi, b_lo, b_hi), tags as difflib's


def intern(a: Sequence[Hashable], b: Sequence[Hashable]) -> tuple[list[int], list[int]]:
    """Both sequences as ints, equal items as equal ints."""
    table: dict[Hashable, int] = {}
    ia = [table.setdefault(x, len(table)) for x in a]
    ib = [table.setdefault(x, len(table)) for x in b]
    return ia, ib


def _middle_snake(
    a: Sequence[int], alo: int, ahi: int, b: Sequence[int], blo: int, bhi: int, limit: int
) -> tuple[int, int, int, int] | None:
    """The middle snake of a[alo:ahi] vs b[blo:bhi] as (x, y, u, v) relative offsets; None past `limit`."""
    n, m = ahi - alo, bhi - blo
    delta = n - m
    odd = delta & 1
    size = n + m + 3
    off = size // 2 + 1
    vf = [0] * (2 * off + 2)
    vb = [0] * (2 * off + 2)
    for d in range((n + m + 1) // 2 + 1):
        if d > limit:
            return None
        for k in range(-d, d + 1, 2):  # forward
            if k == -d or (k != d and vf[off + k - 1] < vf[off + k + 1]):
                x = vf[off + k + 1]
            else:
                x = vf[off + k - 1] + 1
            y = x - k
            x0, y0 = x, y
            while x < n and y < m and a[alo + x] == b[blo + y]:
                x += 1
                y += 1
            vf[off + k] = x
            if odd and -(d - 1) <= delta - k <= d - 1 and x + vb[off + delta - k] >= n:
                return x0, y0, x, y
        for k in range(-d, d + 1, 2):  # backward, on the reversed sequences
            if k == -d or (k != d and vb[off + k - 1] < vb[off + k + 1]):
                x = vb[off + k + 1]
            else:
                x = vb[off + k - 1] + 1
            y = x - k
            x0, y0 = x, y
            while x < n and y < m and a[ahi - 1 - x] == b[bhi - 1 - y]:
                x += 1
                y += 1
            vb[off + k] = x
            if not odd and -d <= delta - k <= d and x + vf[off + delta - k] >= n:
                return n - x, m - y, n - x0, m - y0
    return None  # not reached: the snakes meet by d = ceil((n+m)/2)


def matches(a: Sequence[int], b: Sequence[int], max_edits: int = MAX_EDITS) -> tuple[list[tuple[int, int, int]], bool]:
    """Matching runs (a_start, b_start, length) in order, and whether some region was given up on."""
    runs: list[tuple[int, int, int]] = []
    gave_up = False
    stack = [(0, len(a), 0, len(b))]
    while stack:
        alo, ahi, blo, bhi = stack.pop()
        start = 0
        while alo + start < ahi and blo + start < bhi and a[alo + start] == b[blo + start]:
            start += 1
        if start:
            runs.append((alo, blo, start))
            alo, blo = alo + start, blo + start
        end = 0
        while ahi - end > alo and bhi - end > blo and a[ahi - 1 - end] == b[bhi - 1 - end]:
            end += 1
        if end:
            runs.append((ahi - end, bhi - end, end))
            ahi, bhi = ahi - end, bhi - end
        if alo == ahi or blo == bhi:
            continue
        snake = _middle_snake(a, alo, ahi, b, blo, bhi, max_edits // 2)
        if snake is None:
            gave_up = True
            continue
        x, y, u, v = snake
        if u > x:
            runs.append((alo + x, blo + y, u - x))
        stack.append((alo, alo + x, blo, blo + y))
        stack.append((alo + u, ahi, blo + v, bhi))
    runs.sort()
    return runs, gave_up


def opcodes(a: Sequence[int], b: Sequence[int], max_edits: int = MAX_EDITS) -> tuple[list[Opcode], bool]:
    """difflib-style opcodes (equal, replace, delete, insert) covering both sequences."""
    out: list[Opcode] = []
    i = j = 0
    runs, gave_up = matches(a, b, max_edits)
    for ai, bj, size in [*runs, (len(a), len(b), 0)]:
        if i < ai and j < bj:
            out.append(("replace", i, ai, j, bj))
        elif i < ai:
            out.append(("delete", i, ai, j, j))
        elif j < bj:
            out.append(("insert", i, i, j, bj))
        if size:
            if out and out[-1][0] == "equal":
                out[-1] = ("equal", out[-1][1], ai + size, out[-1][3], bj + size)
            else:
                out.append(("equal", ai, ai + size, bj, bj + size))
        i, j = ai + size, bj + size
    return out, gave_up


@dataclass
class Hunk:
    """One hunk of a unified diff: where it starts in A and B, what it is about, and its lines."""

    a_start: int
    a_len: int
    b_start: int
    b_len: int
    section: str  # e.g. "turn 2": where the first change is
    lines: list[str]  # " text", "-text", "+text"

    def header(self) -> str:
        return f"@@ -{self.a_start + 1},{self.a_len} +{self.b_start + 1},{self.b_len} @@ {self.section}".rstrip()


def unified(
    a: Sequence[str],
    b: Sequence[str],
    section_a: Callable[[int], str],
    section_b: Callable[[int], str] | None = None,
    *,
    context: int = 3,
    max_edits: int = MAX_EDITS,
) -> tuple[list[Hunk], bool]:
    """Hunks of a unified diff of two line lists; each hunk names the section of its first change."""
    ia, ib = intern(a, b)
    ops, gave_up = opcodes(ia, ib, max_edits)
    groups: list[list[Opcode]] = []
    current: list[Opcode] = []
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            if current and i2 - i1 > 2 * context:
                current.append((tag, i1, i1 + context, j1, j1 + context))
                groups.append(current)
                current = []
                i1, j1 = i2 - context, j2 - context
            elif current:
                current.append((tag, i1, i2, j1, j2))
                continue
            current = [(tag, max(i1, i2 - context), i2, max(j1, j2 - context), j2)]
        else:
            current.append((tag, i1, i2, j1, j2))
    if current and any(op[0] != "equal" for op in current):
        if current[-1][0] == "equal":
            tag, i1, i2, j1, j2 = current[-1]
            current[-1] = (tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context))
        groups.append(current)
    hunks = []
    for group in groups:
        lines: list[str] = []
        first = next(op for op in group if op[0] != "equal")
        use_b = section_b is not None and (first[0] == "insert" or first[1] >= len(a))
        section = section_b(first[3]) if use_b and section_b is not None else section_a(min(first[1], len(a) - 1))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [" " + x for x in a[i1:i2]]
                continue
            lines += ["-" + x for x in a[i1:i2]]
            lines += ["+" + x for x in b[j1:j2]]
        g0, g1 = group[0], group[-1]
        hunks.append(Hunk(g0[1], g1[2] - g0[1], g0[3], g1[4] - g0[3], section, lines))
    return hunks, gave_up
