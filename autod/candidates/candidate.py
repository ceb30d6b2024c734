"""The values of a candidate search: one drawn plan and what became of it (`Candidate`), one attempt's
draws (`AttemptResult`), the two seams a search is given (`Validator`, `Drawer`), and the one callable
the cycle lends candidates to reach the working tree (`IntoTree`, returning what it `Written`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from autod.act.edits import FileChange
from autod.candidates.reask import echoed
from autod.modes import Verification
from autod.plan import Plan
from autod.planner import PlanResult


class Validator(Protocol):
    """Verifies one candidate. `in_place`: it is written into the working tree (and kept if good)."""

    in_place: bool

    async def validate(self, plan: Plan, changes: list[FileChange]) -> Verification | None:
        """The verification's outcome; None: stored as a proposal instead (in place only)."""
        ...


class Written(Protocol):
    """A plan the cycle's act phase wrote into the working tree and verified there (autod.cycle.act.Acted)."""

    @property
    def verification(self) -> Verification: ...

    @property
    def diff(self) -> str:
        """What it changed (what a re-plan is told)."""
        ...

    @property
    def left(self) -> list[str]:
        """Files its rollback left because someone else changed them after autod wrote them."""
        ...


class IntoTree(Protocol):
    """The cycle's act phase, lent to candidates: the only way they reach the working tree."""

    async def __call__(self, plan: Plan, *, hold: str = "") -> Written | None:
        """Into the tree under every act rule, verified there, kept or rolled back, and recorded on the
        cycle's record; None: held as a proposal instead (`hold`: why it needs a person's yes)."""
        ...


class Drawer(Protocol):
    """Where a search's plans come from (autod.candidates.Asker)."""

    async def ask(
        self, *, temperature: float | None = None, seed: int | None = None, n: int = 1
    ) -> PlanResult:
        """A plan for the prompt (with n > 1, the alternatives too), and what it cost."""
        ...


@runtime_checkable
class FocusedDrawer(Drawer, Protocol):
    """A drawer with narrower views of the failure (autod.candidates.Asker). When `has_focus`, `ask`
    also takes `view="focused:K"`, a prompt of the Kth of its `suspects` definitions alone, and
    `view="value:J"`, the Jth of its `value_suspects` value groups'."""

    has_focus: bool
    suspects: int
    value_suspects: int
    # what the draws cost (autod.candidates.order), empty or 0: not known. Per suspect, from the first:
    # (its definition's tokens, its prompt's own tokens: the definition and the values it reads); per
    # value group: its values' tokens; the wide prompt's tokens
    suspect_sizes: Sequence[tuple[int, int]]
    value_sizes: Sequence[int]
    wide_tokens: int


@dataclass
class Candidate:
    """One drawn plan and what became of it."""

    n: int  # its number in the cycle, from 1
    attempt: int
    seed: int | None
    temperature: float
    plan: Plan | None = None
    # fixed | improved | rolled_back | refused | invalid | duplicate | unchanged | no_change | proposed
    outcome: str = ""
    reason: str = ""
    changes: list[FileChange] = field(default_factory=list)
    diff: str = ""
    key: str = ""
    votes: int = 1
    tokens: int = 0
    reply_tokens: int = 0  # of `tokens`, those the model generated (what echoes cost)
    ended: str = ""  # why its reply was ended early (autod.planner.earlystop), if it was
    model_ms: int = 0
    checks_ms: int = 0
    # what its draw was expected to take (autod.candidates.fits.expected_ms), beside `model_ms`: for a
    # bench to calibrate the price the deadline rule and the plan draw by; None when not known
    expected_ms: int | None = None
    verification: Verification | None = None
    suspect: str = ""  # why a fix may be a symptom patch (autod.act.inlined); kept only as a fallback
    # the prompt it was drawn from: "focused:K" (the Kth suspect alone), "value:J" (the values the Jth
    # value group holds) or "wide"
    view: str = "wide"
    part: bool = False  # one edit of a value group's reply, tried alone (autod.candidates.parts)
    replay_of: str = ""  # a remembered fix replayed (autod.candidates.replay): the episode's id

    @property
    def diff_lines(self) -> int:
        return sum(c.added + c.removed for c in self.changes)

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n": self.n, "attempt": self.attempt, "outcome": self.outcome, "diff_lines": self.diff_lines,
            "tokens": self.tokens, "seed": self.seed, "temperature": self.temperature,
            "model_ms": self.model_ms, "checks_ms": self.checks_ms, "view": self.view,
            "reply_tokens": self.reply_tokens,
        }
        if echoed(self.outcome, self.plan):
            out["echo"] = True  # the definition given back as it was
        if self.ended:
            out["ended"] = self.ended
        if self.expected_ms is not None:
            out["expected_ms"] = self.expected_ms
        if self.votes > 1:
            out["votes"] = self.votes
        if self.part:
            out["part"] = True
        if self.replay_of:
            out["replay_of"] = self.replay_of
        if self.plan is not None and self.plan.edits:  # the idea, for a lesson when it did not work
            out["idea"] = self.plan.summary.strip().split("\n", 1)[0][:200]
            where = {f"{e.path}::{e.symbol}" if e.symbol else e.path for e in self.plan.edits}
            out["where"] = sorted(where)[:5]
        if self.reason:
            out["reason"] = self.reason[:300]
        if self.suspect:
            out["suspect"] = self.suspect[:300]
        return out


@dataclass
class AttemptResult:
    candidates: list[Candidate]
    winner: Candidate | None = None  # fixed or improved; in place: already kept in the tree
    proposed: bool = False  # in place: the validator stored a proposal
    out_of_time: bool = False  # the cycle's deadline stopped it (autod.candidates.clock)

    def drawn(self, outcome: str) -> list[Candidate]:
        return [c for c in self.candidates if c.outcome == outcome]

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for c in self.candidates:
            counts[c.outcome] = counts.get(c.outcome, 0) + 1
        return ", ".join(f"{k} {v}" for k, v in counts.items()) or "none drawn"
