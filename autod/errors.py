"""Errors a cycle survives. The cycle maps each to a reflection status and a reason."""

from __future__ import annotations


class CycleError(Exception):
    """A cycle ends early for a reason worth recording; the daemon keeps running."""

    status = "failed"
    # True when the cause lies outside the repository (the LLM, a budget): the event is not the
    # problem, so it stays queued and is tried again later (autod.runtime.retry) instead of being dropped.
    external = False
    tokens: dict[str, int] | None = None  # LLM tokens spent before the error: booked all the same

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PlanRejected(CycleError):
    """The plan broke an act rule (confinement, deny glob, scope, cap, search text); nothing written."""

    status = "rejected"


class PlanInvalid(CycleError):
    """The model's reply was not a valid plan, even after one repair round.

    Not `external`: the server answered, the model got it wrong. The next request varies the seed or
    says what was wrong; nothing waits for a backoff as if the server were down. Counted like a
    refused plan (`rejected`): an attempt on the failure.
    """

    status = "rejected"


class LLMUnavailable(CycleError):
    """The LLM could not be reached in time (retries and deadline spent); counts toward the breaker."""

    external = True


class BudgetExhausted(CycleError):
    """A limit (tokens per day, edits per day) is spent; the event waits."""

    external = True


class NothingToDo(CycleError):
    """The mode found nothing to act on (e.g. every changed function is documented)."""

    status = "no_change"


class ContextTooLong(CycleError):
    """The prompt does not fit the model's context window: not an outage, not a bad plan.

    Not `external`: the same prompt would not fit later either; the operator changes the server's
    context size or autod's budgets (the reason says so).

    `limit`, `prompt_tokens` and `reply_tokens` are the server's numbers when it stated them; `fit()`
    is the share of the prompt to keep for a retry with less context.
    """

    def __init__(
        self,
        reason: str,
        *,
        limit: int | None = None,
        prompt_tokens: int | None = None,
        reply_tokens: int | None = None,
    ) -> None:
        super().__init__(reason)
        self.limit, self.prompt_tokens, self.reply_tokens = limit, prompt_tokens, reply_tokens

    def fit(self) -> float:
        """Share of the prompt that fits beside the reply (with a margin); half when unknown."""
        if not self.limit or not self.prompt_tokens:
            return 0.5
        room = self.limit - (self.reply_tokens or 0) - 64
        return min(0.9, max(0.2, 0.9 * room / self.prompt_tokens))
