"""`autod metrics`: the Prometheus exposition on stdout, from the running daemon (what a scrape of
`metrics.listen` gets), or, with the daemon down, the gauges read from the state dir."""

from __future__ import annotations

import sys
from typing import Any

from autod.cli.common import _out
from autod.config.settings import Settings


def offline_exposition(settings: Settings) -> bytes:
    """Gauges only (counters and histograms live in the daemon), read from the state dir's stores."""
    from autod.metrics.registry import Metrics

    m = Metrics()
    sp = settings.state_path
    if (sp / "state.db").exists():
        from autod.stores.queue import EventQueue
        from autod.stores.state import State

        state, queue = State(sp / "state.db"), EventQueue(sp / "queue.db")
        try:
            m.queue_depth.set(queue.depth())
            m.retries_waiting.set(sum(1 for r in queue.retrying(10_000) if r.get("status") == "pending"))
            m.quarantined.set(len(state.quarantined()))
            m.paused.set(1 if state.get_kv("paused", False) else 0)
        finally:
            queue.close()
            state.close()
    if (sp / "delivery.db").exists():
        from autod.delivery.ledger import DeliveryLedger

        ledger = DeliveryLedger(sp / "delivery.db")
        rows = ledger.rows(("open",))
        ledger.close()
        for kind in ("branch", "patch"):
            m.deliveries_open.labels(kind).set(sum(1 for r in rows if r.kind == kind))
    if (sp / "webhooks.db").exists():
        from autod.webhooks.outbox import Outbox

        outbox = Outbox(sp / "webhooks.db", settings.notify.outbox_max_items)
        for hook, f in outbox.figures().items():
            m.notifications_queued.labels(hook).set(f["queued"])
        outbox.close()
    return m.exposition()


def run(settings: Settings, ask: Any) -> int:
    """Print the exposition; `ask(settings, cmd)` reaches the daemon (raises DaemonDown when it is not up)."""
    from autod.control.socket import DaemonDown

    try:
        resp = ask(settings, "metrics")
        text = resp.get("text", "") if resp.get("ok") else ""
        if not resp.get("ok"):
            _out(f"autod: {resp.get('error', 'failed')}", file=sys.stderr)
            return 1
    except DaemonDown:
        print(
            "autod: the daemon is not running: gauges read from the state dir, no counters", file=sys.stderr
        )
        text = offline_exposition(settings).decode()
    sys.stdout.write(text)
    return 0
