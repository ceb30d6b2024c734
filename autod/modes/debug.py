"""auto-debug: fix build and check failures, verified by re-running the failing checks."""

from __future__ import annotations

import asyncio
import builtins
import os
import re
import subprocess
from pathlib import Path

from autod import gitsafe
from autod.act.edits import ScopeCheck
from autod.act.judges import Judges
from autod.boundary import Boundary
from autod.checks import CheckResult
from autod.events import Event, EventKind
from autod.memory import Recalled
from autod.modes import (
    Attempt,
    ModeEnv,
    Verification,
    chain,
    pack,
    python_syntax_scope,
    recalled_text,
    render,
)
from autod.paths import GENERATED_DIRS, NOT_SOURCE_DIRS
from autod.plan import Plan

WINDOW = 15  # lines of source on each side of a line the failure names
CONTEXT_TOKENS = 6000

_PYTEST_COUNTS = re.compile(r"(\d+) (failed|errors?)\b")


def count_failures(result: CheckResult) -> int:
    """How many failures a check's output reports (pytest's summary when there is one)."""
    if result.ok:
        return 0
    counts = [int(n) for n, _ in _PYTEST_COUNTS.findall(result.output[-4000:])]
    if counts:
        return sum(counts)
    from autod.sources.parsers import parse_failures

    return max(1, len(parse_failures(result.output)))


def source_windows(boundary: Boundary, locations: list[dict[str, object]], budget_chars: int = 16000) -> str:
    """Numbered source around each file:line the failure names, read only where the Boundary allows."""
    seen: set[tuple[str, int]] = set()
    parts: list[str] = []
    used = 0
    for loc in locations[:20]:
        raw, line = str(loc.get("path", "")), loc.get("line")
        if not isinstance(line, int) or not raw:
            continue
        rel = boundary.readable(raw)  # never .git, a deny glob (.env, keys), the state dir, autod's files
        if rel is None:
            continue
        key = (rel, line // (WINDOW * 2))
        if key in seen:
            continue
        seen.add(key)
        text = boundary.read_text(rel)
        if text is None:
            continue
        lines = text.splitlines()
        lo, hi = max(1, line - WINDOW), min(len(lines), line + WINDOW)
        body = "\n".join(f"{n:5d}{'>' if n == line else ' '} {lines[n - 1]}" for n in range(lo, hi + 1))
        block = f"--- {rel} (lines {lo}-{hi}) ---\n{body}"
        if used + len(block) > budget_chars:
            break
        parts.append(block)
        used += len(block)
    return "\n\n".join(parts)


_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_BUILTINS = frozenset(dir(builtins))
_SKIP = NOT_SOURCE_DIRS | GENERATED_DIRS


def called_names(boundary: Boundary, locations: list[dict[str, object]], limit: int = 8) -> list[str]:
    """Functions called on the lines a failure names: their definitions are the likely culprits."""
    names: list[str] = []
    for loc in locations[:10]:
        raw, line = str(loc.get("path", "")), loc.get("line")
        if not isinstance(line, int) or not raw:
            continue
        text = boundary.read_text(raw)
        if text is None:
            continue
        lines = text.splitlines()
        if 0 < line <= len(lines):
            for name in _CALL.findall(lines[line - 1]):
                if name not in _BUILTINS and name not in names:
                    names.append(name)
    return names[:limit]


def definition_windows(boundary: Boundary, names: list[str], budget_chars: int = 8000) -> str:
    """The source of each named function or class defined in the workspace's readable Python files."""
    if not names:
        return ""
    pattern = re.compile(rf"^\s*(?:async\s+def|def|class)\s+({'|'.join(map(re.escape, names))})\b")
    root = boundary.workspace
    parts: list[str] = []
    used = 0
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP and not d.startswith("."))
        for fname in sorted(files):
            if not fname.endswith(".py"):
                continue
            rel = Path(dirpath, fname).relative_to(root).as_posix()
            text = boundary.read_text(rel)
            if text is None:
                continue
            lines = text.splitlines()
            for i, line in enumerate(lines):
                if not pattern.match(line):
                    continue
                indent = len(line) - len(line.lstrip())
                end = i + 1
                while end < len(lines) and end - i < 60:
                    nxt = lines[end]
                    if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= indent:
                        break
                    end += 1
                body = "\n".join(f"{n + 1:5d}  {lines[n]}" for n in range(i, end))
                block = f"--- {rel} (definition, lines {i + 1}-{end}) ---\n{body}"
                if used + len(block) > budget_chars:
                    return "\n\n".join(parts)
                parts.append(block)
                used += len(block)
    return "\n\n".join(parts)


