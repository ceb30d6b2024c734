"""Delivering a verified fix as a branch or a patch: the seam a cycle calls, instead of writing the
working tree, when its mode's `delivery` is `branch` or `patch`.

`Delivery.act(cycle, plan, changes)` checks the cap, takes the fix onto HEAD (autod.delivery.rebase),
has it verified away from the working tree (autod.delivery.verify), then commits it on the failure's
branch (one per mode and fingerprint, replaced by each new fix, never one per cycle) and pushes it, or
writes it as a patch in `<state_dir>/outbox/`. A branch autod did not make, or one someone changed since
autod's last commit, is never moved: the fix goes to a patch instead and the problem is logged and shown
by `autod status`. A refused push is the same: the local branch keeps the fix, nothing is forced.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from autod.act import atomic
from autod.act.edits import FileChange
from autod.config import Settings
from autod.delivery import plumbing as g
from autod.delivery.ledger import OPEN, CycleDelivery, DeliveryLedger, Row
from autod.delivery.message import branch_name, commit_message, patch_name
from autod.delivery.rebase import OnHead, on_head
from autod.delivery.verify import Verifier
from autod.errors import CycleError
from autod.modes import Verification

if TYPE_CHECKING:
    from autod.cycle import Cycle
    from autod.plan import Plan

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

    @property
    def key(self) -> str:
        return f"{self.mode}:{self.fingerprint}"


class Delivery:
    def __init__(
        self, settings: Settings, ledger: DeliveryLedger, verifier: Verifier, metrics: Any = None
    ) -> None:
        self.settings = settings
        self.ledger = ledger
        self.verifier = verifier
        self.metrics = metrics

    @property
    def workspace(self) -> Path:
        return self.settings.workspace

    @property
    def tmp_dir(self) -> Path:
        return self.settings.state_path / "delivery"

    @property
    def outbox(self) -> Path:
        return self.settings.state_path / "outbox"

    def kind(self, mode: str) -> str:
        """worktree, branch or patch: where `mode`'s fixes go."""
        try:
            return str(getattr(self.settings.modes.get(mode), "delivery", "worktree"))
        except KeyError:
            return "worktree"

    def isolated(self, mode: str) -> bool:
        """True when `mode`'s fixes must never be written into the working tree."""
        return self.kind(mode) != "worktree"

    # -- the seam the cycle calls -----------------------------------------------------------
    async def act(self, cycle: Cycle, plan: Plan, changes: list[FileChange]) -> Verification:
        """Verify `changes` away from the working tree and deliver them; the cycle's record says where."""
        kind = self.kind(cycle.mode.name)
        r, event = cycle.r, cycle.event
        facts = Facts(
            r.cycle_id,
            cycle.mode.name,
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
        verification = await self.verifier.verify(cycle.mode, event, plan, fix, cycle.deps.env)
        r.checks = [c.record() for c in verification.checks]
        if verification.status not in DELIVERED:
            r.delivery = {"kind": kind, "outcome": "not_delivered", "reason": "the fix did not hold on HEAD"}
            return verification
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

    def _index(self) -> Path:
        return self.tmp_dir / f"index-{secrets.token_hex(6)}"

    def _branch(self, facts: Facts, fix: OnHead, commit: str) -> dict[str, Any]:
        ws, cfg = self.workspace, self.settings.delivery
        row = self.ledger.get(facts.key)
        mine = row if row is not None and row.kind == "branch" else None
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

    def _push(self, key: str, name: str, commit: str, expected: str | None) -> dict[str, Any]:
        remote = str(self.settings.delivery.push)
        if not g.has_remote(self.workspace, remote):
            res = g.PushResult(False, f"no remote named {remote} in the repository")
        else:
            res = g.push(
                self.workspace, remote, commit, name, expected, self.settings.delivery.push_timeout_s
            )
        if res.ok:
            row = self.ledger.get(key)
            if row is not None:
                row.pushed, row.problem = commit, None
                self.ledger.put(row)
            log.info("delivery.pushed", branch=name, remote=remote, commit=commit)
            self._count("push", "ok")
            return {"remote": remote, "ok": True}
        why = (
            f"push of {name} to {remote} refused: {res.reason} (autod never forces a push; the local"
            " branch has the fix)"
        )
        self.ledger.problem(key, name, why)
        self._count("push", "refused")
        log.error("delivery.push_refused", branch=name, remote=remote, reason=res.reason)
        return {"remote": remote, "ok": False, "reason": why}

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
        atomic.atomic_write(path, data, 0o600)
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

    # -- the cap ---------------------------------------------------------------------------
    def held_reason(self, key: str, mode: str, fingerprint: str, summary: str) -> str | None:
        """Why a new delivery must wait (the cap is reached and this failure has no open one), or None."""
        row = self.ledger.get(key)
        if row is not None and row.state == OPEN:
            return None  # its own branch or patch is updated: no new slot taken
        cap = self.settings.delivery.max_open
        if self.ledger.open_count() >= cap:
            self.refresh()  # a branch merged or deleted since frees its slot
        n = self.ledger.open_count()
        if n < cap:
            self.ledger.unhold(key)
            return None
        self.ledger.hold(key, mode, fingerprint, summary)
        return (
            f"delivery cap reached: {n}/{cap} open autod branches and patches (delivery.max_open);"
            " merge or delete one (autod status lists them)"
        )

    def already_delivered(self, key: str) -> str | None:
        """Why a failure need not be planned again: its open branch or patch was made from the current HEAD
        and is still as autod left it. None otherwise (blocking)."""
        row = self.ledger.get(key)
        if row is None or row.state != OPEN:
            return None
        made = self.ledger.cycle(row.cycle_id)
        head = g.rev(self.workspace, "HEAD")
        if made is None or head is None or made.parent != head:
            return None
        if row.kind == "branch":
            if g.rev(self.workspace, f"refs/heads/{row.name}") != row.commit_id:
                return None
        else:
            try:
                current = atomic.read_current(Path(row.name))
            except OSError:
                return None
            if atomic.sha(current) != row.digest:
                return None
        return (
            f"its fix is already in {row.kind} {row.name}, made from the current HEAD (cycle {row.cycle_id})"
        )

    def refresh(self) -> None:
        """Bring each delivery's state up to date: merged, deleted, or changed by someone (blocking)."""
        for row in self.ledger.rows((OPEN, "changed", "withdrawn")):
            state = row.state
            if row.kind == "branch":
                tip = g.rev(self.workspace, f"refs/heads/{row.name}")
                if tip is None:
                    state = "deleted"
                elif tip != row.commit_id:
                    state = "changed"
                elif row.state == OPEN and g.is_ancestor(self.workspace, tip, "HEAD"):
                    state = "merged"
            else:
                try:
                    current = atomic.read_current(Path(row.name))
                except OSError:
                    current = None
                if current is None:
                    state = "deleted"
                elif atomic.sha(current) != row.digest:
                    state = "changed"
            if state != row.state:
                problem = f"{row.name} was changed by someone else" if state == "changed" else None
                self.ledger.set_state(row.key, state, problem)
                log.info("delivery.state_changed", name=row.name, kind=row.kind, state=state, was=row.state)

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

    # -- status -------------------------------------------------------------------------------
    async def status(self) -> dict[str, Any]:
        modes = {m: self.kind(m) for m in self.settings.modes.enabled() if self.isolated(m)}
        if not modes and not self.ledger.rows((OPEN, "changed")):
            return {"modes": {}}
        await asyncio.to_thread(self.refresh)
        rows = await asyncio.to_thread(self.ledger.rows, (OPEN, "changed"))
        n = sum(1 for r in rows if r.state == OPEN)
        cap = self.settings.delivery.max_open
        if self.metrics is not None:
            for kind in ("branch", "patch"):
                self.metrics.deliveries_open.labels(kind).set(
                    sum(1 for r in rows if r.kind == kind and r.state == OPEN)
                )
        return {
            "modes": modes,
            "push": self.settings.delivery.push,
            "open": n,
            "max_open": cap,
            "at_cap": n >= cap,
            "unavailable": await self.verifier.unavailable() if modes else None,
            "items": [
                {
                    "kind": r.kind,
                    "name": r.name,
                    "mode": r.mode,
                    "state": r.state,
                    "summary": r.summary,
                    "updated_at": r.updated_at,
                    "pushed": bool(r.pushed),
                    "problem": r.problem,
                }
                for r in rows
            ],
            "held": await asyncio.to_thread(self.ledger.held),
            "problems": await asyncio.to_thread(self.ledger.problems, 5),
        }

    def _count(self, kind: str, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.deliveries.labels(kind, outcome).inc()


def _same_change(ws: Path, tip: str, commit: str) -> bool:
    """Whether `commit` makes the same tree on the same parent as the branch's tip."""
    with contextlib.suppress(g.GitError):
        return g.tree_of(ws, tip) == g.tree_of(ws, commit) and g.parent_of(ws, tip) == g.parent_of(ws, commit)
    return False


def _subject(ws: Path, commit: str) -> str:
    r = g.git(ws, "log", "-1", "--format=%s", commit)
    return r.stdout.decode("utf-8", "replace").strip()[:150] or "autod fix"
