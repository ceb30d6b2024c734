"""Taking back what one kept cycle wrote into the working tree (blocking; the daemon calls it in a thread
under the workspace lock).

Every file must still hold exactly what autod wrote, or nothing is done and each file changed since is
named. Restores go through the act journal (originals saved, atomic swaps that never replace a file that
changed meanwhile), so a crash mid-undo leaves each file as autod wrote it or as it was, and the next
start finishes the job the journal's way (the undo rolled back). A file autod created is moved aside,
checked, and only then removed.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from autod import atomicfile, fsnames
from autod.act import atomic, linediff
from autod.act.edits import FileChange, check_chain
from autod.act.journal import Journal
from autod.errors import PlanRejected
from autod.git import safe as gitsafe
from autod.git.ops import was_clean
from autod.linebreaks import lines_of
from autod.undo.ledger import KeptCycle


class UndoRefused(Exception):
    """Nothing was written; `reason` says why (each file changed since, or what is missing)."""

    def __init__(self, reason: str, files: list[str] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.files = files or []


@dataclass
class Reverted:
    restored: list[str] = field(default_factory=list)  # files back to their originals
    removed: list[str] = field(default_factory=list)  # files autod had created, removed
    edits: list[dict[str, object]] = field(default_factory=list)  # path, added, removed (as a record has)
    before: dict[str, bytes] = field(default_factory=dict)  # what autod had written, per file


def plan_revert(
    workspace: Path, kept: KeptCycle
) -> tuple[list[FileChange], list[tuple[str, Path, str]], Reverted]:
    """The restores and removals undoing `kept`; UndoRefused naming each file changed since autod wrote it."""
    changed: list[str] = []
    restores: list[FileChange] = []
    removals: list[tuple[str, Path, str]] = []
    done = Reverted()
    for f in kept.files:
        path = workspace / f.rel
        try:
            check_chain(workspace, f.rel)
            current = atomic.read_current(path)
        except (PlanRejected, OSError):
            changed.append(f"{f.rel} (no longer a regular file autod can read)")
            continue
        if current is None:
            changed.append(f"{f.rel} (deleted since)")
            continue
        if atomic.sha(current) != f.new_sha256:
            changed.append(f"{f.rel} (changed since autod wrote it)")
            continue
        done.before[f.rel] = current
        if not f.existed:
            removals.append((f.rel, path, f.new_sha256))
            done.edits.append(
                {"path": f.rel, "added": 0, "removed": len(lines_of(_text(current)))}
            )
            continue
        original = kept.original(f)
        mode = os.stat(path).st_mode & 0o7777
        added, removed = linediff.count(_text(current), _text(original))
        restores.append(FileChange(f.rel, path, current, original, mode, added, removed))
        done.edits.append({"path": f.rel, "added": added, "removed": removed})
    if changed:
        raise UndoRefused(
            f"cycle {kept.cycle_id} not undone: {', '.join(changed)}; nothing was written",
            [c.split(" (")[0] for c in changed],
        )
    return restores, removals, done


def revert(state_dir: Path, workspace: Path, kept: KeptCycle, undo_id: str) -> Reverted:
    """Undo `kept` in the working tree (all or nothing while checking; then journalled writes)."""
    restores, removals, done = plan_revert(workspace, kept)
    if restores:
        journal = Journal.begin(state_dir, undo_id)
        journal.apply(restores)  # PlanRejected if a file is saved meanwhile: every restore rolled back
        journal.keep()
        done.restored = [c.rel for c in restores]
    for rel, path, ours in removals:
        if _remove_if_ours(path, ours):
            done.removed.append(rel)
    return done


def _remove_if_ours(path: Path, ours: str) -> bool:
    """Remove a file autod created, unless it changed: moved aside first, so a save cannot slip in."""
    aside = path.parent / f"{atomicfile.tmp_prefix(path.name)}{secrets.token_hex(6)}"
    os.rename(path, aside)
    if atomic.sha(atomic.read_current(aside)) == ours:
        os.unlink(aside)
        atomicfile.fsync_dir(path.parent)
        return True
    if not atomic.place_new(aside, path):  # re-created meanwhile: keep both, never overwrite
        os.rename(aside, path.parent / f"{path.name}.autod-saved-{secrets.token_hex(4)}")
    return False


def commit_revert(
    workspace: Path, kept: KeptCycle, done: Reverted, undo_id: str, reason: str
) -> dict[str, object]:
    """With `git.commit`, a revert commit of the files undone (those that had no one else's change)."""
    if not (workspace / ".git").exists():
        return {"committed": None, "reason": "not a git repository"}
    mine = [rel for rel in done.restored + done.removed if was_clean(workspace, rel, done.before[rel])]
    left = [rel for rel in done.restored + done.removed if rel not in mine]
    if not mine:
        return {"committed": None, "skipped": left, "reason": "every file had someone else's changes"}
    ident: list[str] = []
    if not _git(workspace, "config", "user.email").stdout.strip():
        ident = ["-c", "user.name=autod", "-c", "user.email=autod@localhost"]
    subject = lines_of((kept.plan_summary or "autod edit").strip())[0][:150]
    message = (
        f'Revert "{subject}"\n\nThis reverts commit {kept.commit} (autod cycle {kept.cycle_id}).\n'
        f"Reason: {reason[:500]}\n\nAutod-Undo: {kept.cycle_id}\nAutod-Cycle: {undo_id}\n"
    )
    if _git(workspace, "add", "-A", "--", *mine).returncode != 0:
        return {"committed": None, "skipped": left, "reason": "git add failed"}
    text = fsnames.shown(message).encode()  # what it quotes may name a file that is not UTF-8
    r = _git(workspace, *ident, "commit", "--no-verify", "-q", "-F", "-", "--", *mine, input=text)
    if r.returncode != 0:
        _git(workspace, "reset", "-q", "--", *mine)
        tail = lines_of(r.stderr.decode("utf-8", "replace").strip())[-1:] or [""]
        return {"committed": None, "skipped": left, "reason": f"git commit failed: {tail[0][:200]}"}
    rev = _git(workspace, "rev-parse", "HEAD").stdout.decode().strip()
    return {"committed": rev, "skipped": left, "reason": None}


def _git(workspace: Path, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return gitsafe.run(workspace, *args, input=input, timeout=60)


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")
