"""The config sections an operator edits: one pydantic model per YAML section, unknown keys forbidden.

Here: the base model and its validators, the modes, the checks, the sources, the limits, git and
logging; the LLM and what a prompt holds are `llm`, memory is `memory`, where fixes and news go is
`outputs`. `autod.config.settings` assembles them into Settings and loads the file; import them from
there.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from autod.config.keynames import shown_key
from autod.confinement import env_name_denied, expose_error


def no_nul(value: Any, depth: int = 0) -> Any:
    """`value` (any field's input) unchanged; a NUL character in any of its text is an error (no path,
    command, glob or URL holds one, and the OS refuses it far from the config: `embedded null byte`)."""
    if isinstance(value, str | Path) and "\0" in str(value):
        raise ValueError("holds a NUL character (\\0)")
    if depth < 16 and isinstance(value, dict):
        for k, v in value.items():
            no_nul(k, depth + 1)
            no_nul(v, depth + 1)
    elif depth < 16 and isinstance(value, list | tuple):
        for v in value:
            no_nul(v, depth + 1)
    return value


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _no_nul(cls, data: Any) -> Any:
        # per model, not per field: a union's discriminator field may have no before-validator
        if isinstance(data, dict):
            for key, value in data.items():
                try:
                    no_nul(value)
                except ValueError as exc:
                    raise ValueError(f"{shown_key(key)}: {exc}") from None
        return data


_NUMERIC_DOW = re.compile(r"\d")


def validate_cron(expr: str) -> str:
    """A 5-field crontab string whose weekday field uses names only.

    APScheduler 3 counts weekday 0 as Monday (crontab: Sunday), so numbers would silently
    run on the wrong day.
    """
    fields = expr.split()
    if len(fields) != 5:
        raise ValueError("cron needs 5 fields: minute hour day month weekday")
    dow = fields[4]
    if _NUMERIC_DOW.search(dow.split("/")[0]):
        raise ValueError("weekday must use names (mon-fri, sun), not numbers")
    from apscheduler.triggers.cron import CronTrigger

    try:
        CronTrigger.from_crontab(expr, timezone="UTC")
    except ValueError as exc:
        raise ValueError(f"invalid cron expression: {exc}") from None
    return expr


def yaml_off(v: Any) -> Any:
    """YAML 1.1 reads an unquoted `off` as false: for a sandbox mode, it means "off"."""
    return "off" if v is False else v


CronStr = Annotated[str, Field(min_length=9, max_length=200)]


def validate_expose(p: Path) -> Path:
    """A `checks.expose` entry (the rule: autod.confinement.expose_error)."""
    why = expose_error(p)
    if why:
        raise ValueError(why)
    return Path(os.path.normpath(p))


# The tests and the files that configure them: the judges of a fix, never the fix's to change.
DEFAULT_JUDGE_GLOBS = (
    "**/tests/**",
    "**/test/**",
    "**/test_*.py",
    "**/*_test.py",
    "**/conftest.py",
    "pytest.ini",
    "tox.ini",
    "setup.cfg",
    "noxfile.py",
    ".coveragerc",
)
JudgeGlobs = Annotated[list[Annotated[str, Field(min_length=1, max_length=500)]], Field(max_length=500)]
Globs = JudgeGlobs  # the same shape for the boundary's lists: up to 500 globs of up to 500 characters


# Where a mode's verified fix goes (autod.delivery): the working tree, a branch, or a patch file.
Delivery = Literal["worktree", "branch", "patch"]
DELIVERY_DESCRIPTION = (
    "worktree: edit the working tree; branch: commit on an autod branch; patch: a file in the outbox"
)


class ModeSettings(Protocol):
    """What every mode's config answers, whichever mode it is: a mode without the knob has the one value
    it runs with (a ClassVar, so the YAML still refuses the key)."""

    @property
    def enabled(self) -> bool: ...

    @property
    def require_confirmation(self) -> bool | None: ...

    @property
    def max_attempts_per_cycle(self) -> int: ...

    @property
    def delivery(self) -> Delivery: ...


class DebugMode(Strict):
    enabled: bool = Field(True, description="fix failing checks and build errors")
    require_confirmation: bool | None = Field(None, description="override limits.require_confirmation")
    max_attempts_per_cycle: int = Field(2, ge=1, le=5, description="re-plans after a rolled-back attempt")
    judge_globs: JudgeGlobs = Field(
        default_factory=lambda: list(DEFAULT_JUDGE_GLOBS),
        description="tests and test config a plan may not edit (plus the checks' own scripts)",
    )
    allow_judge_edits: bool = Field(
        False, description="true: a plan editing the judges is not refused but always waits for approval"
    )
    delivery: Delivery = Field("worktree", description=DELIVERY_DESCRIPTION)


class DocMode(Strict):
    enabled: bool = Field(False, description="keep docs and docstrings in step with code changes")
    require_confirmation: bool | None = None
    doc_globs: list[str] = Field(default_factory=lambda: ["docs/**", "*.md"])
    max_attempts_per_cycle: ClassVar[int] = 1  # a doc plan that fails is not re-planned in its cycle
    judge_globs: JudgeGlobs = Field(
        default_factory=lambda: list(DEFAULT_JUDGE_GLOBS),
        description="tests and test config a plan may not edit (doctests judge too)",
    )
    allow_judge_edits: bool = Field(
        False, description="true: a plan editing the judges is not refused but always waits for approval"
    )
    delivery: Delivery = Field("worktree", description=DELIVERY_DESCRIPTION)


class PlanMode(Strict):
    enabled: bool = Field(True, description="write a plan report on a schedule")
    schedule: CronStr | None = Field("0 7 * * mon-fri")
    report_path: str | None = Field(None, description="default <state_dir>/reports/YYYY-MM-DD.md")
    require_confirmation: bool | None = None
    max_attempts_per_cycle: ClassVar[int] = 1
    delivery: ClassVar[Delivery] = "worktree"  # a report, never a fix

    _cron = field_validator("schedule")(lambda v: v if v is None else validate_cron(v))


class Modes(Strict):
    auto_debug: DebugMode = Field(default_factory=DebugMode, alias="auto-debug")
    auto_doc: DocMode = Field(default_factory=DocMode, alias="auto-doc")
    auto_plan: PlanMode = Field(default_factory=PlanMode, alias="auto-plan")

    def enabled(self) -> list[str]:
        """Names of enabled modes, in the order their cycles run for one event."""
        out = []
        for name, mode in (
            ("auto-debug", self.auto_debug),
            ("auto-doc", self.auto_doc),
            ("auto-plan", self.auto_plan),
        ):
            if mode.enabled:
                out.append(name)
        return out

    def get(self, name: str) -> ModeSettings:
        return {"auto-debug": self.auto_debug, "auto-doc": self.auto_doc, "auto-plan": self.auto_plan}[name]


class CheckConfig(Strict):
    run: str = Field(min_length=1, max_length=4000, description="command line, split like a shell")
    timeout_s: float = Field(600, gt=0, le=86400)
    when: list[str] = Field(default_factory=lambda: ["start", "change"])
    fixer: bool = Field(False, description="the offline planner may run it to fix files")
    output_limit_kb: int = Field(64, ge=1, le=10240)
    env: dict[str, str] = Field(default_factory=dict)
    focus: str | None = Field(
        None,
        min_length=1,
        max_length=4000,
        description="quicker command run first after an edit (split like run); failing, it rolls back",
    )
    coverage: bool | None = Field(
        None,
        description="re-run the failing tests' files with per-test line recording to rank code (Ochiai);"
        " null: on for a pytest check",
    )
    sandbox: Literal["auto", "bwrap", "off"] | None = Field(
        None, description="override checks.sandbox for this check (null: inherit)"
    )
    network: bool = Field(False, description="true: the sandboxed check may use the network")
    covers: list[str] = Field(
        default_factory=list,
        max_length=200,
        description="workspace globs this check judges; a candidate that touches none of them skips it"
        " when it passed before (empty: every candidate runs it)",
    )

    outputs: Globs = Field(
        default_factory=list,
        description="workspace globs of files this check generates (even Python it loads later, in a"
        " git-ignored directory): never counted as a change of the source; tracked files, pytest's"
        " configuration and conftest files, and .gitignore stay source whatever this says",
    )

    _sandbox = field_validator("sandbox", mode="before")(lambda v: yaml_off(v))

    @field_validator("outputs")
    @classmethod
    def _relative(cls, v: list[str]) -> list[str]:
        for i, g in enumerate(v):
            if g.startswith("/") or ".." in g.split("/") or "\\" in g:
                raise ValueError(f"glob {i + 1}: relative to the workspace, without '..' or backslashes")
        return v

    @field_validator("env")
    @classmethod
    def _env_names(cls, v: dict[str, str]) -> dict[str, str]:
        bad = sorted(k for k in v if env_name_denied(k))
        if bad:
            raise ValueError(f"{', '.join(bad)}: autod's own and systemd's variables never reach a check")
        return v

    @field_validator("when", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @field_validator("when")
    @classmethod
    def _triggers(cls, v: list[str]) -> list[str]:
        for item in v:
            if item in ("start", "change", "manual"):
                continue
            if len(item.split()) == 1:  # one word is a misspelt trigger, not a cron string
                shown = f" {item!r}" if re.fullmatch(r"[A-Za-z_-]{1,20}", item) else ""
                raise ValueError(
                    f"unknown trigger{shown}: use start, change, manual or a 5-field cron string"
                )
            validate_cron(item)
        return v

    @property
    def cron(self) -> list[str]:
        return [w for w in self.when if w not in ("start", "change", "manual")]


class WatchSource(Strict):
    type: Literal["watch"]
    name: str | None = None
    paths: list[str] = Field(default_factory=lambda: ["."])
    settle_ms: int = Field(500, ge=10, le=60000, description="quiet time before a batch is one event")
    ignore: list[str] = Field(default_factory=list, description="extra glob patterns to ignore")
    use_gitignore: bool = True
    force_polling: bool = False


class LogtailSource(Strict):
    type: Literal["logtail"]
    name: str | None = None
    path: str
    from_start: bool = Field(False, description="read an existing file from the start once")
    patterns: list[str] = Field(default_factory=list, description="extra error regexes")
    context_lines: int = Field(5, ge=0, le=200)
    poll_s: float = Field(0.25, gt=0, le=60)

    @field_validator("patterns")
    @classmethod
    def _regexes(cls, v: list[str]) -> list[str]:
        for p in v:
            try:
                re.compile(p)
            except re.error as exc:
                raise ValueError(f"invalid regex: {exc}") from None
        return v


class CronSource(Strict):
    type: Literal["cron"]
    name: str | None = None
    schedule: CronStr
    mode: str = "auto-plan"
    timezone: str = "UTC"
    misfire_grace_s: int = Field(300, ge=1, le=86400)
    coalesce: bool = True

    _cron = field_validator("schedule")(lambda v: validate_cron(v))


SourceConfig = Annotated[WatchSource | LogtailSource | CronSource, Field(discriminator="type")]


class Limits(Strict):
    min_interval_s: float = Field(5, ge=0, le=86400)
    max_cycles_per_hour: int = Field(12, ge=1, le=10000)
    max_edits_per_cycle: int = Field(10, ge=1, le=1000)
    max_lines_per_cycle: int = Field(200, ge=1, le=100000)
    max_edits_per_day: int = Field(100, ge=1, le=100000)
    max_file_bytes: int = Field(1_000_000, ge=1000, le=100_000_000)
    max_attempts_per_fingerprint: int = Field(3, ge=1, le=100)
    max_tokens_per_day: int = Field(2_000_000, ge=1000)
    require_confirmation: bool = False
    proposal_ttl_h: float = Field(72, gt=0, le=8760)
    retry_base_s: float = Field(30, gt=0, le=3600, description="first wait before an event is tried again")
    retry_max_s: float = Field(1800, gt=0, le=86400, description="longest wait between two tries of an event")
    max_retries: int = Field(20, ge=0, le=1000, description="tries after failures outside the repository")
    cycle_grace_s: float = Field(
        120, gt=0, le=86400, description="slack over a cycle's plan and check timeouts before it is wedged"
    )
    deny_globs: Globs = Field(
        default_factory=list,
        description="never read or edited, on top of the built-in credential globs (autod.safety.protected)",
    )
    no_write_globs: Globs = Field(
        default_factory=list,
        description="never edited by a plan, on top of the built-in files that make tools run code",
    )
    allow_globs: Globs = Field(
        default_factory=list,
        description="exempt from the built-in deny and no-write globs (never from .git or autod's own files)",
    )


class GitConfig(Strict):
    commit: bool = False


class LoggingConfig(Strict):
    level: Literal["debug", "info", "warning", "error"] = "info"
    file: Path | None = Field(None, description="default <state_dir>/logs/autod.jsonl")
