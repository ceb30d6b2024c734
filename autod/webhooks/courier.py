"""The courier: announces notifications into the outbox and carries them to each webhook in order.

Per webhook, one request at a time, oldest first; a failure (no connection, a timeout, any non-2xx)
backs that webhook off (`notify.retry_base_s`, doubling to `retry_max_s`, +-20 %) and leaves the
notification where it is, so nothing is lost and nothing overtakes it. Going down and coming back are
one log line each. A webhook's URL and token are read from the environment or a systemd credential
when it is sent to, and appear in no log line, status or error (only the webhook's name does).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import httpx
import structlog

from autod.backoff import Backoff
from autod.config.credfile import CredentialError
from autod.config.outputs import Webhook, read_secret
from autod.config.settings import Settings
from autod.webhooks.outbox import Item, Outbox
from autod.webhooks.payload import Notification, render

log = structlog.get_logger("autod.webhooks")

BATCH = 50  # notifications sent to one webhook before the others get a turn
EXPIRE_EVERY_S = 60.0
IDLE_S = 30.0
JITTER = 0.2
USER_AGENT = "autod-webhooks/1"


@dataclass
class HookState:
    """How one webhook is doing, for `status` and the backoff."""

    failures: int = 0
    down_since: float | None = None
    last_error: str | None = None
    next_try: float = 0.0
    last_sent: float | None = None


class Courier:
    def __init__(self, settings: Callable[[], Settings], outbox: Outbox, metrics: Any = None) -> None:
        self.settings = settings
        self.outbox = outbox
        self.metrics = metrics  # autod.metrics.registry.Metrics, or None
        self.hooks: dict[str, HookState] = {}
        self.wakeup = asyncio.Event()
        self.host = socket.gethostname()

    # -- announcing ---------------------------------------------------------------------
    def webhooks(self) -> list[Webhook]:
        return list(self.settings().notify.webhooks)

    async def announce(self, n: Notification) -> int:
        """Keep `n` in the outbox for every webhook that takes its event; returns how many took it."""
        now = time.time()
        daemon = {"host": self.host, "workspace": str(self.settings().workspace)}
        taken = 0
        for hook in self.webhooks():
            if n.event not in hook.events:
                continue
            body = render(n, hook.format, daemon, now)
            dropped = await asyncio.to_thread(self.outbox.add, n.key, hook.name, n.event, body, now)
            taken += 1
            self._count(hook.name, "queued")
            self._dropped(dropped, "the outbox is full (notify.outbox_max_items): the oldest goes")
        if taken:
            self.wakeup.set()
        return taken

    # -- carrying -------------------------------------------------------------------------
    async def run(self) -> None:
        """The courier's task (owned by the supervisor); runs until cancelled."""
        last_expiry = 0.0
        async with httpx.AsyncClient(trust_env=False, follow_redirects=False) as client:
            while True:
                if time.monotonic() - last_expiry >= EXPIRE_EVERY_S:
                    last_expiry = time.monotonic()
                    await self._expire()
                self.wakeup.clear()
                wait = await self.one_pass(client)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wakeup.wait(), timeout=max(0.05, min(wait, IDLE_S)))

    async def one_pass(self, client: httpx.AsyncClient) -> float:
        """Send what is due to every webhook; returns the seconds until the next backoff ends."""
        wait = IDLE_S
        for hook in self.webhooks():
            st = self.hooks.setdefault(hook.name, HookState())
            now = time.time()
            if st.next_try > now:
                wait = min(wait, st.next_try - now)
                continue
            for _ in range(BATCH):
                item = await asyncio.to_thread(self.outbox.head, hook.name)
                if item is None:
                    break
                error = await self._post(client, hook, item)
                if error is None:
                    await asyncio.to_thread(self.outbox.sent, item)
                    self._delivered(hook, st, item)
                    continue
                await asyncio.to_thread(self.outbox.failed, item, error)
                self._failed(hook, st, item, error)
                wait = min(wait, max(0.05, st.next_try - time.time()))
                break
            else:
                wait = 0.0  # more waiting: another pass at once, after the other webhooks' turn
        return wait

    async def _post(self, client: httpx.AsyncClient, hook: Webhook, item: Item) -> str | None:
        """POST one notification; None when the receiver took it (2xx), else why not (no secret in it)."""
        try:
            url = hook.url or read_secret(hook.url_env, hook.url_credential)
            wants_token = bool(hook.token_env or hook.token_credential)
            token = read_secret(hook.token_env, hook.token_credential) if wants_token else None
        except CredentialError as exc:  # names the credential, never its content
            return f"not sent: {exc}"
        if not url:
            where = (
                f"environment variable {hook.url_env}"
                if hook.url_env
                else f"credential {hook.url_credential}"
            )
            return f"no URL: {where} is not set"
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "Idempotency-Key": item.key,
            "X-Autod-Event": item.event,
        }
        if hook.token_env or hook.token_credential:
            if not token:
                return "no token: its environment variable or credential is not set"
            headers[hook.token_header] = f"{hook.token_prefix}{token}"
        try:
            response = await client.post(url, content=item.body, headers=headers, timeout=hook.timeout_s)
        except httpx.TimeoutException:
            return f"no answer within {hook.timeout_s:g}s"
        except (httpx.HTTPError, OSError, ValueError) as exc:  # never str(exc): it may name the URL
            return f"cannot reach the receiver ({type(exc).__name__})"
        if 200 <= response.status_code < 300:
            return None
        return f"HTTP {response.status_code}"

    def _delivered(self, hook: Webhook, st: HookState, item: Item) -> None:
        if st.down_since is not None:
            log.info(
                "webhook.recovered",
                webhook=hook.name,
                down_s=round(time.time() - st.down_since, 1),
                failed_tries=st.failures,
            )
        st.failures, st.down_since, st.last_error, st.next_try = 0, None, None, 0.0
        st.last_sent = time.time()
        self._count(hook.name, "sent")
        log.info(
            "webhook.sent", webhook=hook.name, notification=item.event, key=item.key, tries=item.attempts + 1
        )

    def _failed(self, hook: Webhook, st: HookState, item: Item, error: str) -> None:
        cfg = self.settings().notify
        delay = Backoff(cfg.retry_base_s, cfg.retry_max_s, (1 - JITTER, 1 + JITTER)).delay(st.failures)
        st.failures += 1
        st.last_error, st.next_try = error, time.time() + delay
        self._count(hook.name, "failed")
        if st.down_since is None:
            st.down_since = time.time()
            log.warning(
                "webhook.unreachable",
                webhook=hook.name,
                reason=error,
                notification=item.event,
                retry_in_s=round(delay, 1),
                detail="notifications wait in the outbox; nothing is lost",
            )
        else:
            log.debug("webhook.retry_failed", webhook=hook.name, reason=error, retry_in_s=round(delay, 1))

    async def _expire(self) -> None:
        cfg = self.settings().notify
        gone = await asyncio.to_thread(
            self.outbox.expire, time.time() - cfg.max_age_h * 3600, {w.name for w in cfg.webhooks}
        )
        self._dropped(gone, "older than notify.max_age_h, or its webhook is no longer configured")

    def _dropped(self, items: Iterable[Any], reason: str) -> None:
        for d in items:
            self._count(d.hook, "dropped")
            log.warning("webhook.outbox_dropped", webhook=d.hook, notification=d.event, key=d.key,
                        reason=reason)

    def _count(self, hook: str, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.notifications.labels(hook, outcome).inc()

    # -- status ---------------------------------------------------------------------------
    async def status(self) -> list[dict[str, Any]]:
        figures = await asyncio.to_thread(self.outbox.figures)
        out = []
        for hook in self.webhooks():
            st = self.hooks.get(hook.name, HookState())
            f = figures.get(hook.name, {"queued": 0, "sent": 0, "dropped": 0})
            out.append(
                {
                    "name": hook.name,
                    "state": "down" if st.down_since is not None else "ok",
                    "down_since": st.down_since,
                    "last_error": st.last_error,
                    "next_try": st.next_try or None,
                    "events": list(hook.events),
                    "format": hook.format,
                    **f,
                }
            )
            if self.metrics is not None:
                self.metrics.notifications_queued.labels(hook.name).set(f["queued"])
        return out
