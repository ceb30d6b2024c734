"""What is open: the cap (`delivery.max_open`), a failure whose fix already waits on HEAD as it is,
each branch's and patch's state (merged, deleted, changed by someone), and `autod status`'s part."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from autod.act import atomic
from autod.delivery import plumbing as g
from autod.delivery.desk import Desk, log
from autod.delivery.ledger import OPEN


class Inventory(Desk):
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
