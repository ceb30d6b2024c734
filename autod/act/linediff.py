"""Line diffs whose cost is bounded by the size of the change, not the square of the file.

A one-line edit of a 16,000-row CSV must not cost a quadratic `SequenceMatcher` over the whole file
(it stalled a cycle for a minute). So: the common head and tail are cut off first (linear); what is
left is diffed exactly by difflib when it is small, and otherwise split at lines that occur once on
each side (patience anchors, O(n log n)) with the gaps diffed the same way. A gap with no anchor
that is still large is counted as replaced whole: the counts can then be an over-estimate, never an
under-estimate, which is the safe side for the line cap.

`opcodes` has difflib's shape; `count` and `unified` are what the actor uses.
"""

from __future__ import annotations

import bisect
import difflib
from collections.abc import Iterator, Sequence

from autod.linebreaks import lines_of

Opcode = tuple[str, int, int, int, int]

EXACT_LIMIT = 250_000  # lines(a) x lines(b) below which difflib's exact matching is cheap
_MAX_DEPTH = 8


def split_lines(text: str) -> list[str]:
    """Lines with their "\\n" kept, as a unified diff and git count them: only "\\n" ends a line
    (never U+2028, NEL or a form feed). What an edit changes is counted by Python's lines (`count`)."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def opcodes(a: Sequence[str], b: Sequence[str]) -> list[Opcode]:
    """difflib-style opcodes turning a into b, merged, in bounded time."""
    raw: list[Opcode] = []
    _diff(a, 0, len(a), b, 0, len(b), raw, 0)
    return _merge(raw)


def count(old: str, new: str) -> tuple[int, int]:
    """(added, removed) lines between two texts."""
    added = removed = 0
    for tag, i1, i2, j1, j2 in opcodes(lines_of(old, keepends=True), lines_of(new, keepends=True)):
        if tag != "equal":
            removed += i2 - i1
            added += j2 - j1
    return added, removed


def unified(a: Sequence[str], b: Sequence[str], fromfile: str, tofile: str, *, n: int = 3) -> Iterator[str]:
    """difflib.unified_diff's lines (lineterm "\\n"), from the bounded opcodes."""
    started = False
    for group in _grouped(opcodes(a, b), n):
        if not started:
            started = True
            yield f"--- {fromfile}\n"
            yield f"+++ {tofile}\n"
        first, last = group[0], group[-1]
        yield f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@\n"
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                for line in a[i1:i2]:
                    yield " " + line
                continue
            for line in a[i1:i2]:
                yield "-" + line
            for line in b[j1:j2]:
                yield "+" + line


# -- the bounded diff ------------------------------------------------------------------


def _diff(
    a: Sequence[str], alo: int, ahi: int, b: Sequence[str], blo: int, bhi: int, out: list[Opcode], depth: int
) -> None:
    head = 0
    while alo + head < ahi and blo + head < bhi and a[alo + head] == b[blo + head]:
        head += 1
    if head:
        out.append(("equal", alo, alo + head, blo, blo + head))
        alo, blo = alo + head, blo + head
    tail = 0
    while alo < ahi - tail and blo < bhi - tail and a[ahi - tail - 1] == b[bhi - tail - 1]:
        tail += 1
    ahi_mid, bhi_mid = ahi - tail, bhi - tail
    _middle(a, alo, ahi_mid, b, blo, bhi_mid, out, depth)
    if tail:
        out.append(("equal", ahi_mid, ahi, bhi_mid, bhi))


