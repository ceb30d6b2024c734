"""Rank the definitions a failure leads to: what changed, the frames, the failing test and what it calls.

Pieces get a rank key (lower first); the budget is filled in that order by `render`. Each
definition appears once, under its best reason. Test files contribute only the failing tests
themselves: the model may not change tests, and their helpers crowd out the code under test.

Rules chosen on libraries the ranking was not written for (bench/bench_corpus.py), each bounded so
the evidence's own order keeps the rest: the short values (constants, class attributes, a method's
class-level statements) the first ranked functions read follow their reader; a small helper the
failing tests reached through a suspicious line of one of the most suspicious functions, and through
no other function they ran, follows that function; among equals, the shorter first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from autod.localize.frames import is_test_path
from autod.localize.index import Definition, Index
from autod.localize.resolve import Resolver
from autod.localize.spectrum import Spectrum

WINDOW = 8  # lines each side of a module-level line a frame names
# a definition a remembered fix of a similar failure changed moves up by this many rank keys at most,
# and never ahead of what changed since green or where the error was raised: memory reorders the
# evidence, it never stands in for it (a definition no evidence names is not added)
MEMORY_BOOST = 0.6
MEMORY_FLOOR = 1.1
# the short values (constants, class attributes) the first VALUE_READERS definitions read follow their
# reader: a slip in `_PATTERN = r"..."` shows in the function that uses it, and one line costs little
VALUE_READERS = 10
VALUES_PER_READER = 6  # as many as a suspect's own prompt shows beside it (autod.localize.focus)
VALUE_LINES = 12  # a longer assignment (a table) keeps its place by the evidence alone
VALUES_TOTAL_LINES = 80  # all the values this rule moves, at most: the evidence's own order keeps the rest
VALUE_STEP = 1e-3
SPECTRUM_BASE = 1.2  # the coverage ranking's best key: behind what changed, the frames and memory's floor
# the small functions the most suspicious ones call (and the failing tests ran) follow their caller
HELPER_CALLERS = 5
HELPERS_PER_CALLER = 3
HELPER_LINES = 30
HELPER_STEP = 1e-2
HELPER_CALLER_SCAN = 20  # a helper's callers looked at, at most
HELPER_MARGIN = 0.1  # the call line's Ochiai over the helper's own, at least
HELPERS_TOTAL_LINES = 90  # all the helpers this rule moves, at most
TIE_LINES = 80  # a longer definition costs what its slice costs (autod.localize.slices.SLICE_LINES)
# a frame's place moves back by this much times (1 - its Ochiai): the stack says where the failure went,
# not which of its functions is wrong, and a frame every passing test runs too (an error's constructor,
# a dispatcher) is less suspect than one only the failing tests run. At most FRAME_WEIGHT, so a frame
# stays ahead of any function the coverage alone ranks at its own score (SPECTRUM_BASE's scale is 2.5)
FRAME_WEIGHT = 0.5


@dataclass
class Piece:
    """A span of one file to show whole, with why it is shown."""

    path: str
    start: int
    end: int
    why: str
    key: float  # rank: lower is shown first
    symbol: str | None = None
    focus: int | None = None  # the line a frame points at, if any
    kind: str = "function"
    header_end: int = 0  # a definition's signature ends here (a long one's slice keeps it)
    evidence: float | None = None  # its key before a helper moved behind its caller (None: `key`)

    @property
    def by_evidence(self) -> tuple[float, str, int]:
        """The order of the evidence alone, for the focused view: one suspect per prompt, so what a
        definition costs in the wide prompt's budget, or whom it helps, does not bear on it."""
        return (self.key if self.evidence is None else self.evidence, self.path, self.start)

    @property
    def ident(self) -> tuple[str, str]:
        return (self.path, self.symbol or f"{self.start}-{self.end}")

    def entry(self) -> dict[str, str | None]:
        lines = f"{self.start}-{self.end}"
        return {"path": self.path, "symbol": self.symbol, "lines": lines, "why": self.why}


@dataclass(frozen=True)
class Site:
    """A workspace frame: path (relative), line, and whether it is where the error was raised."""

    path: str
    line: int
    depth: int  # 0: the innermost frame of the failure


