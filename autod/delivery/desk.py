"""What every part of delivery shares: the settings, the ledger, the verifier, the metrics, where its
files go, which modes deliver how, and the push (a fix's, and an undo's revert commit)."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import structlog

from autod.config.settings import Settings
from autod.delivery import plumbing as g
from autod.delivery.ledger import DeliveryLedger
from autod.delivery.verify import Verifier

log = structlog.get_logger("autod.delivery")


class Desk:
    """The shared ground of Delivery (autod.delivery.deliver), its Inventory and its TakeBack."""

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
            return self.settings.modes.get(mode).delivery
        except KeyError:
            return "worktree"

    def isolated(self, mode: str) -> bool:
        """True when `mode`'s fixes must never be written into the working tree."""
        return self.kind(mode) != "worktree"

    def _index(self) -> Path:
        return self.tmp_dir / f"index-{secrets.token_hex(6)}"

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

    def _count(self, kind: str, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.deliveries.labels(kind, outcome).inc()
