"""`autod undo` of a branch or patch delivery: a revert commit on the failure's branch (only while the
branch is as autod left it), or the patch withdrawn from the outbox (unless someone edited it)."""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import Any

from autod.act import atomic
from autod.delivery import plumbing as g
from autod.delivery.desk import Desk, log
from autod.delivery.ledger import CycleDelivery


class TakeBack(Desk):
    # -- undo ----------------------------------------------------------------------------------
    def undo(self, cycle_id: str, undo_id: str, reason: str) -> dict[str, Any] | None:
        """Take back what a cycle delivered (blocking); None when it delivered nothing."""
        d = self.ledger.cycle(cycle_id)
        if d is None:
            return None
        if d.undone_by:
            return {"ok": False, "error": f"cycle {d.cycle_id} was already undone (by {d.undone_by})"}
        out = self._withdraw_patch(d) if d.kind == "patch" else self._revert_branch(d, undo_id, reason)
        if out.get("ok"):
            self.ledger.mark_undone(d.cycle_id, undo_id)
        return {**out, "cycle_id": d.cycle_id, "files": d.files}

    def _withdraw_patch(self, d: CycleDelivery) -> dict[str, Any]:
        path = Path(d.name)
        current = atomic.read_current(path)
        if current is None:
            return {
                "ok": False,
                "error": f"cycle {d.cycle_id} not undone: its patch {path} is gone (applied or"
                " removed); undo it in your own history",
            }
        if atomic.sha(current) != d.digest:
            return {
                "ok": False,
                "error": f"cycle {d.cycle_id} not undone: {path} changed since autod wrote it",
            }
        aside = path.with_name(f".{path.name}.withdrawn-{secrets.token_hex(4)}")
        os.rename(path, aside)
        if atomic.sha(atomic.read_current(aside)) != d.digest:
            os.rename(aside, path)
            return {
                "ok": False,
                "error": f"cycle {d.cycle_id} not undone: {path} changed since autod wrote it",
            }
        os.unlink(aside)
        self.ledger.set_state(d.key, "withdrawn")
        log.info("delivery.patch_withdrawn", patch=str(path), cycle=d.cycle_id)
        return {"ok": True, "kind": "patch", "withdrawn": str(path)}

    def _revert_branch(self, d: CycleDelivery, undo_id: str, reason: str) -> dict[str, Any]:
        ws = self.workspace
        ref = f"refs/heads/{d.name}"
        tip = g.rev(ws, ref)
        row = self.ledger.get(d.key)
        if tip is None:
            return {"ok": False, "error": f"cycle {d.cycle_id} not undone: branch {d.name} no longer exists"}
        if tip != d.commit_id:
            if row is not None and tip == row.commit_id:
                why = f"branch {d.name} has moved on: cycle {row.cycle_id} replaced this cycle's commit"
            else:
                why = f"branch {d.name} was changed by someone else since autod's commit (never overwritten)"
            return {"ok": False, "error": f"cycle {d.cycle_id} not undone: {why}"}
        if g.checked_out(ws, ref):
            return {"ok": False, "error": f"cycle {d.cycle_id} not undone: branch {d.name} is checked out"}
        if g.is_ancestor(ws, tip, "HEAD"):
            return {
                "ok": False,
                "error": f"cycle {d.cycle_id} not undone: branch {d.name} is merged into HEAD;"
                " revert it in your own history",
            }
        parent = d.parent or g.parent_of(ws, tip) or tip
        files = {rel: g.head_file(ws, parent, rel) for rel in d.files}
        subject = _subject(ws, tip)
        message = (
            f'Revert "{subject}"\n\nThis reverts commit {tip} (autod cycle {d.cycle_id}).\n'
            f"Reason: {reason[:500]}\n\nAutod-Undo: {d.cycle_id}\nAutod-Cycle: {undo_id}\n"
        )
        revert = g.build_commit(ws, self._index(), tip, files, message, g.identity(ws))
        if not g.update_ref(ws, ref, revert, tip, f"autod: undo cycle {d.cycle_id}"):
            return {"ok": False, "error": f"cycle {d.cycle_id} not undone: branch {d.name} moved meanwhile"}
        if row is not None:
            row.commit_id, row.state, row.updated_at, row.cycle_id = revert, "withdrawn", time.time(), undo_id
            self.ledger.put(row)
        out: dict[str, Any] = {"ok": True, "kind": "branch", "branch": d.name, "commit": revert}
        if self.settings.delivery.push and row is not None and row.pushed:
            out["push"] = self._push(d.key, d.name, revert, row.pushed)
        log.info("delivery.branch_reverted", branch=d.name, commit=revert, cycle=d.cycle_id)
        return out


def _subject(ws: Path, commit: str) -> str:
    r = g.git(ws, "log", "-1", "--format=%s", commit)
    return r.stdout.decode("utf-8", "replace").strip()[:150] or "autod fix"