class Ranking:
    """Collects pieces under their best reason; `ranked()` returns them in order."""

    def __init__(self, index: Index) -> None:
        self.index = index
        self.resolver = Resolver(index)
        self.pieces: dict[tuple[str, str], Piece] = {}

    def add_def(self, d: Definition, why: str, key: float, focus: int | None = None) -> None:
        if d.kind == "class":  # the class line (decorators, bases); its methods come on their own
            p = Piece(d.path, d.start, d.header_end, why, key, d.qualname, focus, "class")
        else:
            p = Piece(d.path, d.start, d.end, why, key, d.qualname, focus, d.kind, d.header_end)
        self._put(p)

    def add_window(self, path: str, line: int, why: str, key: float) -> None:
        mod = self.index.modules.get(path)
        end = mod.n_lines if mod else line + WINDOW
        self._put(Piece(path, max(1, line - WINDOW), min(end, line + WINDOW), why, key, None, line, "window"))

    def _put(self, p: Piece) -> None:
        old = self.pieces.get(p.ident)
        if old is None or p.key < old.key:
            if old is not None and old.focus and not p.focus:
                p.focus = old.focus
            self.pieces[p.ident] = p

    def ranked(self) -> list[Piece]:
        """Best first; among equally ranked pieces (one failing test gives many functions the same
        score) the shorter first: the evidence prefers neither, and more of them fit the budget."""
        def order(p: Piece) -> tuple[float, int, str, int]:
            return (p.key, min(p.end - p.start, TIE_LINES), p.path, p.start)

        return sorted(self.pieces.values(), key=order)


def rank(
    index: Index,
    *,
    changed: Mapping[str, list[tuple[int, int]]],
    sites: list[Site],
    tests: list[tuple[Definition, int | None]],
    spectrum: Mapping[tuple[str, str], float] | None = None,
    failing_ops: tuple[str, ...] = (),
    remembered: Mapping[tuple[str, str], float] | None = None,
) -> list[Piece]:
    """All candidate pieces, best first.

    changed: path -> line ranges the diff since green touched; sites: workspace frames (not in test
    files), innermost first; tests: the failing tests' definitions with the line their frame names.
    spectrum: (path, qualname) -> suspiciousness in [0, 1] from the coverage re-run. failing_ops:
    the special methods the failing line itself reaches (`assert a >= b`: __ge__), ranked ahead of
    those the rest of the test reaches (a test of comparisons uses all six operators). remembered:
    (path, qualname) -> weight in [0, 1] of definitions past fixes of similar failures changed.
    """
    r = Ranking(index)
    # (a) what changed since the last green check: the enclosing definitions, whole
    for path, ranges in changed.items():
        mod = index.modules.get(path)
        if mod is None:
            continue
        for lo, hi in ranges:
            for line in (lo, hi):
                d = mod.enclosing(line) or mod.data_at(line)
                if d is not None:
                    r.add_def(d, "changed since the last green check", 0.0 + lo / 1e6, focus=line)
    # (b) the frames of the failure in workspace code, innermost first
    frame_defs: list[Definition] = []
    for site in sites:
        mod = index.modules.get(site.path)
        if mod is None:
            continue
        d = mod.enclosing(site.line)
        why = "where the error was raised" if site.depth == 0 else f"frame {site.depth} above the error"
        if d is None or d.kind == "class":
            r.add_window(site.path, site.line, why, 1.0 + site.depth / 100)
        else:
            r.add_def(d, why, 1.0 + site.depth / 100, focus=site.line)
            frame_defs.append(d)
    # (c) the failing tests, whole, and what they call, one hop further
    test_defs = [t for t, _ in tests]
    for i, (t, line) in enumerate(tests[:5]):
        r.add_def(t, "the failing test", 1.5 + i / 100, focus=line)
    # operators and builtins the failing tests use reach special methods of the classes they reach
    special = tuple(dict.fromkeys([*failing_ops, *(n for t in test_defs for n in t.dunders)]))
    # a test that calls the code through its own helpers (in test files, conftest.py): the helpers are
    # not shown (tests are not the model's to change) but what they call is what the test calls
    test_side = _through_test_helpers(r, test_defs)
    hop1 = _callees(r, [*test_side, *frame_defs], base=2.0, special=special, on_line=failing_ops)
    hop2 = _callees(r, hop1, base=4.0, special=special)
    # (d) constants and class attributes the shown functions read
    readers = [*frame_defs, *test_defs, *hop1]
    _data(r, readers, base=3.0)
    _data(r, hop2, base=5.0)
    if spectrum:
        _spectrum(r, index, spectrum)
        _frames_by_spectrum(r, frame_defs, spectrum)
    for ident, weight in (remembered or {}).items():
        p = r.pieces.get(ident)
        if p is not None and p.key > MEMORY_FLOOR:
            p.key = max(MEMORY_FLOOR, p.key - MEMORY_BOOST * min(1.0, max(0.0, weight)))
            p.why += "; a past fix of a similar failure changed it"
    _values_follow_readers(r)
    return r.ranked()


