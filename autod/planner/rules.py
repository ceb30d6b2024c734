"""The offline rules planner: the embedded default when no LLM is configured.

- auto-debug: runs the operator's checks marked `fixer: true` (e.g. `ruff check --fix`) in a scratch
  copy of the workspace and turns what they changed into a Plan, so the fix goes through the same act
  rules, caps, journal and verification as any LLM plan. It never runs anything else.
- auto-doc / auto-plan: report what was found; no invented prose.
"""

from __future__ import annotations

import asyncio
import shlex
import shutil
import tempfile
from collections import Counter
from collections.abc import Awaitable, Iterable
from pathlib import Path
from typing import Protocol

import structlog

from autod.act.linediff import split_lines, unified
from autod.config.models import CheckConfig
from autod.config.settings import Settings
from autod.errors import PlanInvalid
from autod.linebreaks import lines_of
from autod.paths import NOT_SOURCE_DIRS
from autod.plan import Edit, Plan
from autod.planner import PlanRequest, PlanResult
from autod.safety.saferead import read_untrusted
from autod.walk import walk

log = structlog.get_logger("autod.planner.rules")

SCRATCH_SKIP = NOT_SOURCE_DIRS  # build output is copied: a fixer may read it
MAX_SCRATCH_BYTES = 200_000_000
MAX_FILE_BYTES = 32 * 2**20  # one file a fixer rewrote, read back


def _copy_workspace(workspace: Path, state_dir: Path, dest: Path) -> None:
    state = state_dir.resolve()
    total = 0

    def ignore(directory: str, names: list[str]) -> set[str]:
        nonlocal total
        skipped = set()
        for n in names:
            p = Path(directory, n)
            # No symlinks in the scratch copy: a fixer writing through one would edit the real files.
            if n in SCRATCH_SKIP or p.is_symlink() or p.resolve() == state:
                skipped.add(n)
            elif p.is_file() and not p.is_symlink():
                total += p.stat().st_size
        if total > MAX_SCRATCH_BYTES:
            raise PlanInvalid("workspace too large for the offline fixer's scratch copy")
        return skipped

    try:
        shutil.copytree(workspace, dest, symlinks=True, ignore=ignore, dirs_exist_ok=True)
    except RecursionError:  # copytree recurses once per directory level
        why = "the workspace's directories nest too deeply for the offline fixer's scratch copy"
        raise PlanInvalid(why) from None


def _diff_trees(original: Path, scratch: Path, skip: set[str]) -> list[Edit]:
    """Whole-file edits for every text file the fixer changed (new files are not taken)."""
    edits: list[Edit] = []
    for root, dirs, files in walk(scratch):
        dirs[:] = sorted(d for d in dirs if d not in skip)
        for name in sorted(files):
            new_path = Path(root, name)
            rel = new_path.relative_to(scratch)
            old_path = original / rel
            if new_path.is_symlink() or not old_path.is_file() or old_path.is_symlink():
                continue
            try:
                old = read_untrusted(old_path, cap=MAX_FILE_BYTES)
                new = read_untrusted(new_path, cap=MAX_FILE_BYTES)
            except OSError:
                continue
            if old == new or not old:
                continue
            try:
                edits.append(
                    Edit(path=rel.as_posix(), search=old.decode("utf-8"), replace=new.decode("utf-8"))
                )
            except UnicodeDecodeError:
                continue
    return edits


def _names_workspace(command: str, workspace: Path) -> bool:
    """A fixer argument naming a path inside the workspace would edit it directly, not the scratch copy.

    The executable itself may live there (a `.venv` the scratch copy leaves out).
    """
    root = workspace.resolve()
    try:
        args = shlex.split(command)[1:]
    except ValueError:
        return False
    for arg in args:
        value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        if value.startswith(("/", "~")) and Path(value).expanduser().resolve().is_relative_to(root):
            return True
    return False


def _changed_lines(diff_lines: Iterable[str]) -> Counter[str]:
    return Counter(
        line.rstrip("\n") for line in diff_lines
        if line[:1] in "+-" and not line.startswith(("+++ ", "--- "))
    )


def _same_change(edits: list[Edit], diff: str) -> bool:
    """Whether `edits` add and remove exactly the lines an attempt's unified diff did."""
    if not diff:
        return False
    mine: Counter[str] = Counter()
    for e in edits:
        old, new = split_lines(e.search), split_lines(e.replace)
        mine += _changed_lines(unified(old, new, f"a/{e.path}", f"b/{e.path}", n=0))
    return mine == _changed_lines(lines_of(diff))


class Ran(Protocol):
    exit_code: int


class RunsFixer(Protocol):
    """How a fixer check runs in the scratch copy (autod.checks.run.run_check: sandboxed like any check)."""

    def __call__(self, name: str, check: CheckConfig, cwd: Path, *, settings: Settings) -> Awaitable[Ran]: ...


class RulesPlanner:
    """Satisfies autod.planner.Planner without any network."""

    def __init__(self, settings: Settings, run_check: RunsFixer) -> None:
        self.settings = settings
        self.run_check = run_check

    async def plan(self, request: PlanRequest) -> PlanResult:
        if request.mode == "auto-debug":
            return PlanResult(await self._fixers(request))
        if request.mode == "auto-plan":
            return PlanResult(
                Plan(summary="next actions derived by rules", report=request.context.get("rules"))
            )
        report = request.context.get("report") or request.context.get("rules") or "nothing found"
        return PlanResult(Plan(summary=f"{request.mode}: findings reported (offline planner)", report=report))

    async def _fixers(self, request: PlanRequest) -> Plan:
        ws, state = self.settings.workspace, self.settings.state_path
        fixers = {n: c for n, c in self.settings.checks.items() if c.fixer}
        for name, check in list(fixers.items()):
            if _names_workspace(check.run, ws):
                log.warning(
                    "plan.fixer_skipped",
                    reason="the fixer names a path in the workspace; it must use relative ones",
                    check=name,
                )
                del fixers[name]
        if not fixers:
            return Plan(
                summary="no LLM configured and no fixer checks (`fixer: true`) to run: reported only",
                report=f"Unfixed: {request.event.summary}",
            )
        # an earlier cycle's attempt is no reason to skip: a retry is for trying again
        tried_here = [str(a.get("diff") or "") for a in request.context.get("attempts", [])
                      if not a.get("earlier_cycle")]
        with tempfile.TemporaryDirectory(prefix="autod-fix-") as tmp:
            scratch = Path(tmp) / "ws"
            await asyncio.to_thread(_copy_workspace, ws, state, scratch)
            ran = []
            for name, check in fixers.items():
                result = await self.run_check(name, check, scratch, settings=self.settings)
                ran.append(f"{name} (exit {result.exit_code})")
            edits = await asyncio.to_thread(_diff_trees, ws, scratch, SCRATCH_SKIP)
        if not edits:
            return Plan(summary=f"fixer checks changed no file ({', '.join(ran)})", edits=[])
        files = ", ".join(e.path for e in edits)
        if any(_same_change(edits, diff) for diff in tried_here):
            return Plan(
                summary=f"fixer checks {', '.join(ran)} changed {files} exactly as the attempt this cycle"
                " rolled back: not applied twice",
                edits=[],
            )
        summary = f"fixer checks {', '.join(ran)} changed {files}"
        log.info("plan.fixer_edits", files=[e.path for e in edits])
        return Plan(summary=summary, edits=edits, verify=[])
