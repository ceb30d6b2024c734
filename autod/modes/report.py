"""Facts about the workspace for auto-plan reports: failures, quarantine, hot files, lessons, TODOs."""

from __future__ import annotations

import asyncio
import re
import subprocess
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from autod import logs
from autod.config.settings import Limits
from autod.git import safe as gitsafe
from autod.linebreaks import lines_of
from autod.memory import Tier
from autod.modes import ModeEnv
from autod.paths import GENERATED_DIRS, NOT_SOURCE_DIRS
from autod.safety.boundary import Boundary
from autod.walk import walk

SKIP_DIRS = NOT_SOURCE_DIRS | GENERATED_DIRS
TEXT_SUFFIXES = {
    ".py",
    ".md",
    ".rst",
    ".txt",
    ".js",
    ".ts",
    ".tsx",
    ".go",
    ".rs",
    ".c",
    ".h",
    ".cpp",
    ".java",
    ".sh",
    ".yaml",
    ".yml",
    ".toml",
    ".cfg",
    ".ini",
}
_TODO = re.compile(r"\b(TODO|FIXME|XXX|HACK)\b[:\s]*(.{0,120})")


REPORT_TITLE = "# autod plan report"


def _skipped_dir(path: Path, state_dir: Path) -> bool:
    # any virtualenv, whatever its name, has a pyvenv.cfg
    return path.name in SKIP_DIRS or path.resolve() == state_dir or (path / "pyvenv.cfg").exists()


def find_todos(
    workspace: Path, state_dir: Path, limit: int = 200, boundary: Boundary | None = None
) -> list[dict[str, Any]]:
    """TODO/FIXME/XXX/HACK markers in the workspace's readable text files (never .git, the state dir,
    venvs, deny-glob matches or autod's own files: a report is read like a prompt)."""
    out: list[dict[str, Any]] = []
    reader = boundary or Boundary(workspace, state_dir, Limits().deny_globs)
    state_dir = state_dir.resolve()
    for root, dirs, files in walk(workspace):
        dirs[:] = sorted(d for d in dirs if not _skipped_dir(Path(root, d), state_dir))
        for name in sorted(files):
            p = Path(root, name)
            if p.suffix not in TEXT_SUFFIXES or p.is_symlink():
                continue
            text = reader.read_text(p, max_bytes=1_000_000)
            if text is None:
                continue
            lines = lines_of(text)
            if lines and lines[0].startswith(REPORT_TITLE):
                continue  # an earlier report kept in the workspace: its TODO list is not new TODOs
            for i, line in enumerate(lines, 1):
                m = _TODO.search(line)
                if m:
                    out.append(
                        {
                            "path": p.relative_to(workspace).as_posix(),
                            "line": i,
                            "tag": m.group(1),
                            "text": m.group(2).strip(),
                        }
                    )
                    if len(out) >= limit:
                        return out
    return out


def git_hot_files(workspace: Path, days: int = 30, n: int = 10) -> list[tuple[str, int]]:
    if not (workspace / ".git").exists():
        return []
    try:
        args = ("log", f"--since={days}.days", "--name-only", "--pretty=format:")
        proc = gitsafe.run(workspace, *args, timeout=20)
        out = proc.stdout.decode("utf-8", "replace")
    except (OSError, subprocess.TimeoutExpired):
        return []
    counts = Counter(line for line in lines_of(out) if line.strip())
    return counts.most_common(n)


async def gather_facts(env: ModeEnv) -> dict[str, Any]:
    st = env.state
    recurring = await st.call(st.recurring, 10)
    quarantined = await st.call(st.quarantined)
    history = await st.call(st.history, 200)
    edited = Counter(e["path"] for h in history for e in h.get("edits", []))
    hot_git = await asyncio.to_thread(git_hot_files, env.workspace)
    todos = await asyncio.to_thread(find_todos, env.workspace, env.settings.state_path, 200, env.boundary)
    lessons: list[str] = []
    if env.memory is not None:
        with logs.survive("plan.lessons_unavailable"):  # a report without lessons is still a report
            hits = await env.memory.search("lessons learned fixes failures", tier=Tier.N2, k=10)
            lessons = [h.text for h in hits]
    return {
        "recurring": recurring,
        "quarantined": quarantined,
        "edited": edited.most_common(10),
        "hot_git": hot_git,
        "todos": todos,
        "lessons": lessons,
        "statuses": await st.call(st.counts_by_status),
    }


def rule_actions(facts: dict[str, Any]) -> list[str]:
    """Next actions derived by rules, most urgent first."""
    actions: list[str] = []
    for q in facts["quarantined"]:
        actions.append(
            f"Investigate by hand (autod gave up after {q['attempts']} attempts): {q['summary'][:160]}"
            f" [`{q['fingerprint']}`]"
        )
    for r in facts["recurring"]:
        if r["cycles"] > 1 and not r["fixed"]:
            actions.append(f"Fix the recurring failure seen in {r['cycles']} cycles: {r['summary'][:160]}")
    for path, n in facts["edited"][:3]:
        if n > 2:
            actions.append(f"Review `{path}`: autod edited it {n} times; it may need a test or a refactor")
    by_file = Counter(t["path"] for t in facts["todos"] if t["tag"] in ("FIXME", "XXX"))
    for path, n in by_file.most_common(3):
        actions.append(f"Resolve {n} FIXME/XXX markers in `{path}`")
    todo_files = Counter(t["path"] for t in facts["todos"] if t["tag"] == "TODO")
    for path, n in todo_files.most_common(2):
        actions.append(f"Triage {n} TODOs in `{path}`")
    if not actions:
        actions.append("Nothing urgent: no recurring failures, quarantined items or FIXMEs found")
    return actions


def render_facts(facts: dict[str, Any]) -> str:
    lines: list[str] = []
    lines.append("## Recurring failures")
    rec = [r for r in facts["recurring"]]
    lines += [
        f"- `{r['fingerprint']}` seen in {r['cycles']} cycles, fixed {r['fixed'] or 0}: {r['summary'][:200]}"
        for r in rec
    ] or ["- none"]
    lines.append("\n## Quarantined")
    lines += [
        f"- `{q['fingerprint']}` after {q['attempts']} attempts: {q['summary'][:200]}"
        for q in facts["quarantined"]
    ] or ["- none"]
    lines.append("\n## Hot files")
    hot = [f"- `{p}`: edited by autod {n}x" for p, n in facts["edited"]]
    hot += [f"- `{p}`: {n} commits in 30 days" for p, n in facts["hot_git"]]
    lines += hot or ["- none"]
    lines.append("\n## Lessons learned")
    lines += [f"- {t[:300]}" for t in facts["lessons"]] or ["- none yet"]
    lines.append("\n## TODO / FIXME")
    lines += [f"- `{t['path']}:{t['line']}` {t['tag']}: {t['text']}" for t in facts["todos"][:50]] or [
        "- none"
    ]
    if len(facts["todos"]) > 50:
        lines.append(f"- … and {len(facts['todos']) - 50} more")
    return "\n".join(lines)


def render_report(facts: dict[str, Any], actions_md: str, *, planned_by: str) -> str:
    day = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"{REPORT_TITLE} — {day}\n\n{render_facts(facts)}\n\n"
        f"## Next actions ({planned_by})\n{actions_md.strip()}\n"
    )
