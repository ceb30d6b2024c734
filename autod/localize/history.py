"""What changed: the diff since the last green revision, or the recent history of the failing files.

git runs as a tool only (autod.git.safe: no hooks, drivers, external diff, textconv or pager from the
repository's config), with a deadline on every call.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from autod.git import safe as gitsafe
from autod.linebreaks import lines_of

GIT_TIMEOUT_S = 20
MAX_GIT_OUTPUT = 4_000_000  # bytes read from one git command, at most
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")
_REV = re.compile(r"^[0-9a-f]{7,64}$")


@dataclass
class FileDiff:
    path: str
    text: str
    changed: list[tuple[int, int]] = field(default_factory=list)  # new-side line ranges touched


async def git(workspace: Path, *args: str) -> str:
    """stdout of one git command in the workspace, run as a tool (autod.git.safe); '' on any trouble."""
    if not (workspace / ".git").exists():
        return ""
    try:
        proc = await gitsafe.arun(workspace, *args, timeout=GIT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout[:MAX_GIT_OUTPUT].decode("utf-8", "replace") if proc.returncode == 0 else ""


async def diff_text(workspace: Path, rev: str | None) -> str:
    """The working tree against `rev` (or HEAD): committed and uncommitted changes, as git prints them."""
    base = rev if rev and _REV.match(rev) else "HEAD"
    return await git(workspace, "diff", "--no-color", "--no-ext-diff", "--no-textconv", base, "--")


async def recent_history(workspace: Path, paths: list[str], commits: int, max_lines: int = 400) -> str:
    """`git log -p` of the last commits touching these files, without patches too large to read."""
    if commits <= 0 or not paths:
        return ""
    out = await git(
        workspace, "log", "--no-color", "--no-ext-diff", "--no-textconv", "-p", f"-n{commits}",
        "--format=commit %h %ad%n    %s", "--date=short", "--", *paths[:20],
    )
    parts = re.split(r"(?m)^(?=commit [0-9a-f]{7,})", out)
    kept = []
    for part in parts:
        lines = part.count("\n")
        if part.strip() and lines <= max_lines and "\nnew file mode" not in part:
            kept.append(part.rstrip())
    return "\n".join(kept)


def split_diff(text: str) -> list[FileDiff]:
    files: list[FileDiff] = []
    for chunk in re.split(r"(?m)^(?=diff --git )", text):
        if not chunk.startswith("diff --git "):
            continue
        m = re.search(r"(?m)^\+\+\+ b/(.+)$", chunk) or re.search(r"^diff --git a/\S+ b/(\S+)", chunk)
        path = m.group(1).strip() if m else "?"
        fd = FileDiff(path, chunk.rstrip())
        new_line = 0
        in_hunk = False
        for line in lines_of(chunk):
            h = _HUNK.match(line)
            if h:
                new_line, in_hunk = int(h.group(1)), True
                continue
            if not in_hunk:
                continue
            if line.startswith("+"):
                fd.changed.append((new_line, new_line))
                new_line += 1
            elif line.startswith("-"):
                fd.changed.append((max(1, new_line - 1), new_line))  # a removal sits between two lines
            elif not line.startswith("\\"):
                new_line += 1
        files.append(fd)
    return files
