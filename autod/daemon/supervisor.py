"""The daemon's task tree: sources -> queue -> dispatcher, control socket, housekeeping, watchdog;
signals, sd_notify and reload. What each task does lives in its own module (sourceset, dispatch,
checkbook, housekeeping, commands), what the config decides is one `Wiring` built in `wiring` and
replaced whole on reload; this one starts them, owns them and stops them."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import time
from pathlib import Path
from typing import Any

import structlog

from autod import isolation, logs
from autod.act.journal import recover
from autod.checks import sandbox
from autod.checks.run import CheckResult
from autod.checks.source import CheckSource
from autod.config.settings import ConfigError, Settings, load_config
from autod.control.commands import Commands
from autod.control.socket import ControlServer, socket_path
from autod.daemon.wiring import observers, output_tasks, settle, wire
from autod.delivery.ledger import DeliveryLedger
from autod.events import Event, EventKind
from autod.git.exclude import exclude_state_dir
from autod.memory.resilient import ResilientMemory
from autod.metrics.observe import check_ran
from autod.metrics.registry import Metrics
from autod.metrics.server import MetricsServer
from autod.ownwrites import OwnWrites
from autod.runtime import once, outage
from autod.runtime.checkbook import CheckBook
from autod.runtime.dispatch import Dispatcher
from autod.runtime.freshness import Run
from autod.runtime.housekeeping import housekeeping
from autod.runtime.narrate import announce_ready
from autod.runtime.notify import Notifier
from autod.runtime.sourceset import SourceSet, source_specs
from autod.runtime.wiring import Wiring
from autod.safety.boundary import config_inside_workspace
from autod.stores.queue import EventQueue
from autod.stores.state import State
from autod.threads import IO_POOL, IO_POOL_WORKERS, named_pool
from autod.undo.ledger import KeptLedger
from autod.webhooks.courier import Courier
from autod.webhooks.outbox import Outbox

log = structlog.get_logger("autod.daemon.supervisor")


class DaemonAlreadyRunning(Exception):
    pass


class Daemon:
    def __init__(self, settings: Settings, config_path: Path | None, *, once: bool = False) -> None:
        self._started_with = settings  # the config until the first wiring is built from it (_open)
        self._wiring: Wiring | None = None
        self.config_path = config_path
        self.once = once
        self.started_at = time.time()
        self.notifier = Notifier()
        self.own_writes = OwnWrites()
        self.workspace_lock = asyncio.Lock()
        self.wakeup = asyncio.Event()
        self.stopping = asyncio.Event()
        self.paused = False
        self.sources = SourceSet(self.accept)
        self.memory: ResilientMemory | None = None
        self._lock_fd: int | None = None
        self._ready: asyncio.Task[None] | None = None  # logs daemon.ready once the sources are armed
        self.dispatcher = Dispatcher(self)
        self.metrics = Metrics()
        self.metrics_server = MetricsServer(self.metrics)

    @property
    def wiring(self) -> Wiring:
        """What the config decides (autod.runtime.wiring): built in `_open`, replaced whole on reload."""
        if self._wiring is None:
            raise RuntimeError("the daemon is not wired before it opens")
        return self._wiring

    @property
    def settings(self) -> Settings:
        """The config in force: the wiring's."""
        return self._wiring.settings if self._wiring is not None else self._started_with

    def _put_in_force(self, wiring: Wiring) -> None:
        """`wiring` replaces the one in force whole; the old one closes once nothing runs on it."""
        settle(self, wiring)
        old, self._wiring = self._wiring, wiring
        if old is not None:
            self.dispatcher.in_use.retire(old)

    # -- start-up ------------------------------------------------------------------
    def _take_lock(self) -> None:
        path = self.settings.state_path / "autod.pid"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = os.read(fd, 32).decode(errors="replace").strip()
            os.close(fd)
            raise DaemonAlreadyRunning(
                f"another autod (pid {other or '?'}) owns {self.settings.state_path}"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd = fd

    async def _open(self) -> None:
        s = self.settings
        s.state_path.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._take_lock()
        # Before anything else: a cycle a crash left half-done is rolled back.
        recovered = await asyncio.to_thread(
            recover, s.state_path, s.workspace, on_write=self.own_writes.record
        )
        if recovered:
            log.warning("act.crash_recovered", cycles=recovered)
        # a mirror may hold a candidate a killed daemon was verifying: it never reached the tree
        await asyncio.to_thread(isolation.recover, s)
        await asyncio.to_thread(exclude_state_dir, s.workspace, s.state_path)
        self.state = State(s.state_path / "state.db")
        interrupted = await self.state.call(self.state.cycles_interrupted)
        if interrupted:
            log.warning("daemon.interrupted_cycles_failed", cycles=interrupted)
        self.queue = EventQueue(s.state_path / "queue.db")
        requeued = await asyncio.to_thread(self.queue.recover)
        if requeued:
            log.info("queue.events_requeued", count=requeued)
        self.paused = bool(await self.state.call(self.state.get_kv, "paused", False))
        self.book = CheckBook(s.workspace, self.state, self.accept, on_pass=self.dispatcher.resolve_stale)
        self.kept = KeptLedger(s.state_path, s.undo.keep_cycles, s.undo.keep_days)
        self.delivery_ledger = DeliveryLedger(s.state_path / "delivery.db")
        self.outbox = Outbox(s.state_path / "webhooks.db", s.notify.outbox_max_items)
        self.courier = Courier(lambda: self.settings, self.outbox, self.metrics)
        self.ledger = self.book.ledger
        self.memory = await self._open_memory()
        self.dispatcher.observers = observers(self)
        self._put_in_force(wire(s, self))

    async def _open_memory(self) -> ResilientMemory:
        # Always a memory: it opens the store in the background and degrades (status says why)
        # while the store is away; cycles then run without recall and its writes are spooled.
        s = self.settings
        return await ResilientMemory.start(
            s.memory, s.state_path, workspace=s.workspace, token=s.memory_token()
        )

    # -- check results -------------------------------------------------------------------
    @property
    def last_results(self) -> dict[str, CheckResult]:
        return self.book.results

    async def verify_check(
        self, settings: Settings, name: str, *, run: str | None = None, **extra: Any
    ) -> CheckResult:
        """Checks run by verification, as `settings` (the cycle's wiring's) configure them (the cycle
        already holds the workspace lock).

        run: the check's focus command instead of its own; extra: run_check's extra_args, extra_env,
        output_dir. Only a plain run is the check's latest result.
        """
        from autod.checks.run import run_check

        check = settings.checks[name]
        if run is not None:
            check = check.model_copy(update={"run": run})
        result = await run_check(name, check, settings.workspace, settings=settings, **extra)
        check_ran(self.metrics, result)
        if run is None and not extra:
            await self.book.record(result, time.time())  # held until the cycle keeps or drops its edits
        return result

    async def _on_check(self, result: CheckResult, at: float) -> None:
        check_ran(self.metrics, result)
        await self.book.record(result, at)

    async def probe_check(self, name: str) -> None:
        """Run a check now to learn the present (no result of it since start-up); queue its failure."""
        result, at = await self.check_source.run(name)
        event = await self.check_source.event_for(result, at)
        if event is not None:
            await self.accept(event)

    async def runs_counted(self, runs: list[Run], event: Event | None) -> None:
        await self.book.counted(runs, event)

    # -- sources ---------------------------------------------------------------------
    def _start_sources(self) -> None:
        s = self.settings
        self.check_source = CheckSource(
            s, lock=self.workspace_lock, on_result=self._on_check, start_all=self.once
        )
        specs = [("check", "check", lambda: self.check_source)] if s.checks else []
        if not self.once:
            specs += source_specs(s, self.own_writes)
        self.sources.start(specs)
        if self._ready is not None:
            self._ready.cancel()
        ready = announce_ready(self.sources, self.book.results, [m.name for m in self.wiring.modes])
        self._ready = asyncio.create_task(ready, name="ready")

    async def accept(self, event: Event) -> None:
        """Route one event: file changes also trigger checks; queue it if an enabled mode takes it."""
        if event.kind == EventKind.FILES_CHANGED:
            self.check_source.notify_change(list(event.payload.get("paths", [])))
        if not any(m.handles(event) for m in self.wiring.modes):
            log.debug(
                "queue.event_unhandled",
                kind=str(event.kind),
                source=event.source,
                summary=event.summary[:200],
            )
            return
        result = await self.queue.aput(event)
        if not result.accepted:
            log.warning(
                "queue.event_refused",
                reason="the queue is full of more urgent events",
                kind=str(event.kind),
                source=event.source,
                summary=event.summary[:200],
            )
            return
        log.info(
            "queue.event_queued",
            event_id=result.id,
            kind=str(event.kind),
            source=event.source,
            merged=result.merged,
            summary=event.summary[:200],
        )
        self.wakeup.set()

    async def start_up_checks_done(self) -> bool:
        """Whether the start-up checks have run (with no checks configured there are none to wait for)."""
        return not self.settings.checks or self.check_source.started.is_set()

    # -- signals and reload ------------------------------------------------------------
    def _install_signals(self) -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self.request_stop, "SIGTERM")
        loop.add_signal_handler(signal.SIGINT, self.request_stop, "SIGINT")
        loop.add_signal_handler(signal.SIGHUP, lambda: asyncio.ensure_future(self.reload()))

    def request_stop(self, why: str = "stop") -> None:
        if not self.stopping.is_set():
            log.info("daemon.stopping", signal=why)
            if self.once and self.dispatcher.error is None:
                self.dispatcher.error = f"interrupted by {why} before the queue drained"
            self.notifier.stopping()
            self.stopping.set()
            self.wakeup.set()

    async def reload(self) -> None:
        """SIGHUP: load the config again; a bad one is logged and the old one kept."""
        self.notifier.reloading()
        try:
            new = await asyncio.to_thread(load_config, self.config_path)
        except ConfigError as exc:
            log.error(
                "config.reload_refused",
                reason="the new config is invalid; keeping the old one",
                error=str(exc),
            )
            self.notifier.ready("running (reload refused: invalid config)")
            return
        if new.workspace != self.settings.workspace or new.state_path != self.settings.state_path:
            log.error(
                "config.reload_refused",
                reason="workspace and state_dir need a restart",
                workspace=str(new.workspace),
            )
            self.notifier.ready("running (reload refused)")
            return
        async with self.workspace_lock:  # never swap the config under a running cycle
            wiring = wire(new, self)
            await self.sources.stop()
            logs.configure_logging(level=new.logging.level, file=new.log_file, secrets=new.secrets())
            if self.memory is not None:  # a degraded store is retried now; a changed one reconnected
                self.memory.reload(new.memory, token=new.memory_token())
            self._put_in_force(wiring)
            self._start_sources()
        log.info("config.reloaded", modes=new.modes.enabled(), checks=list(new.checks))
        self.notifier.ready("running (config reloaded)")

    # -- main ---------------------------------------------------------------------------
    def healthy(self, dispatcher: asyncio.Task[None]) -> bool:
        """The watchdog pings only while the dispatcher lives and makes progress (autod.runtime.progress)."""
        return not dispatcher.done() and self.dispatcher.progress.healthy()

    async def run(self) -> int:
        # asyncio.to_thread's pool, bounded and named (`top -H`, the soak test's thread census)
        asyncio.get_running_loop().set_default_executor(named_pool(IO_POOL, IO_POOL_WORKERS))
        await self._open()
        sandbox.log_startup(await asyncio.to_thread(sandbox.status, self.settings))
        self._install_signals()
        control = ControlServer(socket_path(self.settings), Commands(self).handle)
        await control.start()
        if self.memory is not None:  # bounded: a store that is down or hung never holds up READY=1
            await self.memory.wait_open(self.settings.memory.open_wait_s, self.notifier.extend_timeout)
        self._start_sources()
        dispatcher = asyncio.create_task(self.dispatcher.run(), name="dispatcher")
        house = asyncio.create_task(
            housekeeping(self.state, lambda: self.memory, lambda: self.settings.memory.prune_schedule),
            name="housekeeping",
        )
        watchdog = asyncio.create_task(
            self.notifier.watchdog_loop(lambda: self.healthy(dispatcher)), name="watchdog"
        )
        outputs = output_tasks(self)
        # an LLM outage's retries run as soon as it answers again; start-up says when it does not
        llm_watch = asyncio.create_task(outage.watch_llm(self), name="llm-watch")
        llm_check = asyncio.create_task(outage.warn_if_unreachable(self.settings), name="llm-check")
        log.info(
            "daemon.started",
            workspace=str(self.settings.workspace),
            modes=[m.name for m in self.wiring.modes],
            planner=self.wiring.planner_name,
            checks=list(self.settings.checks),
            once=self.once,
            memory=self.memory.summary() if self.memory else "off",
        )
        if not any(not c.fixer for c in self.settings.checks.values()):
            where = self.settings.config_file or "no config file (defaults)"
            log.warning("daemon.no_checks", config=str(where), detail="no checks are configured: autod runs"
                        " no command, so no failure will come to fix; add `checks:` (README: Checks), or"
                        " see autod work: `autod run` in an empty directory writes a demo project there")
        inside = config_inside_workspace(self.settings)
        if inside:
            log.warning("config.inside_workspace", config=str(self.settings.config_file), detail=inside)
        self.notifier.ready(f"running; modes {', '.join(m.name for m in self.wiring.modes) or 'none'}")
        stop_wait = asyncio.create_task(self.stopping.wait(), name="stop-wait")
        try:
            await asyncio.wait({dispatcher, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
            if dispatcher.done() and not dispatcher.cancelled() and dispatcher.exception():
                self.dispatcher.error = f"dispatcher crashed: {type(dispatcher.exception()).__name__}"
                log.error("daemon.dispatcher_crashed", exc_info=dispatcher.exception())
            elif self.once and dispatcher.done() and not self.dispatcher.error:
                # the verdict is on the tree autod leaves: results older than its last write run again
                settling = asyncio.create_task(once.settle(
                    self.settings.checks, self.ledger, self.own_writes.last_at, self.check_source.run
                ), name="once-settle")
                await asyncio.wait({settling, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
                settling.cancel()  # a stop meanwhile: no verdict (request_stop recorded why)
                with contextlib.suppress(asyncio.CancelledError):
                    await settling
        finally:
            self.stopping.set()
            await self.sources.stop()
            if not dispatcher.done():
                if self.dispatcher.current is not None:
                    log.info("daemon.rolling_back_cycle_in_flight")
                dispatcher.cancel()
            tasks = (dispatcher, house, watchdog, stop_wait, llm_watch, llm_check, *outputs,
                     *([self._ready] if self._ready else []))
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError), logs.survive("daemon.stop_failed"):
                    await t
            await control.stop()
            await self._close()
        if self.once:
            return once.verdict(self.dispatcher.error, self.settings.checks, self.ledger,
                                self.dispatcher.cycles_run)
        return 0

    async def _close(self) -> None:
        if self.memory is not None:
            with logs.survive("memory.close_failed"):
                await self.memory.close()
        await self.dispatcher.in_use.close()  # the wirings reloads replaced, when a cycle still held them
        await self.wiring.close()
        await asyncio.to_thread(self.queue.close)
        self.outbox.close()
        self.delivery_ledger.close()
        self.state.close()
        log.info("daemon.stopped")
        logs.flush()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
