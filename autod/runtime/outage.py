"""Is the LLM there? One cheap probe, and the watch that ends an outage's waiting at once.

`probe` asks `GET {base_url}/models` under a short deadline (`llm.probe_timeout_s`): `autod config
check` and start-up use it to say when the LLM is unreachable. `watch_llm` runs beside the dispatcher:
while events wait out an LLM outage (retry kind `outage`, autod.stores.queue_retries) or the circuit breaker
is open, it probes every `llm.probe_interval_s`. Once it has seen the LLM down, the first probe that
finds it answering again makes those retries due now and half-opens the breaker, so the fix comes
within one probe interval of the LLM's return instead of after a backed-off delay or a cooldown.
A server that answers the probe while its completions fail (a 500 from a crashed model) is never
"back": the probe has to have seen it down first, so such retries keep their backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import dataclass
from typing import Protocol

import httpx
import structlog

from autod.config.settings import Settings
from autod.cycle.limits import CircuitBreaker
from autod.stores.queue_retries import OUTAGE

log = structlog.get_logger("autod.runtime.outage")

REFUSED_AUTH = frozenset({401, 403, 407})


@dataclass(frozen=True)
class Reach:
    """What one probe found: `ok` when the server answers (a 404 too: some have no /models)."""

    ok: bool
    why: str = ""
    busy: bool = False  # connected, but no answer within the deadline: up and working on something


def shown_url(url: str) -> str:
    return re.sub(r"//[^/@]*@", "//", url)  # never show userinfo credentials


async def probe(
    base_url: str,
    key: str | None,
    timeout_s: float,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Reach:
    """GET {base_url}/models within `timeout_s`. Never raises; `why` holds no secret."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        async with httpx.AsyncClient(
            base_url=base_url + "/", headers=headers, timeout=timeout_s, transport=transport,
            follow_redirects=False,
        ) as client:
            resp = await asyncio.wait_for(client.get("models"), timeout_s + 1)
    except httpx.ConnectTimeout:
        return Reach(False, f"no connection within {timeout_s:g}s")
    except (httpx.TimeoutException, TimeoutError):  # the connection was made: a busy server, not a gone one
        return Reach(False, f"connected, but no answer within {timeout_s:g}s", busy=True)
    except httpx.HTTPError as exc:
        detail = str(exc).split("\n", 1)[0][:120]
        return Reach(False, f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__)
    if resp.status_code in REFUSED_AUTH:
        return Reach(False, f"HTTP {resp.status_code}: it refuses autod's key (llm.api_key, the credential)")
    if resp.status_code >= 500:
        return Reach(False, f"HTTP {resp.status_code}")
    return Reach(True)


def api_key(settings: Settings) -> str | None:
    """The LLM key for a probe; an unreadable key file probes without one (the plan will say why)."""
    try:
        return settings.api_key()
    except OSError:
        return None


def unreachable_warning(settings: Settings, reach: Reach) -> str:
    """One line for `config check` and the start-up log."""
    url = shown_url(settings.llm.base_url or "")
    if reach.busy:
        return (f"llm.base_url: the LLM at {url} is busy ({reach.why}): cycles that need it wait their"
                " turn (llm.request_timeout_s)")
    return (f"llm.base_url: the LLM at {url} does not answer ({reach.why}): cycles that need it wait and"
            " are retried when it answers again")


def unreachable_now(settings: Settings) -> str | None:
    """For `autod config check` (no event loop runs): the warning when the LLM does not answer."""
    if not settings.llm.base_url:
        return None
    reach = asyncio.run(probe(settings.llm.base_url, api_key(settings), settings.llm.probe_timeout_s))
    return None if reach.ok else unreachable_warning(settings, reach)


class Waiting(Protocol):
    """The queue's deferred events, as the watch sees them (autod.stores.queue_retries)."""

    async def awaiting_on(self, kind: str) -> int: ...

    async def amake_due(self, *, kinds: tuple[str, ...]) -> list[dict[str, object]]: ...


class LLMWiring(Protocol):
    """The wiring, as the watch reads it (autod.runtime.wiring.Wiring): the LLM's config and the breaker
    built with it."""

    @property
    def settings(self) -> Settings: ...

    @property
    def breaker(self) -> CircuitBreaker | None: ...


class Host(Protocol):
    """What the watch reads from the daemon (live: a reload takes effect at the next probe)."""

    @property
    def wiring(self) -> LLMWiring: ...

    wakeup: asyncio.Event
    stopping: asyncio.Event
    queue: Waiting


async def watch_llm(host: Host) -> None:
    """Probe while an outage holds events; when the LLM is back, their retries are due now."""
    seen_down = False
    while not host.stopping.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(host.stopping.wait(), host.wiring.settings.llm.probe_interval_s)
        if host.stopping.is_set():
            break
        try:
            seen_down = await _look(host, seen_down)
        except Exception as exc:  # a queue hiccup must not end the watch: the backoff still holds
            log.warning("llm.outage_watch_failed", error=type(exc).__name__, exc_info=exc)


async def _look(host: Host, seen_down: bool) -> bool:
    """One look: probe if an outage holds events, end it when the LLM answers. Returns `seen_down`."""
    wiring = host.wiring  # one config for the whole look
    llm = wiring.settings.llm
    if not llm.base_url:
        return False
    breaker = wiring.breaker
    held = breaker is not None and breaker.state == "open"
    if not held and not await host.queue.awaiting_on(OUTAGE):
        return False  # nothing waits on the LLM: a later outage starts afresh
    key = await asyncio.to_thread(api_key, wiring.settings)  # may read a credential file
    reach = await probe(llm.base_url, key, llm.probe_timeout_s)
    if not reach.ok:
        if not seen_down:
            log.info("llm.probe_failed", endpoint=shown_url(llm.base_url), why=reach.why)
        return True
    if not seen_down:
        return False  # it answers the probe but cycles failed anyway: their backoff holds
    due = await host.queue.amake_due(kinds=(OUTAGE,))
    if breaker is not None:
        breaker.half_open()
    log.info("llm.reachable_again", endpoint=shown_url(llm.base_url), retries_due_now=len(due))
    host.wakeup.set()
    return False


async def warn_if_unreachable(settings: Settings) -> None:
    """At start-up: a warning when the LLM does not answer the probe (the daemon starts all the same)."""
    if not settings.llm.base_url:
        return
    key = await asyncio.to_thread(api_key, settings)
    reach = await probe(settings.llm.base_url, key, settings.llm.probe_timeout_s)
    if reach.busy:
        log.info("llm.busy", endpoint=shown_url(settings.llm.base_url), why=reach.why,
                 detail=unreachable_warning(settings, reach))
    elif not reach.ok:
        log.warning("llm.unreachable", endpoint=shown_url(settings.llm.base_url), why=reach.why,
                    detail=unreachable_warning(settings, reach))
