"""Waiting retries: what each waits for, one line each in status, run now by the operator or when the
LLM answers again (a real queue db, a real loopback LLM server, a real circuit breaker)."""

from __future__ import annotations

import asyncio
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from llmserver import ScriptedLLM
from structlog.testing import capture_logs

from autod.cli.view import retry_lines
from autod.config.settings import load_config
from autod.cycle.limits import CircuitBreaker
from autod.events import Event, EventKind
from autod.runtime.outage import probe, watch_llm
from autod.runtime.waiting import Hold, retry_now, start_waiting, waiting_rows
from autod.stores.queue import EventQueue
from autod.stores.queue_retries import AGAIN, OUTAGE, OUTSIDE


def failure(name: str) -> Event:
    return Event(source="check:tests", kind=EventKind.CHECK_FAILED, summary=f"check {name} failed",
                 fingerprint=f"fp-{name}", payload={"check": name})


@pytest.fixture
def queue(tmp_path: Path) -> EventQueue:
    q = EventQueue(tmp_path / "queue.db")
    yield q
    q.close()


def deferred(queue: EventQueue, name: str, kind: str, delay_s: float, now: float = 1000.0) -> str:
    event = failure(name)
    queue.put(event)
    leased = queue.lease(now=now)
    assert leased is not None and leased.event.id == event.id
    queue.defer(event.id, delay_s, f"{name}: LLM unavailable", kind=kind, now=now)
    return event.id


def test_each_waiting_event_has_one_due_time_and_a_limit_that_holds_them_all_shows_as_that_time(queue):
    a = deferred(queue, "a", OUTAGE, 30)
    b = deferred(queue, "b", AGAIN, 600)
    rows = {r["id"]: r for r in waiting_rows(queue, Hold("max_cycles_per_hour (12/12)", 1300.0), now=1010.0)}
    assert rows[a]["due_in_s"] == 290.0 and rows[a]["held"] == "max_cycles_per_hour (12/12)"
    assert rows[b]["due_in_s"] == 590.0 and rows[b]["held"] is None  # its own time is later than the hold
    assert rows[a]["waits_for"] == OUTAGE and rows[b]["waits_for"] == AGAIN
    lines = retry_lines(list(rows.values()))
    assert len(lines) == 2 and all(line.count("due in") == 1 for line in lines)
    assert f"retry {a[:12]} (tried 1x) due in 290s (held: max_cycles_per_hour (12/12))" in lines[0]


def test_retry_runs_one_waiting_event_by_id_prefix_or_all_and_says_when_it_cannot(queue):
    a = deferred(queue, "a", OUTAGE, 3600)
    b = deferred(queue, "b", OUTSIDE, 3600)
    assert retry_now(queue, "zzz", False)["ok"] is False
    assert retry_now(queue, None, False)["ok"] is False
    (due,) = retry_now(queue, a[:8], False)["due"]
    assert due["id"] == a and due["retries"] == 1
    assert queue.lease().event.id == a  # due now: the next lease takes it
    assert [r["id"] for r in retry_now(queue, None, True)["due"]] == [b]


def test_a_trigger_starts_the_waiting_event_its_mode_takes(queue):
    a = deferred(queue, "a", OUTAGE, 3600)
    assert start_waiting(queue, lambda e: e.kind == EventKind.MANUAL) == []
    (started,) = start_waiting(queue, lambda e: e.kind == EventKind.CHECK_FAILED)
    assert started["id"] == a and queue.next_due() == 0.0 and queue.depth() == 1


def test_only_outage_retries_are_made_due_by_kind(queue):
    a = deferred(queue, "a", OUTAGE, 3600)
    deferred(queue, "b", AGAIN, 3600)
    assert queue.waiting_on(OUTAGE) == 1
    assert [r["id"] for r in queue.make_due(kinds=(OUTAGE,))] == [a]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_the_probe_tells_down_from_up_and_never_raises():
    port = free_port()
    down = asyncio.run(probe(f"http://127.0.0.1:{port}/v1", "k3y-secret", 2))
    assert not down.ok and "ConnectError" in down.why and "k3y-secret" not in down.why
    with ScriptedLLM() as llm:
        assert asyncio.run(probe(llm.base_url, None, 2)).ok


@dataclass(frozen=True)
class LLMWiring:
    settings: Any
    breaker: CircuitBreaker


class Host:
    def __init__(self, settings: Any, queue: EventQueue, breaker: CircuitBreaker) -> None:
        self.wiring, self.queue = LLMWiring(settings, breaker), queue
        self.wakeup, self.stopping = asyncio.Event(), asyncio.Event()


@pytest.mark.slow
def test_when_the_llm_answers_again_outage_retries_are_due_at_once_and_the_breaker_half_opens(
    tmp_path, queue
):
    port = free_port()
    config = tmp_path / "autod.yaml"
    config.write_text(f"workspace: {tmp_path}\nllm: {{base_url: 'http://127.0.0.1:{port}/v1',"
                      " probe_interval_s: 0.1, probe_timeout_s: 1}\n")
    settings = load_config(config)
    outage = deferred(queue, "a", OUTAGE, 3600, now=time.time())
    later = deferred(queue, "b", AGAIN, 3600, now=time.time())
    breaker = CircuitBreaker(1, 3600)
    breaker.failure()
    assert breaker.state == "open"

    async def scenario() -> None:
        host = Host(settings, queue, breaker)
        watch = asyncio.create_task(watch_llm(host))
        llm = ScriptedLLM()
        try:
            with capture_logs() as logged:  # the probe finds it down: the backoff is kept meanwhile
                async with asyncio.timeout(10):
                    while not any(x["event"] == "llm.probe_failed" for x in logged):
                        await asyncio.sleep(0.05)
            assert queue.next_due() > 3000 and not host.wakeup.is_set()
            llm.start(port)  # back, on the same address
            await asyncio.wait_for(host.wakeup.wait(), 10)
        finally:
            host.stopping.set()
            await watch
            llm.stop()

    asyncio.run(scenario())
    assert breaker.state == "half-open"
    due = {r["id"]: r["due_in_s"] for r in waiting_rows(queue)}
    assert due[outage] == 0.0 and due[later] > 3000  # a still-failing failure keeps its backoff