def _frames_by_spectrum(
    r: Ranking, frames: Iterable[Definition], spectrum: Mapping[tuple[str, str], float]
) -> None:
    """Each frame's function still ranked by its frame goes back by FRAME_WEIGHT x (1 - its Ochiai), so
    among the frames the ones the failing tests alone ran come first. A frame the coverage did not
    record keeps its place: no evidence is not evidence of innocence. A recursive function is many
    frames and one piece: it moves once."""
    for ident in dict.fromkeys((d.path, d.qualname) for d in frames):
        p, score = r.pieces.get(ident), spectrum.get(ident)
        if p is None or score is None or p.kind == "class" or not 1.0 <= p.key < SPECTRUM_BASE:
            continue
        if p.why == "where the error was raised" or p.why.endswith("above the error"):
            p.key += FRAME_WEIGHT * (1.0 - min(1.0, max(0.0, score)))


def _callees(
    r: Ranking, callers: Iterable[Definition], *, base: float, special: tuple[str, ...] = (),
    on_line: tuple[str, ...] = (),
) -> list[Definition]:
    """Functions, methods and classes the callers call (resolved), ranked by how many call them; a
    class's special methods among `special` after it, those in `on_line` (the failing line's) ahead."""
    count: dict[tuple[str, str], int] = {}
    first: dict[tuple[str, str], tuple[int, Definition]] = {}
    order = 0
    for caller in callers:
        # calls first, then functions named without a call: properties (`self.port`), callbacks
        called = r.resolver.uses(caller, calls_only=True)
        for d in [*called, *(x for x in r.resolver.uses(caller) if x not in called)]:
            if d.kind not in ("function", "class") or is_test_path(d.path):
                continue
            k = (d.path, d.qualname)
            count[k] = count.get(k, 0) + 1
            if k not in first:
                first[k] = (order, d)
                order += 1
    out = []
    ordered = sorted(first.items(), key=lambda kv: (-count[kv[0]], kv[1][0]))
    why = "called by the failing code" if base < 4 else "called one hop further"
    for pos, (_, (_, d)) in enumerate(ordered):
        r.add_def(d, why, base + pos / 1e4)
        if d.kind == "function":
            out.append(d)
        elif d.kind == "class" and special:
            for m in r.resolver.special(d, special):
                step = 0.45 if m.name in on_line else 0.5
                r.add_def(m, f"{why} (an operator or builtin on {d.name})", base + step + pos / 1e4)
                out.append(m)
    return out


def _through_test_helpers(
    r: Ranking, tests: list[Definition], depth: int = 3, limit: int = 30
) -> list[Definition]:
    """The tests and the test-file functions (helpers, fixtures' bodies) they call, transitively."""
    out = list(tests)
    seen = {(d.path, d.qualname) for d in tests}
    frontier = list(tests)
    for _ in range(depth):
        nxt: list[Definition] = []
        for caller in frontier:
            for d in r.resolver.uses(caller, calls_only=True):
                key = (d.path, d.qualname)
                if d.kind != "function" or not is_test_path(d.path) or key in seen:
                    continue
                seen.add(key)
                nxt.append(d)
        out += nxt
        frontier = nxt
        if not frontier or len(out) >= limit:
            break
    return out[:limit]


def _data(r: Ranking, readers: Iterable[Definition], *, base: float) -> None:
    """Constants and class attributes the readers use, and the constants those are built from."""
    for i, reader in enumerate(readers):
        for d in r.resolver.uses(reader):
            if d.kind not in ("constant", "attribute") or is_test_path(d.path):
                continue
            r.add_def(d, f"read by {reader.qualname}", base + i / 1e4)
            for dd in r.resolver.uses(d):  # `_RANGES = zip(_BOUNDS, ...)`: the bug may be in _BOUNDS
                if dd.kind in ("constant", "attribute") and not is_test_path(dd.path):
                    r.add_def(dd, f"used to build {d.qualname}", base + i / 1e4 + 0.5)


def _values_read(r: Ranking, reader: Definition) -> list[Definition]:
    """The workspace constants and class attributes a definition reads, in first-use order; for a test,
    also those its test-file tables are built from (`CASES = [(FORMAT, ...)]` feeding a parametrize);
    for a method, then its class's own class-level attributes (a subclass's `DEFAULT = ...` is read as
    `self.DEFAULT` by a method of its base, which the index resolves to the base's)."""
    out: dict[tuple[str, str], Definition] = {}
    for d in r.resolver.uses(reader):
        if d.kind not in ("constant", "attribute"):
            continue
        if not is_test_path(d.path):
            out.setdefault((d.path, d.qualname), d)
        elif is_test_path(reader.path):
            for dd in r.resolver.uses(d):
                if dd.kind in ("constant", "attribute") and not is_test_path(dd.path):
                    out.setdefault((dd.path, dd.qualname), dd)
    mod = r.index.modules.get(reader.path)
    owner = mod.defs.get(reader.cls or "") if mod is not None else None
    if owner is not None and owner.kind == "class" and not is_test_path(reader.path):
        for d in sorted(mod.defs.values(), key=lambda d: d.start):  # type: ignore[union-attr]
            if d.kind == "attribute" and d.cls == owner.qualname:
                out.setdefault((d.path, d.qualname), d)
    return list(out.values())


