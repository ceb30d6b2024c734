"""The rule for a fix planned on the working tree and delivered from HEAD.

A plan is made and checked against the files as the operator has them (the working tree). A branch or a
patch starts from HEAD. For each file of the fix:
- the working file is HEAD's version: the fixed file is taken as it is;
- it has uncommitted changes: autod's own edit (the working file before -> after the fix) is re-applied
  to HEAD's version with a three-way merge (`git merge-file`); the operator's uncommitted changes are not
  carried onto the branch;
- the edit overlaps the uncommitted changes, the file is not in HEAD (untracked, or only added to the
  index), or the plan creates a file HEAD has: the delivery is refused, naming each file, and nothing
  is written (the cycle is `rejected`; the re-plan sees why).
What is verified is HEAD with the fix: the mirror gets HEAD's version of every tracked file the working
tree changes, then the fix (untracked files the working tree holds are still in the mirror).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from autod.act import linediff
from autod.act.edits import FileChange
from autod.delivery.plumbing import Blob, git, head_file, merge_file, rev
from autod.errors import PlanRejected

MAX_DIRTY_FILES = 5000  # tracked files changed in the working tree that the mirror is set back for


@dataclass
class OnHead:
    base: str  # the HEAD commit the delivery starts from
    files: dict[str, Blob]  # the fix, file by file, as it goes on top of `base`
    edits: list[dict[str, object]]  # path, added, removed (against HEAD's version)
    reapplied: list[str] = field(default_factory=list)  # files whose uncommitted changes were left out
    head_view: dict[str, Blob] = field(default_factory=dict)  # HEAD's version of files the tree changes


def on_head(workspace: Path, tmp_dir: Path, changes: list[FileChange]) -> OnHead:
    """The fix as it applies to HEAD (blocking). PlanRejected names every file it does not apply to."""
    base = rev(workspace, "HEAD")
    if base is None:
        raise PlanRejected("the repository has no commit yet: branch and patch delivery start from HEAD")
    files: dict[str, Blob] = {}
    edits: list[dict[str, object]] = []
    reapplied: list[str] = []
    refused: list[str] = []
    for c in changes:
        head = head_file(workspace, base, c.rel)
        exec_bit = bool((c.mode or 0) & 0o111)
        if c.old is None:
            if head is not None:
                refused.append(f"{c.rel} (the plan creates it, but HEAD has it: deleted in the working tree)")
                continue
            new, old_text = c.new, ""
            mode = "100755" if exec_bit else "100644"
        elif head is None:
            refused.append(f"{c.rel} (not in HEAD: untracked or only added; commit it first)")
            continue
        elif head.data == c.old:
            new, old_text, mode = c.new, _text(head.data), head.mode
        else:
            merged = merge_file(workspace, tmp_dir, head.data, c.old, c.new)
            if merged is None:
                refused.append(f"{c.rel} (autod's edit overlaps your uncommitted changes there)")
                continue
            new, old_text, mode = merged, _text(head.data), head.mode
            reapplied.append(c.rel)
        added, removed = linediff.count(old_text, _text(new))
        files[c.rel] = Blob(mode, new)
        edits.append({"path": c.rel, "added": added, "removed": removed})
    if refused:
        raise PlanRejected(
            "the fix does not apply to HEAD's version of "
            + "; ".join(refused)
            + ": nothing was delivered (branch and patch start from HEAD; commit or stash your changes)"
        )
    return OnHead(base, files, edits, reapplied, head_view(workspace, base, skip=set(files)))


def head_view(workspace: Path, base: str, *, skip: set[str]) -> dict[str, Blob]:
    """HEAD's version of each tracked file the working tree changes (or deletes), except `skip`."""
    r = git(workspace, "diff", "--no-renames", "--name-only", "-z", base, "--")
    if r.returncode != 0:
        raise PlanRejected("git diff against HEAD failed: cannot tell HEAD's files from the working tree")
    names = [n.decode("utf-8", "replace") for n in r.stdout.split(b"\0") if n]
    if len(names) > MAX_DIRTY_FILES:
        raise PlanRejected(
            f"the working tree changes {len(names)} tracked files (over {MAX_DIRTY_FILES}):"
            " too many to verify HEAD with the fix; commit or stash them"
        )
    out: dict[str, Blob] = {}
    for rel in names:
        if rel in skip:
            continue
        blob = head_file(workspace, base, rel)
        if blob is not None:
            out[rel] = blob
    return out


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")
