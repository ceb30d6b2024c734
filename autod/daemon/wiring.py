"""How the daemon is wired: what depends on the config (planner, gate, retry policy, modes, the cycle's
dependencies), rebuilt at start and on every reload, and the output tasks (metrics, webhooks). The
supervisor owns the tasks and calls these."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import structlog

from autod import isolation, logs
from autod.config.settings import Settings
from autod.cycle.delivery_cap import DeliveryGate
from autod.cycle.deps import CycleDeps
from autod.cycle.limits import CircuitBreaker, Gate
from autod.daemon.preflight import check_problems
from autod.delivery.deliver import Delivery
from autod.delivery.verify import MirrorVerifier
from autod.metrics.observe import CycleMetrics, MeteredPlanner, describe, timed
from autod.metrics.sampler import sampler
from autod.modes import Mode, ModeEnv
from autod.runtime.narrate import CycleNarrator
from autod.runtime.retry import RetryPolicy
from autod.transcripts import TranscriptStore
from autod.undo.ledger import kept_hook
from autod.webhooks.announce import CycleAnnouncer, watch_daemon

if TYPE_CHECKING:
    from autod.daemon.supervisor import Daemon

log = structlog.get_logger("autod.daemon.wiring")


def build_modes(settings: Settings) -> list[Mode]:
    from autod.modes.debug import DebugMode
    from autod.modes.doc import DocMode
    from autod.modes.plan import PlanReportMode

    all_modes: dict[str, Mode] = {
        "auto-debug": DebugMode(reply_form=settings.llm.reply_form),
        "auto-doc": DocMode(),
        "auto-plan": PlanReportMode(),
    }
    return [all_modes[name] for name in settings.modes.enabled()]


def configure(d: Daemon) -> None:
    """(Re)build what depends on the config: planner, gate, retry policy, modes."""
    s = d.settings
    logs.set_secrets(s.secrets())
    d.breaker = (
        CircuitBreaker(s.llm.circuit_failures, s.llm.circuit_cooldown_s) if s.llm.base_url else None
    )
    d.isolation = isolation.Isolation(s)  # the mirror branch and patch fixes are verified on
    d.delivery = Delivery(s, d.delivery_ledger, MirrorVerifier(d.isolation), d.metrics)
    d.gate = DeliveryGate(Gate(s.limits, d.state, d.breaker), d.delivery)
    d.retry = RetryPolicy(s.limits, once=d.once)
    d.modes = [timed(m, d.metrics) for m in build_modes(s)]
    d.kept.keep_cycles, d.kept.keep_days = s.undo.keep_cycles, s.undo.keep_days
    d.outbox.max_items = s.notify.outbox_max_items
    d.book.workspace = s.workspace
    d.env = ModeEnv(
        settings=s,
        state=d.state,
        memory=d.memory,
        run_check=d._verify_check,
        last_results=d.book.results,
        prompt_room=d._prompt_room,
        offline=not s.llm.base_url,
    )
    if s.llm.base_url:
        from autod.planner.llm import LLMPlanner
        from autod.runtime.windows import KeptWindows

        d.planner = LLMPlanner(s.llm, s.api_key())
        d.planner.remember_windows(KeptWindows(d.state))  # learnt once, not on every restart or reload
        d.planner_name = "llm"
    else:
        from autod.checks.run import run_check
        from autod.planner.rules import RulesPlanner

        d.planner = RulesPlanner(s, run_check)
        d.planner_name = "rules"
    hooks: list[Any] = []
    if s.git.commit:
        from autod.git.ops import commit_hook

        hooks.append(commit_hook(s.workspace))
    hooks.append(kept_hook(d.kept))  # after the commit: `autod undo` knows it
    tx = s.transcripts
    d.deps = CycleDeps(
        env=d.env,
        gate=d.gate,
        planner=MeteredPlanner(d.planner, d.metrics) if s.llm.base_url else d.planner,
        planner_name=d.planner_name,
        own_writes=d.own_writes,
        breaker=d.breaker,
        extra_after_keep=hooks,
        isolation=d.isolation,  # one mirror: candidates and branch/patch delivery verify on it
        transcripts=TranscriptStore(s.state_path, keep_days=tx.keep_days, max_mb=tx.max_mb)
        if tx.enabled else None,
        delivery=d.delivery,
    )
    d.dispatcher.observers = [CycleMetrics(d.metrics), CycleAnnouncer(d.courier), CycleNarrator()]
    describe(d.metrics, s, d.planner_name)
    d.config_problems = [f"{'.'.join(map(str, p.key))}: {p.message}" for p in check_problems(s)]
    for problem in d.config_problems:
        log.error("config.check_cannot_start", problem=problem)


def output_tasks(d: Daemon) -> list[asyncio.Task[None]]:
    """The metrics server and sampler, the webhook courier and its watch on the daemon."""
    return [
        asyncio.create_task(
            d.metrics_server.run(lambda: d.settings.metrics.listen), name="metrics-server"
        ),
        asyncio.create_task(
            sampler(
                d,
                d.metrics,
                lambda: d.settings.metrics.sample_s,
                [lambda: sample_outputs(d)],
                enabled=lambda: d.settings.metrics.listen is not None,
            ),
            name="metrics-sampler",
        ),
        asyncio.create_task(d.courier.run(), name="webhooks"),
        asyncio.create_task(watch_daemon(d.courier, d.dispatcher), name="webhooks-watch"),
    ]


async def sample_outputs(d: Daemon) -> None:
    await d.courier.status()  # sets the outbox gauges
    rows = await asyncio.to_thread(d.delivery_ledger.rows, ("open",))
    for kind in ("branch", "patch"):
        d.metrics.deliveries_open.labels(kind).set(sum(1 for r in rows if r.kind == kind))
