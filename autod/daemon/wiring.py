"""How the daemon is wired: what depends on the config (planner, gate, retry policy, modes, the cycle's
dependencies) built into one frozen `Wiring` from the settings and the daemon's long-lived parts, at
start and on every reload; what the long-lived parts take from the settings; and the output tasks
(metrics, webhooks). The supervisor owns the tasks and puts each wiring in force."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from autod import isolation, logs
from autod.config.settings import Settings
from autod.cycle.delivery_cap import DeliveryGate
from autod.cycle.deps import AfterKeep, CycleDeps
from autod.cycle.limits import CircuitBreaker, Gate
from autod.daemon.preflight import check_problems
from autod.delivery.deliver import Delivery
from autod.delivery.verify import MirrorVerifier
from autod.metrics.observe import CycleMetrics, MeteredPlanner, describe, timed
from autod.metrics.sampler import sampler
from autod.modes import Mode, ModeEnv
from autod.planner import CHARS_PER_TOKEN, TEMPLATE_TOKENS, Planner, ServerPlanner
from autod.runtime.dispatch import CycleObserver
from autod.runtime.narrate import CycleNarrator
from autod.runtime.retry import RetryPolicy
from autod.runtime.wiring import Wiring
from autod.stores.state import State
from autod.transcripts import TranscriptStore
from autod.undo.ledger import kept_hook
from autod.webhooks.announce import CycleAnnouncer, watch_daemon

if TYPE_CHECKING:
    from autod.checks.run import CheckResult
    from autod.daemon.supervisor import Daemon
    from autod.delivery.ledger import DeliveryLedger
    from autod.memory.resilient import ResilientMemory
    from autod.metrics.registry import Metrics
    from autod.ownwrites import OwnWrites
    from autod.runtime.checkbook import CheckBook
    from autod.undo.ledger import KeptLedger

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


class Parts(Protocol):
    """The daemon's long-lived parts a wiring is built on: never the wiring in force, nor its settings."""

    state: State
    memory: ResilientMemory | None
    metrics: Metrics
    delivery_ledger: DeliveryLedger
    kept: KeptLedger
    book: CheckBook
    own_writes: OwnWrites
    once: bool

    async def verify_check(
        self, settings: Settings, name: str, *, run: str | None = None, **extra: Any
    ) -> CheckResult: ...


def wire(s: Settings, d: Parts) -> Wiring:
    """The wiring `s` makes of the daemon's long-lived parts. Changes nothing that runs: a build that
    fails leaves the daemon as it was."""
    breaker = CircuitBreaker(s.llm.circuit_failures, s.llm.circuit_cooldown_s) if s.llm.base_url else None
    mirror = isolation.Isolation(s)  # the mirror branch and patch fixes are verified on
    delivery = Delivery(s, d.delivery_ledger, MirrorVerifier(mirror), d.metrics)
    planner, planner_name = build_planner(s, d.state)
    env = ModeEnv(
        settings=s,
        state=d.state,
        memory=d.memory,
        run_check=partial(d.verify_check, s),
        last_results=d.book.results,
        prompt_room=partial(prompt_room, planner),
        offline=not s.llm.base_url,
    )
    hooks: list[AfterKeep] = []
    if s.git.commit:
        from autod.git.ops import commit_hook

        hooks.append(commit_hook(s.workspace))
    hooks.append(kept_hook(d.kept))  # after the commit: `autod undo` knows it
    tx = s.transcripts
    deps = CycleDeps(
        env=env,
        gate=DeliveryGate(Gate(s.limits, d.state, breaker), delivery),
        planner=MeteredPlanner(planner, d.metrics) if isinstance(planner, ServerPlanner) else planner,
        planner_name=planner_name,
        own_writes=d.own_writes,
        breaker=breaker,
        extra_after_keep=hooks,
        isolation=mirror,  # one mirror: candidates and branch/patch delivery verify on it
        transcripts=TranscriptStore(s.state_path, keep_days=tx.keep_days, max_mb=tx.max_mb)
        if tx.enabled else None,
        delivery=delivery,
    )
    return Wiring(
        settings=s,
        modes=tuple(timed(m, d.metrics) for m in build_modes(s)),
        deps=deps,
        planner=planner,
        delivery=delivery,
        retry=RetryPolicy(s.limits, once=d.once),
        config_problems=tuple(f"{'.'.join(map(str, p.key))}: {p.message}" for p in check_problems(s)),
    )


def build_planner(s: Settings, state: State) -> tuple[Planner, str]:
    """The LLM planner when `llm.base_url` is set, else the offline rules planner; and its name."""
    if s.llm.base_url:
        from autod.planner.llm import LLMPlanner
        from autod.runtime.windows import KeptPace, KeptWindows

        llm = LLMPlanner(s.llm, s.api_key())
        llm.remember_windows(KeptWindows(state))  # learnt once, not on every restart or reload
        llm.remember_pace(KeptPace(state))  # a restart's first plan priced at the server's own speed
        return llm, "llm"
    from autod.checks.run import run_check
    from autod.planner.rules import RulesPlanner

    return RulesPlanner(s, run_check), "rules"


async def prompt_room(planner: Planner, mode: str) -> tuple[int, float] | None:
    """Tokens a prompt may take at the LLM server (its window less the reply cap), when known."""
    if not isinstance(planner, ServerPlanner):
        return None
    window = await planner.context_window()
    if not window:
        return None
    ratio = planner.chars_per_token or CHARS_PER_TOKEN
    return window - planner.reply_tokens(mode) - TEMPLATE_TOKENS, ratio


def settle(d: Daemon, wiring: Wiring) -> None:
    """What the long-lived parts take from the wiring's settings (redaction, the undo and outbox bounds,
    the info metric), and the config problems said once; done as the wiring is put in force."""
    s = wiring.settings
    logs.set_secrets(s.secrets())
    d.kept.keep_cycles, d.kept.keep_days = s.undo.keep_cycles, s.undo.keep_days
    d.outbox.max_items = s.notify.outbox_max_items
    d.book.workspace = s.workspace
    describe(d.metrics, s, wiring.planner_name)
    for problem in wiring.config_problems:
        log.error("config.check_cannot_start", problem=problem)


def observers(d: Daemon) -> list[CycleObserver]:
    """Told of every finished cycle: the metrics, the webhooks, the one-line narration."""
    return [CycleMetrics(d.metrics), CycleAnnouncer(d.courier), CycleNarrator()]


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
