"""The Reflection contract (cycle -> log line, state db, memory, retry policy, undo): one record per
cycle, with every field the README's "What a cycle does" lists."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Reflection:
    cycle_id: str
    event_id: str
    mode: str
    fingerprint: str
    kind: str
    summary: str
    status: str = "failed"
    reason: str | None = None
    plan_summary: str | None = None  # the planner's words (a model's prose is not checked against the diff)
    fix: str | None = None  # a kept fix, read from its diff: the definitions rewritten, the tests made pass
    edits: list[dict[str, Any]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    durations_ms: dict[str, int] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=lambda: {"prompt": 0, "completion": 0})
    memory_used: list[str] = field(default_factory=list)
    lesson: str | None = None
    attempts: int = 0
    merged: int = 1
    proposal_id: str | None = None
    report_path: str | None = None
    planner: str | None = None
    quarantined: bool = False
    commit: str | None = None
    # why each refused attempt was refused by the act rules (unwritten), in order: what the re-plan saw
    refusals: list[str] = field(default_factory=list)
    # set when the cycle's edits were rolled back: {"restored": [rel...], "left": [rel...]}
    rollback: dict[str, list[str]] | None = None
    # what went into the prompt: [{"path", "symbol", "lines", "why"}] (localization and the need round)
    context: list[dict[str, Any]] = field(default_factory=list)
    # every plan drawn: [{"n", "attempt", "outcome", "diff_lines", "tokens", "seed", ...}] (autod.candidates)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    # where the wall time went: {"wall_ms", "model_ms" (LLM requests), "checks_ms" (check runs),
    # "autod_ms" (the rest: autod's own work)}
    timing: dict[str, int] = field(default_factory=dict)
    # where a branch or patch delivery put the fix (autod.delivery): kind, outcome, branch/patch, commit, push
    delivery: dict[str, Any] | None = None
    # it failed for a reason outside the repository (the LLM down, a budget spent) before anything was
    # tried: it says nothing about the code, so no rate limit counts it and memory learns nothing from it
    external: bool = False

    def record(self) -> dict[str, Any]:
        return asdict(self)


def after_earlier_attempts(r: Reflection, status: str, reason: str) -> tuple[str, str]:
    """The cycle's (status, reason) when its latest attempt ends as (status, reason).

    An earlier attempt of the cycle that was applied, verified and rolled back stays what happened to
    the workspace: a re-plan that proposes nothing, is refused, or cannot be had (the LLM went away)
    does not turn it into `no_change` or `rejected`. The reason tells both, in order.
    """
    if r.status != "rolled_back":
        return status, reason
    return "rolled_back", f"{r.reason or 'the checks failed'}; then attempt {r.attempts}: {reason}"
