"""Ending a reply once what is still to come cannot change the fix: the model writes only what may change.

A focused prompt shows one definition and asks for it back, fixed (autod.modes.debug). A small model
on a CPU generates ~15 tokens a second, and most of a reply is the definition copied line by line;
much of the model's time went on replies that gave the definition back unchanged (echoes), each one
a full regeneration. The reply is therefore streamed, and read line by line against the definition
it rewrites. It is ended, and the rest of the definition taken from the prompt, as soon as

- the reply's code is the definition's, line for line, through the last line a change could matter
  in (`Watched.must_see`), having either changed nothing (an echo, found without waiting for its
  end) or changed something and come back to the definition's own lines for `RESYNC` lines in a
  row past the change, at one place only (repeated code is read on until it is unambiguous); or
- the reply's code has reached the definition's last line, aligned, and the next line closes the
  block (what follows a closed block is prose the parser drops).

Where a change can matter: the spectrum of the failing tests says which lines of the definition they
ran (autod.localize.spectrum). A change after the last of them, and after the line that follows it
(an insertion right after a line that ran would run too), is on a path the failing tests never take,
so it cannot turn them green; a reply that has copied the definition that far unchanged is an echo
for the purpose of this failure. (Compile-time effects of a later line, a `yield` or an assignment
that makes a name local, are the exception this rule does not cover; no fix of a failing test is
written that way in practice.) Without that evidence the bound is the definition's end.

Alignment is by exact lines (trailing blanks stripped, the block's own indentation taken off), so a
reply that reindents, reorders or drops a line is never ended on a guess: it simply runs to its end.
Lines are read as they complete, each once: linear in the reply.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from autod.linebreaks import lines_of

__all__ = ["RESYNC", "ReplyWatch", "Watched"]

RESYNC = 3  # lines in a row, back on the definition's own after a change, that end a reply
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*(\S*)[^\n]*$")


@dataclass(frozen=True)
class Watched:
    """The definition a focused reply rewrites, as the prompt showed it, and how much of it must be read
    back before the reply may be ended (`must_see` lines from its first; 0: all of them)."""

    code: str
    must_see: int = 0
    # (first, end): lines of `code` a sampled reply is given rather than generating them (its docstring,
    # autod.planner.splice): the reply is ended, "paused", once it has written every line before
    # `first` unchanged, and its content is then those lines and lines first..end-1, for the planner
    # to ask the rest with that as the answer's start
    splice: tuple[int, int] | None = None
    # stripped lines of `code` a long definition's leg one may not name (autod.planner.point): an earlier
    # draw of the same suspect named each and wrote it back unchanged (autod.candidates.asker)
    tried: tuple[str, ...] = ()


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


class ReplyWatch:
    """One reply's reading: fed the content as it streams (`feed`), says when to end it; `content()` is
    the reply to parse, with the definition's rest in place of what was not generated."""

    def __init__(self, watched: Watched) -> None:
        raw = [ln.rstrip() for ln in lines_of(watched.code.strip("\n"))]
        self._orig_raw = raw
        self._orig_exact = lines_of(watched.code.strip("\n"))  # a splice gives the text as it is
        self._orig_base = _indent(raw[0]) if raw else ""
        self._orig = [self._strip(ln, self._orig_base) for ln in raw]
        self._at: dict[str, list[int]] = defaultdict(list)
        for i, ln in enumerate(self._orig):
            self._at[ln].append(i)
        n = len(raw)
        self._must_see = n if watched.must_see <= 0 else min(n, watched.must_see)
        self._splice = watched.splice if watched.splice and 0 < watched.splice[0] < watched.splice[1] <= n \
            else None
        self._parts: list[str] = []  # the content so far, as it came
        self._pend: list[str] = []  # content after the last line read
        self._done_to = 0  # offset in the content up to which lines were read
        self._state = "prose"  # prose -> code -> (passive | stopped)
        self._fence = ""
        self._base = ""  # the reply's indentation of the definition's first line
        self._kept_to = 0  # offset in the content of the end of the last line kept when stopped
        self._j = 0  # next line of the definition expected while aligned
        self._aligned = True
        self._changed = False
        self._since = 0  # lines of the definition matched in a row since a change (while re-aligning)
        self._runs: dict[int, int] = {}  # candidate definition line -> matched run ending there
        self._div = 0  # the definition's line where the first change began
        self.stopped = ""  # why the reply was ended: "echo", "changed", "closed", "paused"; "" while it runs
        self.lines = 0  # code lines read
        self.spliced = 0  # definition lines taken from the prompt instead of generated

    @staticmethod
    def _strip(line: str, base: str) -> str:
        return line[len(base):] if base and line.startswith(base) else line

    @property
    def streamed(self) -> str:
        """What the model wrote, as it came (a transcript shows this, not the reply autod completed)."""
        return "".join(self._parts)

    @property
    def echo(self) -> bool:
        """Ended as an echo: the definition given back unchanged through every line that could matter."""
        return self.stopped == "echo" or (self.stopped == "closed" and not self._changed)

    def feed(self, delta: str) -> bool:
        """Add streamed content; True when the reply should be ended now (then `content()` is final).
        Linear in the reply however it is split: text is joined only when a line completes."""
        if self.stopped:
            return True
        self._parts.append(delta)
        if self._state == "passive" or "\n" not in delta:
            self._pend.append(delta)
            return False
        *done, rest = "".join([*self._pend, delta]).split("\n")
        self._pend = [rest]
        for line in done:
            self._done_to += len(line) + 1
            self._line(line)
            if self.stopped or self._state == "passive":
                break
        return bool(self.stopped)

    def content(self) -> str:
        """The reply as the parser should read it: as streamed, or, when ended early, the lines read and
        the rest of the definition (reindented as the reply indents it) in a closed block."""
        if self.stopped in ("echo", "changed"):
            rest = [self._given(ln) for ln in self._orig_raw[self._j :]]
            return self.streamed[: self._kept_to] + "".join(f"{ln}\n" for ln in rest) + f"{self._fence}\n"
        if self.stopped == "closed":
            return self.streamed[: self._kept_to]
        if self.stopped == "paused" and self._splice is not None:
            given = [self._given(ln) for ln in self._orig_exact[self._splice[0]:self._splice[1]]]
            return self.streamed[: self._kept_to] + "".join(f"{ln}\n" for ln in given)
        return self.streamed

    def _given(self, line: str) -> str:
        """A line of the definition as the reply would hold it: moved to the reply's indentation; a line
        short of the definition's own (a string's, the parse ignores it) kept exactly as it is."""
        if not line or not line.startswith(self._orig_base):
            return line
        return self._base + line[len(self._orig_base):]

    # -- one line of the reply ---------------------------------------------------------------
    def _line(self, raw: str) -> None:
        line = raw.rstrip()
        if self._state == "prose":
            m = _FENCE.match(line)
            if m and m.group(2).lower() in ("", "python", "py", "python3", "py3"):
                self._state, self._fence = "code", m.group(1)
            return
        self.lines += 1
        if self.lines == 1:  # the block must start as the definition does, or it is not this one
            if not self._orig or line.strip() != self._orig[0].strip():
                self._state = "passive"
                return
            self._base = _indent(line)
            self._j = 1
            self._kept_to = self._done_to
            self._check()
            return
        norm = self._strip(line, self._base)
        if self._aligned and self._j == len(self._orig) and self._closes(line):
            self.stopped, self._kept_to = "closed", self._done_to
            return
        if self._aligned and self._j < len(self._orig) and norm == self._orig[self._j]:
            self._j += 1
        else:
            self._realign(norm)
        self._kept_to = self._done_to
        self._check()

    def _closes(self, line: str) -> bool:
        m = _FENCE.match(line)
        if m is None or m.group(2):
            return False
        run = m.group(1)
        return run[0] == self._fence[0] and len(run) >= len(self._fence)

    def _realign(self, norm: str) -> None:
        """A line off the definition's course (a change), or a step of finding it again after one."""
        if self._aligned:
            self._aligned, self._changed, self._div, self._runs = False, True, self._j, {}
        runs = {m: self._runs[m - 1] + 1 for m in self._at.get(norm, ()) if m - 1 in self._runs}
        for m in self._at.get(norm, ()):
            if m >= self._div and m not in runs:
                runs[m] = 1
        # blank lines and lone brackets say little about where the reply is: they never start a run
        self._runs = {m: r for m, r in runs.items() if r > 1 or len(self._orig[m].strip()) > 1}
        found = [m for m, r in self._runs.items() if r >= RESYNC]
        if len(found) == 1:  # two places the lines fit (repeated code): read on until one is left
            self._aligned, self._j, self._runs = True, found[0] + 1, {}

    def _check(self) -> None:
        if self._splice is not None and self._aligned and not self._changed and self._j == self._splice[0]:
            self.stopped = "paused"
            return
        if self._aligned and self._must_see <= self._j < len(self._orig):
            self.stopped = "changed" if self._changed else "echo"
            self.spliced = len(self._orig) - self._j
