"""The daemon's event sources: which run under a config, and the task that pumps each into the queue,
restarting it with backoff when it crashes and disabling it when it keeps crashing."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from autod import logs
from autod.backoff import Backoff
from autod.config.settings import CronSource, LogtailSource, Settings, WatchSource
from autod.events import Event
from autod.ownwrites import OwnWrites
from autod.sources import Source

log = structlog.get_logger("autod.daemon.supervisor")

RESTART_BASE_S = 1.0
RESTART_MAX_S = 60.0
CRASHES_BEFORE_DISABLE = 5
CRASH_WINDOW_S = 600.0

Factory = Callable[[], Source]


@dataclass
class SourceState:
    name: str
    kind: str
    state: str = "starting"  # running | restarting | disabled | stopped | done
    restarts: int = 0
    last_error: str | None = None
    crashes: list[float] = field(default_factory=list)
    events: int = 0


def source_specs(settings: Settings, own_writes: OwnWrites) -> list[tuple[str, str, Factory]]:
    """(name, kind, factory) of every configured source whose events some enabled mode can take.

    A cron source addresses one mode: when that mode is disabled it is not started (its events would
    only be thrown away), and `autod config check` says so.
    """
    s = settings
    enabled = set(s.modes.enabled())
    out: list[tuple[str, str, Factory]] = []
    for i, cfg in enumerate(s.sources):
        if isinstance(cfg, WatchSource):
            from autod.sources.watch import WatchSource as Watch

            name = cfg.name or f"watch:{','.join(cfg.paths)}"
            out.append((name, "watch", lambda c=cfg: Watch(c, s.workspace, s.state_path, own_writes)))
        elif isinstance(cfg, LogtailSource):
            from autod.sources.logtail import LogtailSource as Tail

            name = cfg.name or f"logtail:{Path(cfg.path).name}"
            out.append((name, "logtail", lambda c=cfg: Tail(c, s.workspace, s.state_path)))
        elif isinstance(cfg, CronSource):
            if cfg.mode not in enabled:
                log.info("source.skipped", source=cfg.name or f"cron:{i}", mode=cfg.mode,
                         reason="the mode it schedules is disabled")
                continue
            from autod.sources.cron import CronSource as Cron

            name = cfg.name or f"cron:{i}"
            out.append((name, "cron", lambda c=cfg: Cron(c)))
    plan = s.modes.auto_plan
    if plan.enabled and plan.schedule:
        from autod.sources.cron import CronSource as Cron

        cfg = CronSource(type="cron", name="auto-plan", schedule=plan.schedule, mode="auto-plan")
        out.append(("cron:auto-plan", "cron", lambda c=cfg: Cron(c)))
    return out


class SourceSet:
    """The running sources: one task each, owned here and stopped together."""

    def __init__(self, accept: Callable[[Event], Awaitable[None]]) -> None:
        self.accept = accept
        self.states: dict[str, SourceState] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self._armed: dict[str, asyncio.Event] = {}  # each running source's readiness

    def armed(self, name: str) -> bool:
        """Whether the source watches now (autod.sources.Source.armed): what `autod status` shows."""
        ready = self._armed.get(name)
        return ready is not None and ready.is_set()

    async def wait_armed(self, poll_s: float = 0.1) -> list[str]:
        """Until every source that still runs is armed; the names of those armed. A source that ended,
        stopped or was disabled is not waited for."""
        while True:
            live = [n for n, st in self.states.items() if st.state in ("starting", "running", "restarting")]
            waiting = [n for n in live if not self.armed(n)]
            if not waiting:
                return live
            ready = self._armed.get(waiting[0])
            if ready is None:  # its task has not made the source yet
                await asyncio.sleep(poll_s)
                continue
            with contextlib.suppress(TimeoutError):  # a restart may replace the event: look again
                await asyncio.wait_for(ready.wait(), timeout=1.0)

    def start(self, specs: list[tuple[str, str, Factory]]) -> None:
        self.states.clear()
        for name, kind, factory in specs:
            st = SourceState(name, kind)
            self.states[name] = st
            self.tasks[name] = asyncio.create_task(self.run_source(st, factory), name=f"source:{name}")

    async def stop(self) -> None:
        tasks = list(self.tasks.values())
        for t in tasks:
            t.cancel()
        for t in tasks:
            stopped = logs.survive("source.stop_failed", task=t.get_name())
            with contextlib.suppress(asyncio.CancelledError), stopped:
                await t
        self.tasks.clear()
        for st in self.states.values():
            if st.state != "disabled":
                st.state = "stopped"

    async def run_source(self, st: SourceState, factory: Factory) -> None:
        """Pump one source into the queue; restart it with backoff when it crashes."""
        while True:
            try:
                source = factory()
                st.state = "running"
                self._armed[st.name] = source.armed
                events: AsyncIterator[Event] = source.events()
                async for event in events:
                    st.events += 1
                    await self.accept(event)
                st.state = "done"
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                now = time.time()
                st.crashes = [t for t in st.crashes if now - t < CRASH_WINDOW_S] + [now]
                st.last_error = f"{type(exc).__name__}: {str(exc)[:200]}"
                if len(st.crashes) >= CRASHES_BEFORE_DISABLE:
                    st.state = "disabled"
                    log.error(
                        "source.disabled",
                        source=st.name,
                        error=st.last_error,
                        crashes=len(st.crashes),
                    )
                    return
                st.restarts += 1
                st.state = "restarting"
                delay = Backoff(RESTART_BASE_S, RESTART_MAX_S).delay(len(st.crashes) - 1)
                log.warning("source.crashed", source=st.name, error=st.last_error, in_s=delay)
                await asyncio.sleep(delay)
