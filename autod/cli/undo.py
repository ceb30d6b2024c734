"""`autod undo CYCLE [--reason TEXT] [--json]`: one line for a human, or the daemon's answer as JSON."""

from __future__ import annotations

from typing import Any

from autod.cli.common import _emit
from autod.config.settings import Settings


def run(
    settings: Settings, cycle: str, reason: str | None, as_json: bool, ask: Any, out: Any, die: Any
) -> int:
    """Exit 0 undone, 1 refused (nothing written; the message names each changed file), 3 daemon down."""
    from autod.control.socket import DaemonDown

    try:
        resp = ask(settings, "undo", cycle=cycle, reason=reason, timeout=600)
    except DaemonDown:
        return die("the daemon is not running; `undo` needs it (start it with `autod run`)", 3)
    if as_json:
        _emit(resp)
        return 0 if resp.get("ok") else 1
    if not resp.get("ok"):
        return die(str(resp.get("error") or "undo failed"), 1)
    files = ", ".join(str(e["path"]) for e in resp.get("edits") or []) or "-"
    where = ""
    delivery = resp.get("delivery") or {}
    if delivery.get("kind") == "branch":
        where = f"; revert commit {str(delivery.get('commit'))[:12]} on {delivery.get('branch')}"
    elif delivery.get("kind") == "patch":
        where = f"; patch {delivery.get('withdrawn')} withdrawn"
    elif resp.get("commit"):
        where = f"; revert commit {str(resp['commit'])[:12]}"
    out(f"undid cycle {resp['cycle_id']} (recorded as {resp['undo_id']}): files {files}{where}")
    out(f"lesson stored: {str(resp.get('lesson') or '')[:200]}")
    return 0
