"""Errors a cycle survives. The cycle maps each to a reflection status and a reason."""

from __future__ import annotations


class CycleError(Exception):
    """A cycle ends early for a reason worth recording; the daemon keeps running."""

    status = "failed"
    # True when the cause lies outside the repository (the LLM, a budget): the event is not the
    # problem, so it stays queued and is tried again later (autod.retry) instead of being dropped.
    external = False

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PlanRejected(CycleError):
    """The plan broke an act rule (confinement, deny glob, scope, cap, search text); nothing written."""

    status = "rejected"


class PlanInvalid(CycleError):
    """The planner's reply was not a valid plan, even after one repair round."""

    external = True


class LLMUnavailable(CycleError):
    """The LLM could not be reached in time (retries and deadline spent); counts toward the breaker."""

    external = True


class BudgetExhausted(CycleError):
    """A limit (tokens per day, edits per day) is spent; the event waits."""

    external = True


class NothingToDo(CycleError):
    """The mode found nothing to act on (e.g. every changed function is documented)."""

    status = "no_change"
