"""Every metric autod exports, with its name, help, labels and buckets: the contract the dashboard
(deploy/grafana-autod.json) and alert rules are built on. Updating one is an in-memory operation."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

__all__ = ["CONTENT_TYPE_LATEST", "Metrics"]

# Seconds. A cycle spans a quick offline fix to a CPU-bound LLM's half hour; checks a lint to a suite.
CYCLE_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
LLM_BUCKETS = (0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
CHECK_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
LOCALIZE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20)


class Metrics:
    """autod's metrics on a registry of its own (tests and the CLI make as many as they like)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry if registry is not None else CollectorRegistry()
        self.info = Info("autod", "The daemon: version, planner, workspace", registry=r)
        # -- cycles ----------------------------------------------------------------------------
        self.cycles = Counter(
            "autod_cycles", "Cycles finished, by mode and status", ["mode", "status"], registry=r
        )
        self.cycle_seconds = Histogram(
            "autod_cycle_duration_seconds",
            "Wall time of a cycle, all phases",
            ["mode"],
            buckets=CYCLE_BUCKETS,
            registry=r,
        )
        self.phase_seconds = Histogram(
            "autod_phase_duration_seconds",
            "Time a cycle spent in each phase",
            ["mode", "phase"],
            buckets=CYCLE_BUCKETS,
            registry=r,
        )
        self.edits = Counter(
            "autod_edited_lines", "Lines added and removed by kept cycles", ["change"], registry=r
        )
        self.replays = Counter(
            "autod_memory_replays",
            "Fixes replayed from memory as candidates (no model call), by the candidate's outcome",
            ["outcome"],
            registry=r,
        )
        self.recalled = Counter(
            "autod_memory_recalled_items", "Memory items recalled into cycles' prompts", registry=r
        )
        # -- LLM -------------------------------------------------------------------------------
        self.llm_requests = Counter(
            "autod_llm_requests",
            "Plan requests to the LLM (its own retries inside count once), by outcome",
            ["outcome"],
            registry=r,
        )
        self.llm_seconds = Histogram(
            "autod_llm_request_duration_seconds",
            "Time of one plan request to the LLM, retries included",
            buckets=LLM_BUCKETS,
            registry=r,
        )
        self.llm_tokens = Counter(
            "autod_llm_tokens", "LLM tokens spent, prompt and completion", ["kind"], registry=r
        )
        # -- checks, sandbox, localization -------------------------------------------------------
        self.check_runs = Counter(
            "autod_check_runs",
            "Check runs (sources, probes, verification), by result",
            ["check", "result"],
            registry=r,
        )
        self.check_seconds = Histogram(
            "autod_check_duration_seconds",
            "Time of one check run, by how it was sandboxed",
            ["check", "sandbox"],
            buckets=CHECK_BUCKETS,
            registry=r,
        )
        self.localize_seconds = Histogram(
            "autod_localize_duration_seconds",
            "Time to build a prompt's code context (localization)",
            ["mode"],
            buckets=LOCALIZE_BUCKETS,
            registry=r,
        )
        # -- sampled state -------------------------------------------------------------------------
        self.queue_depth = Gauge("autod_queue_depth", "Events pending or in flight", registry=r)
        self.retries_waiting = Gauge("autod_retries_waiting", "Events deferred to be tried again", registry=r)
        self.quarantined = Gauge(
            "autod_quarantined_fingerprints", "Failures autod stopped trying", registry=r
        )
        self.memory_items = Gauge(
            "autod_memory_items", "Memory items per tier (this daemon's)", ["tier"], registry=r
        )
        self.memory_spooled = Gauge(
            "autod_memory_spooled_writes", "Memory writes waiting for the store", registry=r
        )
        self.paused = Gauge("autod_paused", "1 while autod is paused", registry=r)
        self.wedged = Gauge(
            "autod_wedged", "1 while a cycle or dispatcher step is past its deadline", registry=r
        )
        # -- delivery, notifications, undo -------------------------------------------------------------
        self.deliveries = Counter(
            "autod_deliveries",
            "Fixes delivered as a branch or a patch, by outcome",
            ["kind", "outcome"],
            registry=r,
        )
        self.deliveries_open = Gauge(
            "autod_deliveries_open", "Open autod branches and patches", ["kind"], registry=r
        )
        self.notifications = Counter(
            "autod_notifications",
            "Webhook notifications, by outcome (queued, sent, failed try, dropped)",
            ["webhook", "outcome"],
            registry=r,
        )
        self.notifications_queued = Gauge(
            "autod_notifications_queued", "Notifications in the outbox, per webhook", ["webhook"], registry=r
        )
        self.undos = Counter("autod_undos", "autod undo requests, by outcome", ["outcome"], registry=r)

    # -- updates (each an in-memory operation) --------------------------------------------------------
    def cycle_finished(self, record: dict[str, Any]) -> None:
        """One finished cycle, from its reflection record."""
        mode = str(record.get("mode") or "-")
        self.cycles.labels(mode, str(record.get("status") or "failed")).inc()
        durations = record.get("durations_ms") or {}
        self.cycle_seconds.labels(mode).observe(sum(durations.values()) / 1000)
        for phase, ms in durations.items():
            self.phase_seconds.labels(mode, phase).observe(ms / 1000)
        tokens = record.get("tokens") or {}
        for kind in ("prompt", "completion"):
            if tokens.get(kind):
                self.llm_tokens.labels(kind).inc(tokens[kind])
        for c in record.get("candidates") or []:
            if c.get("replay_of"):
                self.replays.labels(str(c.get("outcome") or "-")).inc()
        self.recalled.inc(len(record.get("memory_used") or []))
        if record.get("status") in ("fixed", "improved", "no_change"):
            for e in record.get("edits") or []:
                self.edits.labels("added").inc(int(e.get("added") or 0))
                self.edits.labels("removed").inc(int(e.get("removed") or 0))

    def check_ran(
        self, name: str, *, exit_code: int, duration_ms: int, sandbox: str, timed_out: bool, error: str | None
    ) -> None:
        if error:
            result = "cannot_start"
        elif timed_out:
            result = "timeout"
        else:
            result = "pass" if exit_code == 0 else "fail"
        self.check_runs.labels(name, result).inc()
        if not error:
            self.check_seconds.labels(name, sandbox or "none").observe(duration_ms / 1000)

    def exposition(self) -> bytes:
        """The text format, as a scrape gets it."""
        return generate_latest(self.registry)
