"""Modes: which events they take, what context they build, what they may edit, how they verify."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from autod import pyast
from autod.act.edits import FileChange, ScopeCheck
from autod.checks.run import CheckResult
from autod.config.settings import Settings
from autod.errors import PlanRejected
from autod.events import Event, EventKind
from autod.logs import redact_text
from autod.memory import Memory, Recalled
from autod.plan import Plan
from autod.safety.boundary import Boundary
from autod.stores.state import State

if TYPE_CHECKING:
    from autod.ownwrites import OwnWrites


@dataclass
class Attempt:
    """A rolled-back attempt, shown to the planner so it does not repeat itself."""

    summary: str
    diff: str
    output: str
    earlier_cycle: bool = False  # the last attempt of an earlier cycle on this failure, not this one's

    def as_dict(self) -> dict[str, str]:
        out = {"summary": self.summary, "diff": self.diff[:6000], "output": self.output[-4000:]}
        return out | ({"earlier_cycle": "yes"} if self.earlier_cycle else {})


@dataclass
class Verification:
    status: str  # fixed | improved | rolled_back | no_change
    checks: list[CheckResult] = field(default_factory=list)
    reason: str = ""

    @property
    def output(self) -> str:
        """The checks' output for the re-plan prompt and the next cycle (known secrets redacted)."""
        return redact_text(
            "\n".join(f"$ check {c.name} (exit {c.exit_code})\n{c.output[-3000:]}" for c in self.checks)
        )


@dataclass
class ModeEnv:
    """What a mode may use. Modes never run commands other than configured checks."""

    settings: Settings
    state: State
    memory: Memory | None
    # run_check(name) runs a configured check for verification; run_check(name, run=CMD) runs its
    # `focus` command instead, and extra_args/extra_env/output_dir reach autod.checks.run.run_check (the
    # coverage re-run). Only a plain run counts as the check's latest result.
    run_check: Callable[..., Awaitable[CheckResult]]
    # the latest result of each check (the daemon's own dict): what was already failing before a cycle
    last_results: dict[str, CheckResult] = field(default_factory=dict)
    # prompt_room(mode) -> (tokens a whole prompt may take at the LLM server: its context window less
    # the mode's reply cap, characters per token there), or None when the server's window is unknown
    prompt_room: Callable[[str], Awaitable[tuple[int, float] | None]] | None = None
    # the planner reads no prompt (the offline rules planner runs the fixer checks): a mode builds
    # only what that planner uses
    offline: bool = False

    @property
    def workspace(self) -> Path:
        return self.settings.workspace

    @cached_property
    def boundary(self) -> Boundary:
        """What plans may write and prompts may read (rebuilt with the ModeEnv on reload)."""
        return Boundary.for_settings(self.settings)


class Mode(Protocol):
    name: str
    kinds: frozenset[EventKind]
    writes_code: bool
    # how its plans are written, "json" or "code" (autod.planner.codeform), and where a request in that
    # form stops (the prompt's own section titles a model copying its prompt back would write)
    reply_form: str
    stop: tuple[str, ...]

    def handles(self, event: Event) -> bool: ...

    async def context(self, event: Event, env: ModeEnv, recalled: list[Recalled]) -> Sections:
        """Prompt sections, already within the mode's budget, in priority order, with what went into
        them (`used`), the files they show for editing and the focused views (`Sections`)."""
        ...

    def messages(
        self, event: Event, context: dict[str, str], attempts: list[Attempt]
    ) -> list[dict[str, str]]: ...

    def scope(self, env: ModeEnv) -> ScopeCheck | None: ...

    async def verify(self, event: Event, plan: Plan, env: ModeEnv) -> Verification: ...


@runtime_checkable
class ReportWriter(Protocol):
    """A mode that writes a report file (auto-plan's, auto-doc's), as its outcome or beside its edits."""

    async def write_report(self, event: Event, plan: Plan, env: ModeEnv, own: OwnWrites) -> Path:
        """Write the plan's report; the path written."""
        ...


def template(name: str) -> Template:
    """A prompt template shipped as package data (autod/prompts/NAME.md)."""
    text = resources.files("autod.prompts").joinpath(f"{name}.md").read_text(encoding="utf-8")
    return Template(text)


def render(name: str, **values: Any) -> str:
    return template(name).safe_substitute({k: ("" if v is None else str(v)) for k, v in values.items()})


def tokens(text: str) -> int:
    """Cheap token estimate (4 chars a token) used for every budget."""
    return len(text) // 4 + 1


class Sections(dict[str, str]):
    """A mode's prompt sections, and what went into them (the reflection record's `context`)."""

    used: list[dict[str, str | None]]
    # The workspace files the sections show for editing (None: the mode does not say, and the plan's
    # paths are left free); the cycle narrows them to what the act rules allow.
    editable: list[str] | None
    # The focused view (autod.localize.focus): per suspect, in rank order, the sections of a prompt
    # that shows that one definition ("path", "symbol", "code") with the failure, for the candidates
    # drawn from it; None: the mode has none.
    focused: list[dict[str, str]] | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.used = []
        self.editable = None
        self.focused = None


def pack(sections: list[tuple[str, str]], budget_tokens: int) -> Sections:
    """Keep sections in priority order until the budget is spent; the last one kept may be cut."""
    out = Sections()
    left = budget_tokens
    for key, text in sections:
        if not text:
            out[key] = ""
            continue
        need = tokens(text)
        if need <= left:
            out[key] = text
            left -= need
        elif left > 50:
            out[key] = text[: left * 4] + "\n[... cut to fit the context budget ...]"
            left = 0
        else:
            out[key] = ""
    return out


def python_syntax_scope(change: FileChange) -> None:
    """Every edited Python file must still parse: a plan that breaks syntax is refused unwritten."""
    if change.rel.endswith(".py"):
        try:
            pyast.parse(change.new.decode("utf-8"), filename=change.rel)
        except SyntaxError as exc:
            raise PlanRejected(f"edit breaks Python syntax in {change.rel} (line {exc.lineno})") from None


def chain(*checks: ScopeCheck | None) -> ScopeCheck:
    real = [c for c in checks if c is not None]

    def run(change: FileChange) -> None:
        for c in real:
            c(change)

    return run


def memory_budget(settings: Settings, budget_tokens: int) -> int:
    """Memory's share of a prompt's context budget (memory.max_prompt_share), within recall_tokens."""
    return min(settings.memory.recall_tokens, int(budget_tokens * settings.memory.max_prompt_share))


def recalled_text(recalled: list[Recalled], *, shown: str = "", budget_tokens: int | None = None) -> str:
    """Recalled memory as plain lines: progress noise out, nothing already `shown` repeated, capped."""
    from autod.memory.recall import render_recalled

    return render_recalled(recalled, shown=shown, budget_tokens=budget_tokens)


async def fitted_budget(env: ModeEnv, mode: str, budget_tokens: int, fixed_chars: int) -> int:
    """The mode's context budget (autod's 4-character tokens), lowered so that the whole prompt, with
    `fixed_chars` of instructions around the sections, fits the server's context window when known."""
    room = await env.prompt_room(mode) if env.prompt_room is not None else None
    if room is None:
        return budget_tokens
    tokens_avail, chars_per_token = room
    fits = int((tokens_avail * chars_per_token - fixed_chars) / 4)
    return max(300, min(budget_tokens, fits))
