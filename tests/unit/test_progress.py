"""The watchdog's question: is every dispatcher step, and every cycle, within its deadline?"""

from __future__ import annotations

from structlog.testing import capture_logs

from autod.checks.process import KILL_GRACE_S
from autod.config.settings import load_config
from autod.runtime.progress import Progress, cycle_budget


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeCycle:
    class r:  # stands in for Cycle.r
        cycle_id = "c0ffee"

    phase_now = "plan"


def test_a_cycle_past_its_deadline_is_wedged_and_logged_once_with_its_id_and_phase():
    clock = Clock()
    p = Progress(clock)
    p.step("dispatch", "cycle c0ffee", 30, FakeCycle())
    clock.now += 29
    assert p.healthy()
    clock.now += 2
    with capture_logs() as logs:
        assert not p.healthy() and not p.healthy()
    (line,) = [x for x in logs if x["event"] == "daemon.wedged"]
    assert line["log_level"] == "error" and line["cycle_id"] == "c0ffee" and line["phase"] == "plan"
    p.step("dispatch", "dispatch", 10)  # the loop moved on: healthy again
    assert p.healthy()


def test_an_approval_slot_is_watched_beside_the_loop_and_leaves_when_done():
    clock = Clock()
    p = Progress(clock)
    with p.running("approve:1", "cycle x", 5):
        clock.now += 6
        assert p.wedged()["slot"] == "approve:1"
    assert p.healthy()


def test_a_cycles_budget_is_its_plan_and_check_timeouts_per_attempt_plus_the_grace(tmp_path):
    cfg = tmp_path / "autod.yaml"
    cfg.write_text(
        f"workspace: {tmp_path}\n"
        "modes: {auto-debug: {max_attempts_per_cycle: 2}}\n"
        "checks:\n  tests: {run: x, timeout_s: 100}\n  lint: {run: y, timeout_s: 20}\n"
        "  fix: {run: z, timeout_s: 7, fixer: true}\n"
        "llm: {base_url: 'http://127.0.0.1:9/v1', timeout_s: 60}\n"
        "limits: {cycle_grace_s: 30}\n"
        "memory: {timeout_s: 5}\n"
    )
    s = load_config(cfg)
    run = 100 + 20 + 4 * KILL_GRACE_S  # every non-fixer check once
    memory = 2 * 5  # a recall's two memory deadlines
    # the first attempt draws at most 4 plans from each of the 10 suspects' prompts and one from each
    # of 3 value groups' (up to 6 changes each checked alone, then the reply whole); n = 4 wide a try
    # ones; a prompt's sampled plans that proposed nothing new are redrawn, as many as its draws at
    # most; an attempt's first request may ask twice (a context overflow, a request for more
    # definitions); each plan checked and each attempt's winner in the tree; the coverage re-run once
    asked = 2 + 2 * (40 + 8) + 3
    checked = 40 + 3 * 7 + 8
    assert cycle_budget(s, "auto-debug") == asked * 60 + (checked + 2) * run + 2 * memory + run + 30
    s.localize.focus_values = 0  # values only shown beside their readers
    assert cycle_budget(s, "auto-debug") == (2 + 96) * 60 + (48 + 2) * run + 2 * memory + run + 30
    s.candidates.focused = 0  # the wide prompt alone
    assert cycle_budget(s, "auto-debug") == (2 + 16) * 60 + (8 + 2) * run + 2 * memory + run + 30
    s.llm.base_url = None  # offline: the fixers are the planner, and one plan an attempt
    assert cycle_budget(s, "auto-debug") == 2 * (2 * (7 + 2 * KILL_GRACE_S) + 2 * run + memory) + run + 30