async def git_diff(workspace: Path, since: str | None, limit: int = 12000) -> str:
    """Uncommitted and recent changes since the last green check, when the workspace is a git repo."""
    if not (workspace / ".git").exists():
        return ""
    try:
        proc = await gitsafe.arun(workspace, "diff", "--no-color", since or "HEAD", timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    text = proc.stdout.decode("utf-8", "replace")
    return text[:limit] + ("\n[... diff cut ...]" if len(text) > limit else "")


class DebugMode:
    name = "auto-debug"
    kinds = frozenset({EventKind.CHECK_FAILED, EventKind.BUILD_FAILED})
    writes_code = True

    def handles(self, event: Event) -> bool:
        if event.kind == EventKind.MANUAL:
            return event.target_mode == self.name
        return event.kind in self.kinds

    async def context(self, event: Event, env: ModeEnv, recalled: list[Recalled]) -> dict[str, str]:
        payload = event.payload
        excerpt = str(payload.get("excerpt") or payload.get("message") or event.summary)
        locations = payload.get("locations") or []
        if not locations and excerpt:
            from autod.sources.parsers import parse_locations

            locations = parse_locations(excerpt)
        boundary = env.boundary  # reads obey the same rules as writes
        windows = await asyncio.to_thread(source_windows, boundary, list(locations))
        names = await asyncio.to_thread(called_names, boundary, list(locations))
        defs = await asyncio.to_thread(definition_windows, boundary, names)
        if defs:
            windows = f"{windows}\n\n{defs}" if windows else defs
        since = await env.state.call(env.state.get_kv, "last_green_rev")
        diff = boundary.filter_diff(await git_diff(env.workspace, since))
        sections = [
            ("excerpt", excerpt[-12000:]),
            ("sources", windows),
            ("diff", diff),
            ("memory", recalled_text(recalled)),
        ]
        return pack(sections, CONTEXT_TOKENS)

    def messages(
        self, event: Event, context: dict[str, str], attempts: list[Attempt]
    ) -> list[dict[str, str]]:
        checks = context.get("checks", "")
        tried = "\n\n".join(
            f"Attempt {i}: {a.summary}\nDiff:\n{a.diff[:4000]}\nCheck output after it:\n{a.output[-3000:]}"
            for i, a in enumerate(attempts, 1)
        )
        user = render(
            "debug_user",
            summary=event.summary,
            check=event.payload.get("check", ""),
            excerpt=context.get("excerpt") or "(none)",
            sources=context.get("sources") or "(no source lines could be located)",
            diff=context.get("diff") or "(no recent diff)",
            memory=context.get("memory") or "(nothing recalled)",
            attempts=tried or "(none)",
            checks=checks,
        )
        return [{"role": "system", "content": render("debug_system")}, {"role": "user", "content": user}]

    def scope(self, env: ModeEnv) -> ScopeCheck | None:
        judges = Judges.for_settings(env.settings, self.name)
        return chain(judges.scope() if judges else None, python_syntax_scope)

    async def verify(self, event: Event, plan: Plan, env: ModeEnv) -> Verification:
        configured = env.settings.checks
        names: list[str] = []
        failing = event.payload.get("check")
        if isinstance(failing, str) and failing in configured:
            names.append(failing)
        names += [n for n in plan.verify if n in configured and n not in names]
        if not names:
            names = [n for n, c in configured.items() if not c.fixer]
        if not names:
            return Verification("rolled_back", reason="no configured check to verify the edits with")
        results = [await env.run_check(n) for n in names]
        before = int(event.payload.get("failures") or 1)
        after = sum(count_failures(r) for r in results)
        if all(r.ok for r in results):
            return Verification("fixed", results)
        if after < before:
            return Verification("improved", results, f"failures {before} -> {after}")
        return Verification("rolled_back", results, f"checks still fail ({after} failures, before {before})")