def _middle(
    a: Sequence[str], alo: int, ahi: int, b: Sequence[str], blo: int, bhi: int, out: list[Opcode], depth: int
) -> None:
    if alo == ahi and blo == bhi:
        return
    if alo == ahi:
        out.append(("insert", alo, alo, blo, bhi))
        return
    if blo == bhi:
        out.append(("delete", alo, ahi, blo, blo))
        return
    if (ahi - alo) * (bhi - blo) <= EXACT_LIMIT:
        matcher = difflib.SequenceMatcher(None, a[alo:ahi], b[blo:bhi], autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            out.append((tag, alo + i1, alo + i2, blo + j1, blo + j2))
        return
    anchors = _anchors(a, alo, ahi, b, blo, bhi) if depth < _MAX_DEPTH else []
    if not anchors:
        out.append(("replace", alo, ahi, blo, bhi))
        return
    i, j = alo, blo
    for ai, bj in anchors:
        _diff(a, i, ai, b, j, bj, out, depth + 1)
        out.append(("equal", ai, ai + 1, bj, bj + 1))
        i, j = ai + 1, bj + 1
    _diff(a, i, ahi, b, j, bhi, out, depth + 1)


def _anchors(
    a: Sequence[str], alo: int, ahi: int, b: Sequence[str], blo: int, bhi: int
) -> list[tuple[int, int]]:
    """Lines that occur exactly once in a[alo:ahi] and once in b[blo:bhi], longest in-order chain."""
    seen_a: dict[str, int] = {}
    for i in range(alo, ahi):
        line = a[i]
        seen_a[line] = -1 if line in seen_a else i
    seen_b: dict[str, int] = {}
    for j in range(blo, bhi):
        line = b[j]
        if seen_a.get(line, -1) >= 0:
            seen_b[line] = -1 if line in seen_b else j
    pairs = sorted((seen_a[line], j) for line, j in seen_b.items() if j >= 0)
    return _longest_increasing(pairs)


def _longest_increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest chain of pairs increasing in both coordinates (pairs sorted by the first)."""
    tails: list[int] = []  # tails[k]: the smallest b-index ending a chain of length k+1
    tail_at: list[int] = []  # index into pairs of that chain's last pair
    back: list[int] = [-1] * len(pairs)
    for n, (_, j) in enumerate(pairs):
        k = bisect.bisect_left(tails, j)
        if k == len(tails):
            tails.append(j)
            tail_at.append(n)
        else:
            tails[k] = j
            tail_at[k] = n
        back[n] = tail_at[k - 1] if k else -1
    chain: list[tuple[int, int]] = []
    n = tail_at[-1] if tail_at else -1
    while n >= 0:
        chain.append(pairs[n])
        n = back[n]
    chain.reverse()
    return chain


def _merge(ops: list[Opcode]) -> list[Opcode]:
    """Adjacent opcodes joined: equal with equal, and any run of changes into one replace/insert/delete."""
    out: list[Opcode] = []
    for op in ops:
        if op[1] == op[2] and op[3] == op[4]:
            continue
        if out and (out[-1][0] == "equal") == (op[0] == "equal"):
            tag, i1, _, j1, _ = out[-1]
            if tag != "equal":
                tag = _tag(i1, op[2], j1, op[4])
            out[-1] = (tag, i1, op[2], j1, op[4])
        else:
            out.append(op)
    return out


def _tag(i1: int, i2: int, j1: int, j2: int) -> str:
    if i1 == i2:
        return "insert"
    return "delete" if j1 == j2 else "replace"


def _grouped(codes: list[Opcode], n: int) -> Iterator[list[Opcode]]:
    """difflib.SequenceMatcher.get_grouped_opcodes over given opcodes."""
    if not codes:
        codes = [("equal", 0, 1, 0, 1)]
    codes = list(codes)
    if codes[0][0] == "equal":
        tag, i1, i2, j1, j2 = codes[0]
        codes[0] = (tag, max(i1, i2 - n), i2, max(j1, j2 - n), j2)
    if codes[-1][0] == "equal":
        tag, i1, i2, j1, j2 = codes[-1]
        codes[-1] = (tag, i1, min(i2, i1 + n), j1, min(j2, j1 + n))
    group: list[Opcode] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > 2 * n:
            group.append((tag, i1, min(i2, i1 + n), j1, min(j2, j1 + n)))
            yield group
            group = []
            i1, j1 = max(i1, i2 - n), max(j1, j2 - n)
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        yield group


def _range(start: int, stop: int) -> str:
    beginning, length = start + 1, stop - start
    if length == 1:
        return f"{beginning}"
    if not length:
        beginning -= 1
    return f"{beginning},{length}"
