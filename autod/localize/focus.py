"""The focused view of a failure's code: the suspects, the few top-ranked definitions under test, whole.

Handed the failure and the buggy function alone, and told the bug is there, Qwen2.5-Coder-1.5B fixed
real-library bugs with its first reply that it missed when the same function sat first among twenty
definitions of a wide prompt (bench/bench_reallib.py: the oracle against autod, docs/PERFORMANCE.md).
Agentless repairs from its localized snippets, and a prompt a fifth the size is a fifth of the prompt
time on a CPU. Localization cannot know which definition is buggy, so each suspect is asked about
alone, in rank order (where the error was raised, then the Ochiai ranking of the failing tests'
coverage), in turn over the attempts (autod.candidates.search: `candidates.focused` draws an
attempt), and the wide prompt follows: a focused draw is one view among the candidates' draws, never
the only one.

Tests are left out (the failure output already shows the failing lines and pytest's assertion), and
so are constants, class headers, outlines and windows of module-level code: a suspect is a definition
a plan can rewrite whole; what is not is what the wide view is for.

A constant or a class attribute is never a suspect, but the values a suspect reads are shown with it
(`Suspect.values`, `values_read`): a bug in a default (`_WIDTH = 8` read by the function under test)
shows in that function's behaviour, and a prompt that holds the function alone leaves the model no way
to fix it. Only short assignments in workspace code are shown; a value the plan may not edit is not.
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autod.localize.frames import is_test_path
from autod.localize.resolve import Resolver

if TYPE_CHECKING:
    from autod.localize.index import Index
    from autod.localize.render import Rendered

FOCUS_KINDS = ("function",)  # a definition shown whole
VALUE_LINES = 12  # a longer assignment (a table, a long regex) is left to the wide view
VALUES_CHARS = 1200  # all the values one suspect's prompt shows
MAX_VALUES = 6


@dataclass(frozen=True)
class Value:
    """A constant or class attribute a suspect reads: its assignment, dedented."""

    path: str
    symbol: str  # `NAME` or `Class.attr`, as a whole-definition edit names it
    code: str


@dataclass(frozen=True)
class Suspect:
    """One definition of the code under test, whole, as the wide prompt showed it."""

    path: str
    symbol: str
    code: str  # the definition's exact text
    values: tuple[Value, ...] = ()  # what it reads (values_read)


def eligible(entry: dict[str, str | None], kind: str) -> bool:
    """Whether a rendered entry may be a suspect: a definition under test a plan can rewrite whole."""
    path = entry.get("path") or ""
    return (kind in FOCUS_KINDS and bool(path) and bool(entry.get("symbol")) and not is_test_path(path)
            and not entry.get("part_of"))


def suspects(code: Rendered, k: int) -> list[Suspect]:
    """The first `k` eligible definitions in rank order (none when k is 0)."""
    out: list[Suspect] = []
    for entry, kind, block in zip(code.entries, code.kinds, code.blocks, strict=True):
        if len(out) >= k:
            break
        if eligible(entry, kind):
            out.append(Suspect(str(entry["path"]), str(entry["symbol"]), _body(block)))
    return out


def _body(block: str) -> str:
    """The code inside a rendered block (autod.localize.render.block: a header line, then a fence)."""
    inner = block.split("\n", 1)[1] if "\n" in block else ""
    inner = inner.split("\n", 1)[1] if inner.startswith("```") else inner
    return inner[: inner.rfind("\n```")] if inner.rstrip().endswith("```") else inner


def values_read(
    found: list[Suspect], index: Index, read_lines: Callable[[str], list[str] | None]
) -> list[Suspect]:
    """Each suspect with the short constants and class attributes it reads (in first-use order):
    workspace code only, never a test's, never an alias of a class or function (`OMD = MultiDict`), at
    most MAX_VALUES of at most VALUE_LINES lines each and VALUES_CHARS in all. `read_lines` reads a
    file through the Boundary (None: it may not be read, and nothing of it is shown)."""
    resolver = Resolver(index)
    out: list[Suspect] = []
    for s in found:
        d = index.get(s.path, s.symbol)
        values: list[Value] = []
        used = 0
        for v in resolver.uses(d) if d is not None else []:
            if len(values) >= MAX_VALUES:
                break
            if v.kind not in ("constant", "attribute") or v.alias or is_test_path(v.path):
                continue
            if v.name.startswith("__") and v.name.endswith("__"):  # __all__, __slots__, __version__
                continue
            lines = read_lines(v.path) if v.end - v.start < VALUE_LINES else None
            if not lines or v.end > len(lines):
                continue
            code = textwrap.dedent("\n".join(lines[v.start - 1 : v.end])).strip("\n")
            if used + len(code) > VALUES_CHARS:
                continue
            used += len(code)
            values.append(Value(v.path, v.qualname, code))
        out.append(dataclasses.replace(s, values=tuple(values)))
    return out


def render_values(suspect: Suspect) -> str:
    """The values a suspect reads as one code block, each under a comment naming it and its file."""
    parts = []
    for v in suspect.values:
        where = "" if v.path == suspect.path else f" in {v.path}"
        parts.append(f"# {v.symbol}{where}\n{v.code}")
    return "\n".join(parts)


def reads(suspect: Suspect) -> str:
    """The values a suspect reads, one `path<TAB>symbol` a line (what a plan drawn from it may rewrite)."""
    return "\n".join(f"{v.path}\t{v.symbol}" for v in suspect.values)
