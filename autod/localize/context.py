"""Localization as a step: an event's failure output → ranked, budgeted code context for a prompt.

Order of what goes in: (a) the diff since the last green revision, whole (with no green revision,
the recent history of the files the failure touches); (b) whole enclosing definitions of every
workspace frame; (c) the failing tests and what they call, one hop further; (d) the constants and
class attributes those read; optionally re-ranked by the failing tests' coverage (Ochiai); then
(e) an outline of the top files. Every read goes through the Boundary.
"""

from __future__ import annotations

import ast
import asyncio
import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from autod import pyast
from autod.linebreaks import lines_of
from autod.localize import focus, history, render
from autod.localize.frames import TestId, failing_sections, is_test_path, parse_frames, parse_test_ids
from autod.localize.index import Definition, Index, build_index
from autod.localize.rank import Site, rank
from autod.localize.spectrum import Spectrum
from autod.localize.uses import dunders

if TYPE_CHECKING:
    from autod.config.settings import Settings
    from autod.safety.boundary import Boundary

log = structlog.get_logger("autod.localize")

MIN_CODE_SHARE = 0.3  # of the budget, kept for code however big the diff is
OUTLINE_SHARE = 0.12  # of the code budget, at most, for the outline of the top files


@dataclass
class Localized:
    """What localization found, rendered: each part ready for a prompt, and what went in."""

    diff: str = ""  # since the last green revision (or the failing files' recent history)
    code: str = ""  # ranked whole definitions
    outline: str = ""  # signatures of the top files
    entries: list[dict[str, str | None]] = field(default_factory=list)
    index: Index | None = None
    tests: list[TestId] = field(default_factory=list)
    suspects: list[focus.Suspect] = field(default_factory=list)  # the top definitions under test

    @property
    def sources(self) -> str:
        return "\n\n".join(p for p in (self.code, self.outline) if p)


@dataclass
class Failure:
    """Where a failure points, resolved to workspace-relative paths that may be read."""

    sites: list[tuple[str, int]]  # (rel, line) innermost first, test files included
    tests: list[TestId]

    @property
    def paths(self) -> list[str]:
        seen = dict.fromkeys([p for p, _ in self.sites] + [t.path for t in self.tests])
        return list(seen)


def read_failure(boundary: Boundary, text: str, locations: list[Any] | None = None) -> Failure:
    """Frames and failing tests named in the output, kept only where the boundary allows reading."""
    sites: list[tuple[str, int]] = []
    for f in reversed(parse_frames(text)):  # innermost first
        rel = boundary.readable(f.path)
        if rel is not None and rel.endswith(".py") and (rel, f.line) not in sites:
            sites.append((rel, f.line))
    for loc in locations or []:
        if isinstance(loc, dict) and isinstance(loc.get("line"), int):
            rel = boundary.readable(str(loc.get("path", "")))
            if rel is not None and rel.endswith(".py") and (rel, loc["line"]) not in sites:
                sites.append((rel, int(loc["line"])))
    tests = []
    for t in parse_test_ids(text):
        rel = boundary.readable(t.path)
        # only `path::name` shapes whose path is a readable workspace test file
        if rel is not None and is_test_path(rel) and (boundary.workspace / rel).is_file():
            tests.append(TestId(rel, t.names, f"{rel}::{'::'.join(t.names)}"))
    return Failure(sites[:40], tests)


def test_definitions(
    index: Index, failure: Failure, section_names: list[str]
) -> list[tuple[Definition, int | None]]:
    """The failing tests' definitions, with the line their traceback names in them."""
    out: list[tuple[Definition, int | None]] = []
    wanted = [(t.path, t.qualname) for t in failure.tests]
    if not wanted:  # no summary line (-rN, --tb=line...): the section headers and test-file frames
        for name in section_names:
            base = name.split("[", 1)[0].replace("::", ".")
            for rel, _ in failure.sites:
                if is_test_path(rel) and index.get(rel, base):
                    wanted.append((rel, base))
    for path, qual in dict.fromkeys(wanted):
        d = index.get(path, qual)
        if d is None:
            continue
        line = next((ln for p, ln in failure.sites if p == path and d.start <= ln <= d.end), None)
        out.append((d, line))
    return out


