"""Webhook notifications: what autod tells a receiver (a fix landed, a proposal waits, a failure is
quarantined, the daemon wedged, a budget is spent, a delivery failed, a cycle was undone).

`outbox` is durable (sqlite in the state dir, bounded, oldest dropped with a log line): a notification
is written there before anything is sent, so a receiver that is down, or a restart, loses nothing.
`courier` sends from it in order per webhook with backoff, never on a cycle's path; `payload` renders
`json` or `slack` bodies; `announce` turns finished cycles and daemon states into notifications.
Each notification has an idempotency key (the `Idempotency-Key` header and the body's `id`): a
receiver that keeps the keys it has seen gets every notification exactly once.
"""

from __future__ import annotations
