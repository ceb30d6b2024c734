"""Care for a busy single-slot server: after a request autod gave up on, wait until it is done.

A request autod abandons (a timeout, the plan's deadline, a stop) may still be running on the server:
llama-cpp-python generates a reply it was not asked to stream to the end after the client has gone,
and a new request would queue behind it. So the next request first waits for the server to answer a
cheap probe (`GET /models`, which llama-cpp-python serves only when the model is free) or, when it
cannot be probed, `request_timeout_s` from when the abandoned one was sent (autod.planner.endpoint).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import httpx
import structlog

from autod.errors import LLMUnavailable

log = structlog.get_logger("autod.planner.llm")

PROBE_MIN_S = 5.0  # a probe waits at least this long for a free server before trying again


async def await_free(client: httpx.AsyncClient, url: str, abandoned_at: float, timeout_s: float,
                     deadline: float, sleep: Callable[[float], Awaitable[None]]) -> None:
    """Return once the server is done with a request abandoned at loop time `abandoned_at`, or is not
    reachable (the next POST will tell); raise LLMUnavailable when that would pass `deadline`."""
    loop = asyncio.get_running_loop()
    waited_from = loop.time()
    while True:
        left = deadline - loop.time()
        if left <= 0:
            raise LLMUnavailable(
                f"{url} is still busy with a request autod gave up on; not sending another"
                " behind it (raise llm.request_timeout_s for a slow server)"
            )
        try:
            resp = await client.get("models", timeout=min(left, max(PROBE_MIN_S, timeout_s)))
        except httpx.TimeoutException:
            continue  # still busy (llama-cpp-python answers /models only between generations)
        except httpx.HTTPError:  # not reachable: down, not busy (nothing was awaited); the POST will tell
            return
        if resp.is_success:
            break
        # No usable probe: stay away as long as the abandoned request may have run.
        quiet = abandoned_at + timeout_s - loop.time()
        if quiet > 0:
            if loop.time() + quiet >= deadline:
                raise LLMUnavailable(
                    f"{url} may still be busy with a request autod gave up on for {quiet:.0f}s"
                    " (it has no GET /models to ask)"
                )
            await sleep(quiet)
        break
    log.info("llm.busy_server_awaited", endpoint=url, waited_ms=round((loop.time() - waited_from) * 1000))
