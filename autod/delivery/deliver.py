"""Delivering a verified fix as a branch or a patch: the seam a cycle calls, instead of writing the
working tree, when its mode's `delivery` is `branch` or `patch`.

`Delivery.act(mode, event, record, env, plan, changes)` checks the cap, takes the fix onto HEAD
(autod.delivery.rebase), has it verified away from the working tree (autod.delivery.verify), then
commits it on the failure's branch (one per mode and fingerprint, replaced by each new fix, never one
per cycle) and pushes it, or writes it as a patch in `<state_dir>/outbox/`. A branch autod did not
make, or one someone changed since autod's last commit, is never moved: the fix goes to a patch
instead and the problem is logged and shown by `autod status`. A refused push is the same: the local
branch keeps the fix, nothing is forced.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from autod import atomicfile
from autod.act import atomic
from autod.act.describe import describe_fix, made_pass
from autod.act.edits import FileChange
from autod.delivery import plumbing as g
from autod.delivery.inventory import Inventory
from autod.delivery.ledger import OPEN, CycleDelivery, Row
from autod.delivery.message import branch_name, commit_message, patch_name
from autod.delivery.rebase import OnHead, on_head
from autod.delivery.takeback import TakeBack
from autod.errors import CycleError
from autod.modes import Verification

if TYPE_CHECKING:
    from autod.events import Event
    from autod.modes import Mode, ModeEnv
    from autod.plan import Plan
    from autod.reflection import Reflection

log = structlog.get_logger("autod.delivery")

DELIVERED = ("fixed", "improved")


class DeliveryHeld(CycleError):
    """The cap of open branches and patches is reached: the event waits and is tried again."""

    external = True


class DeliveryFailed(CycleError):
    """git could not write the branch or the patch (a full disk, a broken repository): the event is
    tried again later, so a verified fix is not lost."""

    external = True


@dataclass(frozen=True)
class Facts:
    """What a delivery says about its cycle."""

    cycle_id: str
    mode: str
    fingerprint: str
    summary: str
    excerpt: str
    plan_summary: str
    described: str = ""  # the fix read from its diff (autod.act.describe)

    @property
    def key(self) -> str:
        return f"{self.mode}:{self.fingerprint}"


class Delivery(Inventory, TakeBack):
    """The seam the cycle calls for branch and patch modes (with the cap, the inventory and undo)."""

    # -- the seam the cycle calls -----------------------------------------------------------
    async def act(self, mode: Mode, event: Event, r: Reflection, env: ModeEnv, plan: Plan,
                  changes: list[FileChange]) -> Verification:
        """Verify `changes` away from the working tree and deliver them; the cycle's record `r` says where."""
        kind = self.kind(mode.name)
        facts = Facts(
            r.cycle_id,
            mode.name,
            event.fingerprint,
            event.summary,
            str(event.payload.get("excerpt") or ""),
            plan.summary,
        )
        why = await self.verifier.unavailable()
        if why is not None:
            raise CycleError(
                f"delivery {kind} needs the fix verified away from the working tree, which cannot"
                f" be done here ({why}): nothing was delivered or written"
            )
        await asyncio.to_thread(self._room_for, facts)
        fix = await asyncio.to_thread(on_head, self.workspace, self.tmp_dir, changes)  # PlanRejected: refused
        r.edits = list(fix.edits)
        verification = await self.verifier.verify(mode, event, plan, fix, env)
        r.checks = [c.record() for c in verification.checks]
        if verification.status not in DELIVERED:
            r.delivery = {"kind": kind, "outcome": "not_delivered", "reason": "the fix did not hold on HEAD"}
            return verification
        r.fix = describe_fix(changes, made_pass(event.payload, verification.status))
        facts = replace(facts, described=r.fix)
        try:
            out = await asyncio.to_thread(self._deliver, kind, facts, fix, verification)
        except (g.GitError, OSError, subprocess.TimeoutExpired) as exc:
            self._count(kind, "failed")
            raise DeliveryFailed(
                f"delivery {kind} failed: {exc if isinstance(exc, g.GitError) else type(exc).__name__}"
                "; the working tree was not written"
            ) from None
        r.delivery, r.commit = out, out.get("commit")
        self._count(kind, out["outcome"])
        log.info(
            "delivery.delivered",
            **{
                k: v
                for k, v in out.items()
                if k in ("kind", "outcome", "branch", "patch", "commit", "reapplied", "problem")
            },
        )
        return verification

    def _room_for(self, facts: Facts) -> None:
        """The cap, checked again where the cycle delivers (an approval does not pass the gate)."""
        held = self.held_reason(facts.key, facts.mode, facts.fingerprint, facts.summary)
        if held is not None:
            raise DeliveryHeld(held)

    # -- delivering (blocking) ------------------------------------------------------------------
    def _deliver(self, kind: str, facts: Facts, fix: OnHead, v: Verification) -> dict[str, Any]:
        message = commit_message(
            mode=facts.mode,
            described=facts.described,
            plan_summary=facts.plan_summary,
            event_summary=facts.summary,
            excerpt=facts.excerpt,
            edits=fix.edits,
            reapplied=fix.reapplied,
            base=fix.base,
            status=v.status,
            reason=v.reason,
            checks=[c.record() for c in v.checks],
            cycle_id=facts.cycle_id,
            fingerprint=facts.fingerprint,
        )
        commit = g.build_commit(
            self.workspace, self._index(), fix.base, dict(fix.files), message, g.identity(self.workspace)
        )
        if kind == "patch":
            return self._patch(facts, facts.key, fix, commit)
        return self._branch(facts, fix, commit)

    def _branch(self, facts: Facts, fix: OnHead, commit: str) -> dict[str, Any]:
        ws, cfg = self.workspace, self.settings.delivery
        row = self.ledger.get(facts.key)
        mine = row if row is not None and row.kind == "branch" else None
        twin = None if mine else self._open_branch_with(commit)
        if twin is not None:  # one fix, one branch: the same change from another event (a manual trigger)
            return self._already_on(twin, facts, fix)
        name = (
            mine.name
            if mine
            else branch_name(cfg.branch_prefix, facts.mode, facts.summary, facts.fingerprint)
        )
        if not g.valid_branch(ws, name):
            name = f"{cfg.branch_prefix}/{facts.mode}/fix-{facts.fingerprint[:10]}"
        ref = f"refs/heads/{name}"
        tip = g.rev(ws, ref)
        expected = mine.commit_id if mine else None
        if tip is not None and (tip != expected or g.checked_out(ws, ref)):
            return self._refused(facts, fix, commit, name, mine)
        if tip is not None and _same_change(ws, tip, commit):
            commit = tip  # nothing new: the branch already holds this fix on this HEAD
        elif not g.update_ref(ws, ref, commit, tip, f"autod: cycle {facts.cycle_id} ({facts.mode})"):
            return self._refused(facts, fix, commit, name, mine)  # moved between the look and the update
        now = time.time()
        self.ledger.put(
            Row(
                facts.key,
                "branch",
                facts.mode,
                facts.fingerprint,
                name,
                facts.summary[:300],
                commit,
                mine.pushed if mine else None,
                None,
                OPEN,
                facts.cycle_id,
                None,
                mine.created_at if mine else now,
                now,
            )
        )
        self.ledger.record_cycle(
            CycleDelivery(
                facts.cycle_id,
                facts.key,
                "branch",
                name,
                commit,
                fix.base,
                sorted(fix.files),
                None,
                now,
                None,
            )
        )
        out: dict[str, Any] = {
            "kind": "branch",
            "outcome": "delivered",
            "branch": name,
            "commit": commit,
            "base": fix.base,
            "reapplied": fix.reapplied,
        }
        if cfg.push:
            out["push"] = self._push(facts.key, name, commit, mine.pushed if mine else None)
            if not out["push"]["ok"]:
                out["problem"] = out["push"]["reason"]
        return out

    def _open_branch_with(self, commit: str) -> Row | None:
        """An open autod branch, as autod left it, whose tip makes the same change as `commit` on the
        same parent: the fix is there already, under another event's key."""
        for row in self.ledger.rows((OPEN,)):
            if row.kind != "branch" or not row.commit_id:
                continue
            if g.rev(self.workspace, f"refs/heads/{row.name}") != row.commit_id:
                continue  # moved by someone since: not autod's to speak for
            if _same_change(self.workspace, row.commit_id, commit):
                return row
        return None

    def _already_on(self, twin: Row, facts: Facts, fix: OnHead) -> dict[str, Any]:
        assert twin.commit_id is not None
        now = time.time()
        self.ledger.record_cycle(
            CycleDelivery(facts.cycle_id, twin.key, "branch", twin.name, twin.commit_id, fix.base,
                          sorted(fix.files), None, now, None)
        )
        out: dict[str, Any] = {
            "kind": "branch",
            "outcome": "delivered",
            "branch": twin.name,
            "commit": twin.commit_id,
            "base": fix.base,
            "reapplied": fix.reapplied,
            "same_as": twin.cycle_id,  # the cycle that delivered this very change first
        }
        if self.settings.delivery.push:
            out["push"] = self._push(twin.key, twin.name, twin.commit_id, twin.pushed)
            if not out["push"]["ok"]:
                out["problem"] = out["push"]["reason"]
        return out

    def _refused(self, facts: Facts, fix: OnHead, commit: str, name: str, mine: Row | None) -> dict[str, Any]:
        """The branch is someone else's (never autod's, or changed since): not touched; a patch instead."""
        if g.checked_out(self.workspace, f"refs/heads/{name}"):
            whose = "is checked out in a worktree"
        elif mine:
            whose = "was changed by someone else since autod's last commit"
        else:
            whose = "exists and was not made by autod"
        patch = self._patch(facts, f"{facts.key}#patch", fix, commit)
        problem = f"branch {name} {whose}: not updated (never overwritten); the fix is in {patch['patch']}"
        if mine is not None:
            self.ledger.set_state(facts.key, "changed", problem)
        self.ledger.problem(facts.key, name, problem)
        log.warning("delivery.branch_refused", branch=name, reason=whose, patch=patch["patch"])
        return {**patch, "kind": "branch", "outcome": "patch_instead", "branch": name, "problem": problem}

    def _patch(self, facts: Facts, key: str, fix: OnHead, commit: str) -> dict[str, Any]:
        self.outbox.mkdir(mode=0o700, parents=True, exist_ok=True)
        row = self.ledger.get(key)
        path = (
            Path(row.name)
            if row is not None and row.kind == "patch"
            else (self.outbox / patch_name(facts.mode, facts.summary, facts.fingerprint))
        )
        data = g.format_patch(self.workspace, commit)
        current = atomic.read_current(path)
        if current is not None and (row is None or atomic.sha(current) != row.digest):
            path = path.with_name(f"{path.stem}-{facts.cycle_id}.patch")  # someone's edit of it stays
        atomicfile.atomic_write(path, data, 0o600)
        now = time.time()
        digest = atomic.sha(data)
        self.ledger.put(
            Row(
                key,
                "patch",
                facts.mode,
                facts.fingerprint,
                str(path),
                facts.summary[:300],
                commit,
                None,
                digest,
                OPEN,
                facts.cycle_id,
                None,
                row.created_at if row else now,
                now,
            )
        )
        self.ledger.record_cycle(
            CycleDelivery(
                facts.cycle_id,
                key,
                "patch",
                str(path),
                commit,
                fix.base,
                sorted(fix.files),
                digest,
                now,
                None,
            )
        )
        return {
            "kind": "patch",
            "outcome": "delivered",
            "patch": str(path),
            "commit": commit,
            "base": fix.base,
            "reapplied": fix.reapplied,
        }


def _same_change(ws: Path, tip: str, commit: str) -> bool:
    """Whether `commit` makes the same tree on the same parent as the branch's tip."""
    with contextlib.suppress(g.GitError):
        return g.tree_of(ws, tip) == g.tree_of(ws, commit) and g.parent_of(ws, tip) == g.parent_of(ws, commit)
    return False
