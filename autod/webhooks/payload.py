"""What a notification says, and its two wire formats: `json` (autod's document) and `slack` ({text})."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from autod import logs

# A reflection's status -> the notification it is (partly_rolled_back is a rollback to a receiver)
STATUS_EVENTS = {
    "fixed": "fixed",
    "improved": "improved",
    "rolled_back": "rolled_back",
    "partly_rolled_back": "rolled_back",
    "rejected": "rejected",
    "failed": "failed",
    "pending_approval": "pending_approval",
}
CYCLE_FIELDS = (
    "cycle_id",
    "mode",
    "status",
    "reason",
    "fingerprint",
    "kind",
    "summary",
    "plan_summary",
    "fix",
    "edits",
    "checks",
    "commit",
    "proposal_id",
    "quarantined",
    "delivery",
)


@dataclass(frozen=True)
class Notification:
    key: str  # idempotency key: the same notification always has the same key
    event: str  # one of config_models.NOTIFY_EVENTS
    title: str  # one line
    text: str = ""
    data: dict[str, Any] = field(default_factory=dict)


def _clean(value: Any) -> Any:
    """Every string redacted (configured secrets, credential-looking values) before it leaves."""
    if isinstance(value, str):
        return logs.redact_text(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def render(n: Notification, fmt: str, daemon: dict[str, str], now: float) -> bytes:
    """The request body for one webhook."""
    at = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if fmt == "slack":
        where = f"{daemon.get('host', '')}: {daemon.get('workspace', '')}"
        head = f"*autod* ({_slack(where)}) {_slack(n.title)}"
        text = logs.redact_text(head + (f"\n{_slack(n.text)}" if n.text else ""))
        return json.dumps({"text": text}).encode()
    doc = {
        "id": n.key,
        "event": n.event,
        "at": at,
        "title": n.title,
        "text": n.text,
        "daemon": daemon,
        **n.data,
    }
    return json.dumps(_clean(doc), default=str).encode()


def _slack(text: str) -> str:
    """Slack's mrkdwn escapes: a summary cannot become a link or a mention."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def from_cycle(record: dict[str, Any], *, budget_spent: bool = False) -> list[Notification]:
    """The notifications one finished cycle makes (its status, quarantine, delivery, a spent budget)."""
    cid, status = str(record.get("cycle_id")), str(record.get("status"))
    what = str(record.get("summary") or "")[:200]
    data = {"cycle": {k: record.get(k) for k in CYCLE_FIELDS if k in record}}
    files = (
        ", ".join(f"{e['path']} +{e['added']} -{e['removed']}" for e in record.get("edits") or []) or "none"
    )
    checks = ", ".join(f"{c['name']}={c['exit_code']}" for c in record.get("checks") or []) or "none"
    said = (f"{record['fix']}\nthe planner's words: {record.get('plan_summary') or '-'}" if record.get("fix")
            else str(record.get("plan_summary") or ""))
    detail = f"{said}\nfiles: {files}; checks: {checks}".strip()
    reason = f" ({str(record['reason'])[:300]})" if record.get("reason") else ""
    out: list[Notification] = []
    event = STATUS_EVENTS.get(status)
    stopped = status == "failed" and str(record.get("reason") or "").startswith("stopped:")
    if event is not None and not stopped:
        verb = {"pending_approval": f"a proposal waits for `autod approve {record.get('proposal_id')}`"}.get(
            event, event.replace("_", " ")
        )
        title = f"[{record.get('mode')}] {verb}: {what}{reason if event != 'fixed' else ''}"
        out.append(Notification(f"{cid}:{event}", event, title, detail, data))
    if record.get("quarantined"):
        out.append(
            Notification(
                f"quarantine:{record.get('fingerprint')}:{cid}",
                "quarantined",
                f"[{record.get('mode')}] quarantined after repeated attempts: {what}",
                "autod stopped trying this failure: `autod quarantine clear FP` to try again",
                data,
            )
        )
    delivery = record.get("delivery") or {}
    if delivery.get("outcome") == "delivered":
        where = delivery.get("branch") or delivery.get("patch")
        out.append(
            Notification(
                f"{cid}:delivered",
                "delivered",
                f"[{record.get('mode')}] fix delivered to {where}: {what}",
                detail,
                data,
            )
        )
    elif delivery.get("outcome") == "failed" or delivery.get("problem"):
        out.append(
            Notification(
                f"{cid}:delivery_failed",
                "delivery_failed",
                f"[{record.get('mode')}] delivery problem: {delivery.get('problem')}",
                detail,
                data,
            )
        )
    if budget_spent:
        day = datetime.now(UTC).strftime("%Y-%m-%d")
        out.append(budget(day, str(record.get("reason") or "a daily budget is spent")))
    return out


def budget(day: str, why: str) -> Notification:
    kind = "tokens" if "token" in why else "edits"
    return Notification(
        f"budget_spent:{kind}:{day}",
        "budget_spent",
        f"daily {kind} budget spent: {why[:200]}",
        "cycles wait for the next UTC day (events keep queueing)",
        {"budget": kind, "day": day},
    )


def wedged(info: dict[str, Any], first_seen: float) -> Notification:
    what = str(info.get("what") or "a step")
    return Notification(
        f"wedged:{info.get('cycle_id') or info.get('slot')}:{int(first_seen)}",
        "wedged",
        f"wedged: {what} for {info.get('running_s')}s (deadline {info.get('deadline_s')}s)",
        "the watchdog stops; under systemd the service is restarted and the cycle rolled back",
        {"wedged": info},
    )


def from_undo(record: dict[str, Any], undone: str) -> Notification:
    files = ", ".join(str(e["path"]) for e in record.get("edits") or []) or "-"
    return Notification(
        f"{record.get('cycle_id')}:undone",
        "undone",
        f"[{record.get('mode')}] the operator undid cycle {undone}: {str(record.get('summary') or '')[:200]}",
        f"files: {files}; {record.get('reason') or ''}",
        {"cycle": {k: record.get(k) for k in CYCLE_FIELDS if k in record}, "undone_cycle": undone},
    )