def _values_follow_readers(r: Ranking) -> None:
    """Each of the first VALUE_READERS ranked functions (tests included) pulls the short values it reads
    to just behind itself, VALUES_PER_READER at most: never ahead of its reader, and a value already
    ranked higher keeps its place."""
    readers = [p for p in r.ranked() if p.kind == "function" and p.symbol][:VALUE_READERS]
    moved = 0
    for p in readers:
        reader = r.index.get(p.path, p.symbol or "")
        if reader is None:
            continue
        n = 0
        for v in _values_read(r, reader):
            dunder = v.name.startswith("__") and v.name.endswith("__")  # __all__, __slots__
            size = v.end - v.start + 1
            if v.alias or dunder or size > VALUE_LINES or moved + size > VALUES_TOTAL_LINES:
                continue
            moved += size
            n += 1
            r.add_def(v, f"read by {reader.qualname}", p.key + VALUE_STEP * n)
            if n >= VALUES_PER_READER:
                break


def _spectrum(r: Ranking, index: Index, spectrum: Mapping[tuple[str, str], float]) -> None:
    """Functions the failing tests ran, ranked by Ochiai, ahead of the static hops they beat."""
    top: list[Definition] = []
    for (path, qual), score in sorted(spectrum.items(), key=lambda kv: -kv[1]):
        if score <= 0 or is_test_path(path):
            continue
        d = index.get(path, qual)
        if d is None:
            continue
        r.add_def(d, f"run by the failing tests (Ochiai {score:.2f})", SPECTRUM_BASE + (1.0 - score) * 2.5)
        top.append(d)
    _helpers_of_suspects(r, spectrum, top[:HELPER_CALLERS])
    _data(r, top[:10], base=2.9)


def _helpers_of_suspects(
    r: Ranking, spectrum: Mapping[tuple[str, str], float], callers: list[Definition]
) -> None:
    """A small function the failing tests reached through a suspicious line of one of the most suspicious
    functions, and through no other function they ran, goes right behind that caller: Ochiai punishes
    a helper every passing test runs too (by other ways in), though the line calling it here is one the
    failing tests ran more than the helper. A call from a line every test runs, or a utility other
    failing code calls too, keeps its place. Needs line-level evidence (Spectrum); HELPERS_PER_CALLER
    at most, never ahead of the caller."""
    if not isinstance(spectrum, Spectrum):
        return
    suspicious = {(c.path, c.qualname) for c in callers}
    moved = 0
    for caller in callers:
        cp = r.pieces.get((caller.path, caller.qualname))
        mod = r.index.modules.get(caller.path)
        if cp is None or mod is None or cp.key < SPECTRUM_BASE:  # ranked by a frame or a diff: not ours
            continue
        reach: dict[tuple[str, str], float] = {}  # callee -> its most suspicious call line here
        types = dict(caller.local_types)
        for name, line in caller.call_lines:
            for d in r.resolver.resolve(mod, caller, name, types):
                ident = (d.path, d.qualname)
                reach[ident] = max(reach.get(ident, 0.0), spectrum.line_score(caller.path, line))
        n = 0
        for d in r.resolver.uses(caller, calls_only=True):
            ident = (d.path, d.qualname)
            p = r.pieces.get(ident)
            if d.kind != "function" or ident not in spectrum or is_test_path(d.path):
                continue
            size = d.end - d.start + 1
            if size > HELPER_LINES or moved + size > HELPERS_TOTAL_LINES:
                continue
            if p is None or p.key <= cp.key + HELPER_STEP:
                continue
            if reach.get(ident, 0.0) < spectrum[ident] + HELPER_MARGIN:
                continue  # called from a line the passing tests run as much
            ran = [(c.path, c.qualname) for c in r.resolver.callers(d, limit=HELPER_CALLER_SCAN)]
            if any(c in spectrum and c not in suspicious for c in ran):
                continue  # the failing tests reach it another way too
            moved += size
            n += 1
            why = f"called by {caller.qualname}, run by the failing tests (Ochiai {spectrum[ident]:.2f})"
            r.add_def(d, why, cp.key + HELPER_STEP * n)
            r.pieces[ident].evidence = p.key
            if n >= HELPERS_PER_CALLER:
                break
