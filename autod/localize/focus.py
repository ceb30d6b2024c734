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

The values a suspect reads are shown with it (`Suspect.values`, `values_read`): a bug in a default
(`_WIDTH = 8` read by the function under test) shows in that function's behaviour, and a prompt that
holds the function alone leaves the model no way to fix it. Only short assignments in workspace code
are shown; a value the plan may not edit is not.

Shown beside a function, a wrong value was seldom changed by a small model: it rewrote the function
around the value (a symptom patch) or gave it back as it was. Told "the bug is most likely in this
value", the same model changed it with its first reply (the oracle of bench/bench_reallib.py). So the
values the suspects read are also suspects of their own (`value_suspects`): the values of each of the
first `localize.focus_values` suspects that read any, together, asked about once, without the function,
after every definition's first draw (autod.candidates.search).
"""

from __future__ import annotations

import ast
import dataclasses
import textwrap
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autod import pyast
from autod.localize.frames import is_test_path
from autod.localize.render import LONG
from autod.localize.resolve import Resolver
from autod.planner.fences import fenced

if TYPE_CHECKING:
    from autod.localize.index import Index
    from autod.localize.rank import Piece

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
    """One definition of the code under test, whole, as the file has it."""

    path: str
    symbol: str
    code: str  # the definition's exact text
    values: tuple[Value, ...] = ()  # what it reads (values_read)
    read_by: str = ""  # a value group (value_suspects): asks about `values` alone, which this reads
    start: int = 0  # the file line `code` starts at (0: not known)
    # lines of `code`, from its first, that hold every line the failing tests ran in it (0: not known);
    # a change past them and the line after cannot change those tests (autod.planner.earlystop)
    ran_to: int = 0


def with_ran(found: list[Suspect], ran: Callable[[str, int, int], Mapping[int, float]]) -> list[Suspect]:
    """The suspects with `ran_to` set from the lines the failing tests ran in each (`ran(path, first,
    last)`, as autod.localize.spectrum.Spectrum.failing_ran gives them)."""
    out = []
    for s in found:
        lines = s.code.count("\n") + 1
        seen = ran(s.path, s.start, s.start + lines - 1) if s.start else {}
        out.append(dataclasses.replace(s, ran_to=max(seen) - s.start + 1) if seen else s)
    return out


def eligible(piece: Piece) -> bool:
    """Whether a ranked piece may be a suspect: a definition under test a plan can rewrite whole (not a
    test, not one too long to be shown whole: the wide view shows a window of it)."""
    return (piece.kind in FOCUS_KINDS and bool(piece.symbol) and not is_test_path(piece.path)
            and piece.end - piece.start + 1 <= LONG)


def suspects(pieces: list[Piece], read_lines: Callable[[str], list[str] | None], k: int) -> list[Suspect]:
    """The first `k` eligible definitions in the evidence's order (none when k is 0; Piece.by_evidence),
    taken from the ranking, not from the wide prompt: a definition its budget had no room for is still
    a suspect, as its own prompt is small. `read_lines` reads through the Boundary, each file once
    (None: not readable, not a suspect)."""
    out: list[Suspect] = []
    for piece in sorted(pieces, key=lambda p: p.by_evidence):
        if len(out) >= k:
            break
        if not eligible(piece):
            continue
        lines = read_lines(piece.path)
        if lines and piece.end <= len(lines):
            code = "\n".join(lines[piece.start - 1 : piece.end])
            out.append(Suspect(piece.path, str(piece.symbol), code, start=piece.start))
    return out


def values_read(
    found: list[Suspect], index: Index, read_lines: Callable[[str], list[str] | None]
) -> list[Suspect]:
    """Each suspect with the short constants and class attributes it reads (in first-use order), each
    followed by the values its own assignment is made of (`SUPPORTED = (HTML4, CSS2)`, `LIMIT = BASE *
    2`: a wrong constant reaches the suspect through the value built from it), depth first: workspace
    code only, never a test's, never an alias of a class or function (`OMD = MultiDict`), at most
    MAX_VALUES of at most VALUE_LINES lines each and VALUES_CHARS in all. `read_lines` reads a file
    through the Boundary (None: it may not be read, and nothing of it is shown)."""
    resolver = Resolver(index)
    out: list[Suspect] = []
    for s in found:
        d = index.get(s.path, s.symbol)
        values: list[Value] = []
        used = 0
        run = names_run(s.code)
        # (value, read by the suspect itself), a stack in first-use order
        pending = [(v, True) for v in reversed(resolver.uses(d))] if d is not None else []
        seen = {(s.path, s.symbol)}
        while pending and len(values) < MAX_VALUES:
            v, direct = pending.pop()
            if (v.path, v.qualname) in seen:
                continue
            seen.add((v.path, v.qualname))
            if v.kind not in ("constant", "attribute") or v.alias or is_test_path(v.path):
                continue
            if direct and v.name not in run:  # read only in an annotation (`other: Comparable`)
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
            pending += [(u, False) for u in reversed(resolver.uses(v))]  # what it is made of, next
        out.append(dataclasses.replace(s, values=tuple(values)))
    return out


def value_suspects(found: list[Suspect], k: int, editable: Container[str]) -> list[Suspect]:
    """The values the suspects read, as suspects of their own: for each of the first `k` suspects (in
    rank order) that reads any, those values together, as the suspect's copy with only them and
    `read_by` set. A value is left out when its file is not `editable` (a value a plan may not fix is
    no question to ask), when an earlier group holds it, and when its assignment holds no literal of
    its own (an alias, a logger, a type variable: `F = TypeVar("F")` names itself), which cannot be
    wrong by a number, a flag or a text."""
    out: list[Suspect] = []
    seen: set[tuple[str, str]] = set()
    for s in found:
        if len(out) >= k:
            break
        kept = []
        for v in s.values:
            if (v.path, v.symbol) in seen or v.path not in editable or not has_literal(v.code):
                continue
            seen.add((v.path, v.symbol))
            kept.append(v)
        if kept:
            out.append(dataclasses.replace(s, values=tuple(kept), read_by=s.symbol))
    return out


def has_literal(code: str) -> bool:
    """Whether an assignment's value holds a literal other than the assigned name spelt as a string."""
    try:
        tree = pyast.parse(code)
    except (SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {t.id for t in targets if isinstance(t, ast.Name)}
            if any(isinstance(c, ast.Constant) and not (isinstance(c.value, str) and c.value in names)
                   for c in ast.walk(node.value)):
                return True
    return False


def names_run(code: str) -> frozenset[str]:
    """The names and attribute names a definition's code reads when it runs: annotations left out
    (a type alias is no value the behaviour depends on), decorators and defaults kept."""
    try:
        tree = pyast.parse(textwrap.dedent(code))
    except (SyntaxError, ValueError):
        return frozenset()
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            skip.add(id(node.annotation))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
            skip.add(id(node.returns))
        elif isinstance(node, ast.AnnAssign):
            skip.add(id(node.annotation))
    out: set[str] = set()
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if id(node) in skip:
            continue
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
        stack.extend(ast.iter_child_nodes(node))
    return frozenset(out)


def render_values(suspect: Suspect) -> str:
    """The values a suspect reads as one code block, each under a comment naming it and its file."""
    parts = []
    for v in suspect.values:
        where = "" if v.path == suspect.path else f" in {v.path}"
        parts.append(f"# {v.symbol}{where}\n{v.code}")
    return "\n".join(parts)


def render_group(group: Suspect) -> str:
    """A value group's values as fenced blocks, one per file (`In `path`:` above each when they are in
    several), each value's assignment as its file has it, dedented, without a comment naming it: a
    small model copies such comments back around its fix, and comments out its fix with them."""
    by_file: dict[str, list[str]] = {}
    for v in group.values:
        by_file.setdefault(v.path, []).append(v.code)
    blocks = [fenced("\n".join(codes), "python") for codes in by_file.values()]
    if len(blocks) == 1:
        return blocks[0]
    return "\n\n".join(f"In `{path}`:\n\n{b}" for path, b in zip(by_file, blocks, strict=True))


def reads(suspect: Suspect) -> str:
    """The values a suspect reads, one `path<TAB>symbol` a line (what a plan drawn from it may rewrite)."""
    return "\n".join(f"{v.path}\t{v.symbol}" for v in suspect.values)
