"""The cap, before anything is planned: a failure whose fix would need a new branch or patch while
`delivery.max_open` are open waits in the queue (no LLM call is spent on it), and `autod status` says
why (`waiting: delivery cap reached ...`) and lists what is open. A failure that already has its
branch or patch is never held: its delivery is updated in place; while that branch or patch was made
from the current HEAD and is as autod left it, the failure is not planned again at all (the event is
dropped, logged with why)."""

from __future__ import annotations

from autod.act.edits import Caps
from autod.cycle.limits import Gate, Verdict
from autod.delivery.deliver import Delivery
from autod.events import FAILURE_KINDS, Event

CAP_WAIT_S = 60.0  # a held failure is looked at again at least this often
DEBUG = "auto-debug"  # the mode that takes failures


class DeliveryGate:
    """A Gate whose `admit` also holds failures at the delivery cap; everything else is the gate's."""

    def __init__(self, gate: Gate, delivery: Delivery) -> None:
        self.gate = gate
        self.delivery = delivery

    def admit(self, event: Event, *, uses_llm: bool, now: float | None = None) -> Verdict:
        """Sync, on the state thread, like Gate.admit."""
        verdict: Verdict = self.gate.admit(event, uses_llm=uses_llm, now=now)
        if not verdict.ok or event.kind not in FAILURE_KINDS or not self.delivery.isolated(DEBUG):
            return verdict
        if DEBUG not in self.delivery.settings.modes.enabled():
            return verdict
        key = f"{DEBUG}:{event.fingerprint}"
        done = self.delivery.already_delivered(key)
        if done is not None:  # no LLM call for a fix that waits for the operator on HEAD as it is
            return Verdict(False, reason=done, drop=True)
        held = self.delivery.held_reason(key, DEBUG, event.fingerprint, event.summary)
        return verdict if held is None else Verdict(False, CAP_WAIT_S, held)

    # what the cycle, undo and status ask a gate besides admit: the gate's own answers
    def caps(self, now: float | None = None) -> Caps:
        return self.gate.caps(now)

    def book(self, *, edits: int, tokens: int, now: float | None = None) -> None:
        self.gate.book(edits=edits, tokens=tokens, now=now)

    def record_attempt(self, event: Event, status: str, last_attempt: dict[str, object] | None) -> bool:
        return self.gate.record_attempt(event, status, last_attempt)

    def counters(self, now: float | None = None) -> dict[str, dict[str, int]]:
        return self.gate.counters(now)
