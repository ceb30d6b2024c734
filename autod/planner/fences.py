"""Fenced code blocks that no source text can close, written into prompts and read back from replies.

A definition's docstring may hold a Markdown example (```` ```pycon ```` ... ```` ``` ````), and a
check's output or a diff anything at all. A prompt therefore fences each block with a run of
backticks longer than any run inside it (CommonMark allows longer fences, and a closing fence must be
at least as long as its opener), so nothing inside can end it early.

Replies are read by the same rule: a block ends only at a bare fence of the opener's character, at
least as long. A model that fences its code with three backticks whatever the prompt did still writes
the docstring's inner fences as lines of three: for a Python block, a fence line inside a string
literal cannot end valid code (the code up to it leaves the string open), so the block ends at the
first such fence up to which the code parses, and at the first fence when none does (CommonMark).
A block never closed runs to the end of the reply (a reply cut at the length cap).

Reading is linear in the reply whatever it holds: each opener's closers are found from one index of
the reply's bare fence lines, and trying where a Python block parses spends from a budget of
`PARSE_BUDGET` times the reply's length; past it a block ends at its first closer, as CommonMark says.
(Without the budget, a 4.8 KB reply of 300 `python` blocks, each an unclosed bracket, took 30 s.)
"""

from __future__ import annotations

import bisect
import itertools
import re
from dataclasses import dataclass

from autod import pyast
from autod.linebreaks import lines_of
from autod.planner import marks

__all__ = ["CODE_LANGS", "Block", "blocks", "fence_for", "fenced"]

CODE_LANGS = frozenset({"", "python", "py", "python3", "py3"})
# the info string runs to the line's last non-blank (a lazy one tried the trailing blanks from each of
# its characters: quadratic in a run of blanks)
_OPENER = re.compile(r"^[ \t]*+(`{3,}+|~{3,}+)[ \t]*+((?:[^\n]*[^ \t\n])?)[ \t]*$")
_BACKTICKS = re.compile(r"`{3,}")
_BARE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*$")
PARSE_BUDGET = 16  # characters parsed while looking for a block's end, per character of the reply


@dataclass(frozen=True)
class Block:
    start: int  # offset of the opening fence line in the text
    end: int  # offset just past the closing fence line (the text's length when never closed)
    lang: str  # the info string's first word, lowercased
    body: str


def fence_for(*texts: str) -> str:
    """A backtick fence longer than any run of three or more backticks in `texts` (three at least)."""
    longest = max((len(m.group(0)) for t in texts for m in _BACKTICKS.finditer(t or "")), default=0)
    return "`" * max(3, longest + 1)


def fenced(body: str, lang: str = "") -> str:
    """`body` in a block no line of it can close."""
    fence = fence_for(body)
    return f"{fence}{lang}\n{body}\n{fence}"


def blocks(text: str) -> list[Block]:
    """The fenced blocks of `text`, in order (see the module's docstring for where each one ends)."""
    lines = lines_of(text, keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    bare: list[tuple[int, str, int]] = []  # (line, fence character, length) of every bare fence line
    for j, line in enumerate(lines):
        b = _BARE.match(line.rstrip("\r\n"))
        if b is not None:
            bare.append((j, b.group(1)[0], len(b.group(1))))
    starts = [j for j, _, _ in bare]
    budget = PARSE_BUDGET * max(len(text), 1)
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = _OPENER.match(lines[i].rstrip("\r\n"))
        if m is None or (m.group(1)[0] == "`" and "`" in m.group(2)):
            i += 1  # not an opener (a backtick fence's info string holds no backtick)
            continue
        run, lang = m.group(1), (m.group(2).split() or [""])[0].lower()
        after = range(bisect.bisect_right(starts, i), len(bare))
        closers = (bare[x][0] for x in after if bare[x][1] == run[0] and bare[x][2] >= len(run))

        def body_of(j: int, i: int = i) -> str:
            return "".join(lines[i + 1 : j])

        first = next(closers, None)
        if first is None:
            rest = "".join(lines[i + 1 :])
            out.append(Block(offsets[i], len(text), lang, rest if rest.endswith("\n") else rest + "\n"))
            break
        end, second = first, next(closers, None) if lang in CODE_LANGS else None
        if second is not None:  # where the code parses decides which closer ends it
            for j in itertools.chain((first, second), closers):
                size = offsets[j] - offsets[i + 1]
                if size > budget:
                    break  # the budget spent: the first closer ends it
                budget -= size
                if _parses(body_of(j)):
                    end = j
                    break
        out.append(Block(offsets[i], offsets[end + 1], lang, body_of(end)))
        i = end + 1
    return out


def _parses(code: str) -> bool:
    """Whether `code` reads as Python: as the act rules read new source, or as an indented block (a
    method whose docstring has lines at column 0, which no dedent evens out)."""
    if not code.strip():
        return False
    try:
        if marks.parses(code):
            return True
        pyast.parse("if 1:\n" + code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True