async def localize(
    settings: Settings,
    boundary: Boundary,
    *,
    text: str,
    locations: list[Any] | None,
    last_green: str | None,
    budget_tokens: int,
    spectrum: dict[tuple[str, str], float] | None = None,
    remembered: dict[tuple[str, str], float] | None = None,
) -> Localized:
    """Ranked code context for a failure, within `budget_tokens` (the diff since green is never cut)."""
    cfg = settings.localize
    failure = read_failure(boundary, text, locations)
    workspace = boundary.workspace
    # never a denied file's changes: both sides of a rename must be readable (Boundary.filter_diff)
    diffs = history.split_diff(boundary.filter_diff(await history.diff_text(workspace, last_green)))
    diffs = [d for d in diffs if boundary.readable(d.path) == d.path]
    diff_text = _diff_text(diffs, set(failure.paths), cfg.max_diff_tokens)
    first = [*failure.paths, *(d.path for d in diffs)]
    index = await asyncio.to_thread(
        build_index,
        boundary,
        first=first,
        max_files=cfg.index_max_files,
        max_bytes=cfg.index_max_mb * 2**20,
        max_summary=cfg.index_max_summary_mb * 2**20,
        timeout_s=cfg.index_timeout_s,
    )
    if not index.complete:
        log.warning("localize.index_truncated", reason=index.why_incomplete, files=len(index.modules))
    changed = {d.path: d.changed for d in diffs if d.path.endswith(".py")}
    sites = [
        Site(rel, line, depth) for depth, (rel, line) in enumerate(failure.sites) if not is_test_path(rel)
    ]
    tests = test_definitions(index, failure, failing_sections(text))
    ops = await asyncio.to_thread(failing_line_ops, boundary, tests)
    # resolving calls and values over the whole index is CPU work: off the event loop, like the index
    pieces = await asyncio.to_thread(
        functools.partial(rank, index, changed=changed, sites=sites, tests=tests, spectrum=spectrum,
                          failing_ops=ops, remembered=remembered))
    if last_green is None:
        # no green revision to diff against: the recent commits of the files the failure leads to
        touched = list(dict.fromkeys(p.path for p in pieces if not is_test_path(p.path)))[:5]
        past = await history.recent_history(workspace, touched or failure.paths, cfg.history_commits)
        past = _filter_log(boundary, past)
        if past:
            cap = int(budget_tokens * 0.25) * 4
            past = past if len(past) <= cap else past[:cap] + "\n[... older history cut ...]"
            diff_text = f"{diff_text}\n\n# recent commits of the files the failure leads to\n{past}".strip()

    code_budget = max(int(budget_tokens * MIN_CODE_SHARE), budget_tokens - render.tokens(diff_text))
    outline_budget = int(code_budget * OUTLINE_SHARE)

    read: dict[str, list[str] | None] = {}  # each file read once: the wide code, outline, suspects, values

    def read_lines(rel: str) -> list[str] | None:
        if rel not in read:
            body = boundary.read_text(rel)
            read[rel] = lines_of(body) if body is not None else None
        return read[rel]

    evidence = spectrum if isinstance(spectrum, Spectrum) else None  # line-level: slices and marks
    code = await asyncio.to_thread(render.fill, pieces, read_lines, code_budget - outline_budget, evidence)
    shown = {(e["path"] or "", e["symbol"] or "") for e in code.entries}
    top_files = list(dict.fromkeys([
        *(p.path for p in pieces if not is_test_path(p.path)),
        *imported_modules(index, [d.path for d, _ in tests]),
    ]))
    outline = await asyncio.to_thread(
        render.skeleton, index, top_files, shown, read_lines, outline_budget + code_budget - code.used_tokens
    )
    def suspects() -> list[focus.Suspect]:
        found = focus.suspects(pieces, read_lines, cfg.focus_definitions)
        if evidence is not None:
            found = focus.with_ran(found, evidence.failing_ran)
        return focus.values_read(found, index, read_lines)

    found_suspects = await asyncio.to_thread(suspects)
    entries: list[dict[str, str | None]] = [
        {"path": d.path, "symbol": None, "lines": "diff", "why": "changed since the last green check"}
        for d in diffs
    ]
    return Localized(
        diff=diff_text,
        code=code.text,
        outline=outline.text,
        entries=entries + code.entries + outline.entries,
        index=index,
        tests=failure.tests,
        suspects=found_suspects,
    )


def failing_line_ops(boundary: Boundary, tests: list[tuple[Definition, int | None]]) -> tuple[str, ...]:
    """The special methods the failing tests' named lines reach (`assert v1 >= v3`: __ge__), read from
    the innermost statement holding each line; a file that cannot be read or parsed adds none."""
    out: dict[str, None] = {}
    for d, line in tests:
        text = boundary.read_text(d.path) if line else None
        try:
            tree = pyast.parse(text, filename=d.path) if text else None
        except (SyntaxError, ValueError):
            tree = None
        if tree is None:
            continue
        defs = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
        inner = [n for n in ast.walk(tree) if isinstance(n, ast.stmt) and not isinstance(n, defs)
                 and n.lineno <= line <= (n.end_lineno or n.lineno)]
        if inner:
            stmt = min(inner, key=lambda n: (n.end_lineno or n.lineno) - n.lineno)
            out.update(dict.fromkeys(dunders(stmt)))
    return tuple(out)


def _filter_log(boundary: Boundary, log_text: str) -> str:
    """`git log -p` output with each commit's diff sections filtered by the read rules."""
    import re

    parts = re.split(r"(?m)^(?=commit [0-9a-f]{7,})", log_text)
    return "".join(boundary.filter_diff(p) if "\ndiff --git " in p else p for p in parts)


def imported_modules(index: Index, paths: list[str]) -> list[str]:
    """Workspace modules these modules import (the code a failing test exercises), in import order."""
    out: list[str] = []
    for path in paths:
        mod = index.modules.get(path)
        for target in (mod.imports.values() if mod else ()):
            parts = target.split(".")
            for k in range(len(parts), 0, -1):
                found = index.module_named(".".join(parts[:k]))
                if found is not None:
                    if not is_test_path(found.path) and found.path not in out:
                        out.append(found.path)
                    break
    return out


def _diff_text(diffs: list[history.FileDiff], named: set[str], max_tokens: int) -> str:
    """The whole diff; past max_tokens, files the failure never names shrink to one stat line."""
    full = "\n".join(d.text for d in diffs)
    if render.tokens(full) <= max_tokens:
        return full
    out = []
    for d in diffs:
        if d.path in named:
            out.append(d.text)
        else:
            plus = sum(1 for ln in lines_of(d.text) if ln.startswith("+") and not ln.startswith("+++"))
            minus = sum(1 for ln in lines_of(d.text) if ln.startswith("-") and not ln.startswith("---"))
            out.append(f"# {d.path}: +{plus} -{minus} lines changed (not shown: the failure never names it)")
    return "\n".join(out)
