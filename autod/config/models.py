"""The config sections an operator edits: one pydantic model per YAML section, unknown keys forbidden.

`autod.config.settings` assembles them into Settings and loads the file; import them from there.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, populate_by_name=True)


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
    """A `checks.expose` entry (the rule lives with the mount table: autod.checks.mounts.expose_error)."""
    from autod.checks.mounts import expose_error

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

    def get(self, name: str) -> DebugMode | DocMode | PlanMode:
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

    _sandbox = field_validator("sandbox", mode="before")(lambda v: yaml_off(v))

    @field_validator("env")
    @classmethod
    def _env_names(cls, v: dict[str, str]) -> dict[str, str]:
        from autod.checks.env import env_name_denied

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


class LLMEndpoint(Strict):
    base_url: str
    model: str = "qwen2.5-coder:7b"
    api_key: SecretStr | None = None

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not re.match(r"^https?://[^\s/]+", v):
            raise ValueError("must be an http(s) URL")
        return v.rstrip("/")


# A plan's reply is small: a debug fix is a few search/replace pairs (61-160 tokens in 14 replies of
# Qwen2.5-Coder-1.5B, docs/REAL_LLM.md; 1500 still holds ~100 changed lines), docstrings for a file
# take more, a plan report's markdown the most. The cap bounds a runaway reply: ~5 min at 5 tokens/s.
MODE_REPLY_TOKENS = {"auto-debug": 1500, "auto-doc": 2000, "auto-plan": 2500}


class LLMConfig(Strict):
    base_url: str | None = Field(None, description="null: the offline rules planner")
    model: str = "qwen2.5-coder:7b"
    api_key: SecretStr | None = None
    api_key_file: Path | None = Field(None, description="file holding the key (systemd credential)")
    # Sized for a small model on a CPU (docs/REAL_LLM.md): a 5.7k-token prompt took 7 minutes on 2
    # busy cores. A cloud server answers far sooner; the deadlines only bound a hang.
    timeout_s: float = Field(1800, gt=0, le=7200, description="overall deadline for one plan")
    request_timeout_s: float = Field(900, gt=0, le=7200, description="one request, until the reply starts")
    max_retries: int = Field(3, ge=0, le=10)
    max_tokens: int | None = Field(None, ge=64, le=200000, description="reply cap, every mode; null: by mode")
    max_tokens_by_mode: dict[str, Annotated[int, Field(ge=64, le=200000)]] = Field(
        default_factory=lambda: dict(MODE_REPLY_TOKENS),
        description="reply token cap per mode when max_tokens is null (unnamed modes keep the default)",
    )
    token_param: Literal["auto", "max_tokens", "max_completion_tokens"] = Field(
        "auto", description="auto: max_tokens, switching when the server refuses it"
    )
    temperature: float = Field(0.1, ge=0, le=2)
    response_format: Literal["auto", "json_schema", "json_object", "none"] = "auto"
    constrain_paths: bool = Field(
        True, description="the schema lists the files a plan may edit (a grammar on llama.cpp)"
    )
    context_tokens: int | None = Field(
        None, ge=512, le=10_000_000,
        description="the server's context window; null: asked (llama.cpp GET /props) or learnt from errors",
    )
    fallback: LLMEndpoint | None = None
    circuit_failures: int = Field(5, ge=1, le=100, description="failed plans before the breaker opens")
    circuit_cooldown_s: float = Field(300, ge=1, le=86400)
    probe_timeout_s: float = Field(
        3, gt=0, le=60, description="deadline of the GET /models probe (config check, start-up, outages)"
    )
    probe_interval_s: float = Field(
        15, ge=0.1, le=3600, description="while events wait out an LLM outage, probe this often for its end"
    )

    @field_validator("max_tokens_by_mode")
    @classmethod
    def _by_mode(cls, v: dict[str, int]) -> dict[str, int]:
        unknown = sorted(set(v) - set(MODE_REPLY_TOKENS))
        if unknown:
            raise ValueError(f"unknown mode {unknown[0]!r}; modes are {', '.join(MODE_REPLY_TOKENS)}")
        return {**MODE_REPLY_TOKENS, **v}

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None:
            return None
        if not re.match(r"^https?://[^\s/]+", v):
            raise ValueError("must be an http(s) URL")
        return v.rstrip("/")


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


class Retention(Strict):
    ttl_days: float | None = Field(None, gt=0)
    max_items: int = Field(50000, ge=10, le=10_000_000)


class MemoryConfig(Strict):
    url: str | None = Field(None, description="null: embedded under state_dir")
    embedder: Literal["local", "openai"] = "local"
    embed_url: str | None = Field(None, description="OpenAI-compatible /v1 base for embeddings")
    embed_model: str = "nomic-embed-text"
    recall_tokens: int = Field(1500, ge=0, le=100000)
    recall_k: int = Field(8, ge=1, le=100)
    n0: Retention = Field(default_factory=lambda: Retention(ttl_days=7, max_items=50000))
    n1: Retention = Field(default_factory=lambda: Retention(ttl_days=90, max_items=20000))
    n2: Retention = Field(default_factory=lambda: Retention(ttl_days=None, max_items=5000))
    prune_schedule: CronStr = "17 3 * * *"
    min_similarity: float = Field(
        0.35, ge=0, le=1, description="recalled items less similar than this to the event are left out"
    )
    max_prompt_share: float = Field(
        0.15, ge=0, le=1, description="at most this share of a prompt's context budget goes to memory"
    )
    # -- resilience (fleet) --
    timeout_s: float = Field(10.0, ge=0.5, le=300, description="deadline of every memory store call")
    open_wait_s: float = Field(30.0, ge=0, le=600, description="start-up waits this long for the store")
    retry_min_s: float = Field(1.0, ge=0.05, le=600, description="first reconnect delay; doubles per failure")
    retry_max_s: float = Field(60.0, ge=0.1, le=3600, description="longest reconnect delay")
    spool_max_items: int = Field(
        50_000, ge=100, le=10_000_000, description="writes held while the store is away"
    )
    # -- sharing one Chroma server (fleet) --
    prune_scope: Literal["own", "all"] = Field("own", description="prune this daemon's items, or everyone's")
    prune_spread_s: int = Field(3600, ge=0, le=86400, description="per-instance delay of the scheduled prune")
    recall_from_others: Literal["none", "lessons"] = Field(
        "lessons", description="recall other daemons' lessons, labelled (never their observations)"
    )
    auth_token: SecretStr | None = Field(None, description="Chroma server token (or a credential/file)")
    auth_token_file: Path | None = Field(None, description="file holding the Chroma server token")
    auth_header: Literal["authorization", "x-chroma-token"] = Field(
        "authorization", description="how the token is sent: Authorization: Bearer, or X-Chroma-Token"
    )
    tenant: str = Field("default_tenant", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{2,62}$")
    database: str = Field("default_database", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{2,62}$")
    collection_prefix: str = Field("mem_", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,40}$",
                                   description="collections are PREFIXn0, PREFIXn1, PREFIXn2")

    _cron = field_validator("prune_schedule")(lambda v: validate_cron(v))

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^https?://[^/\s]+/?$", v):
            raise ValueError("memory.url must be http(s)://host:port (no path), or null (embedded)")
        return v

    @model_validator(mode="after")
    def _retry_order(self) -> MemoryConfig:
        if self.retry_max_s < self.retry_min_s:
            raise ValueError("memory.retry_max_s must be at least memory.retry_min_s")
        return self


class LocalizeConfig(Strict):
    budget_tokens: int = Field(
        6000, ge=500, le=200_000, description="prompt context budget: failure, code, memory (+ the diff)"
    )
    max_diff_tokens: int = Field(
        12000, ge=500, le=500_000, description="past this, diffs of files the failure never names are a stat"
    )
    history_commits: int = Field(
        5, ge=0, le=100, description="with no green revision: recent commits of the failing files shown"
    )
    index_max_files: int = Field(5000, ge=10, le=200_000, description="Python files the AST index reads")
    index_max_mb: int = Field(64, ge=1, le=4096, description="MB of source the AST index reads, at most")
    index_timeout_s: float = Field(20, gt=0, le=600, description="time the AST index may take to build")
    need_max: int = Field(8, ge=0, le=32, description="definitions a plan may ask for by name, once a cycle")


class LoggingConfig(Strict):
    level: Literal["debug", "info", "warning", "error"] = "info"
    file: Path | None = Field(None, description="default <state_dir>/logs/autod.jsonl")


class CandidatesConfig(Strict):
    """Several plans per attempt, each verified on a mirror of the workspace (autod.candidates)."""

    n: int = Field(4, ge=1, le=16, description="plans drawn per attempt; the first at temperature 0")
    temperature: float = Field(0.8, ge=0, le=2, description="sampling temperature of the 2nd..nth plan")
    seed: int = Field(1, ge=0, le=2**31 - 1, description="seed of the 1st plan; plan i uses seed + i")
    isolation: Literal["auto", "off"] = Field(
        "auto", description="auto: verify candidates on a mirror when bwrap works; off: in the tree"
    )
    mirror_max_files: int = Field(
        50_000, ge=100, le=2_000_000, description="past this many files the workspace is not mirrored"
    )
    mirror_max_mb: int = Field(2048, ge=1, le=1_000_000, description="past this size it is not mirrored")


class TranscriptsConfig(Strict):
    """Each cycle's exchanges with the model, redacted, for `autod show CYCLE` (autod.transcripts)."""

    enabled: bool = Field(True, description="keep what the model was sent and answered, per cycle")
    keep_days: float = Field(14, gt=0, le=3650, description="transcripts older than this are removed")
    max_mb: int = Field(256, ge=1, le=100_000, description="all transcripts together, at most (oldest go)")


# -- issue 22: where a fix goes, who is told, what is measured, what can be taken back ------------

_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
NOTIFY_EVENTS = (
    "fixed",
    "improved",
    "rolled_back",
    "rejected",
    "failed",
    "pending_approval",
    "quarantined",
    "wedged",
    "budget_spent",
    "delivered",
    "delivery_failed",
    "undone",
)
NotifyEvent = Literal[
    "fixed",
    "improved",
    "rolled_back",
    "rejected",
    "failed",
    "pending_approval",
    "quarantined",
    "wedged",
    "budget_spent",
    "delivered",
    "delivery_failed",
    "undone",
]


class DeliveryConfig(Strict):
    """Shared by the modes whose `delivery` is branch or patch (autod.delivery)."""

    branch_prefix: str = Field(
        "autod", pattern=r"^[a-z0-9][a-z0-9-]{0,30}$", description="branches are PREFIX/MODE/SLUG-FINGERPRINT"
    )
    push: str | None = Field(
        None, pattern=_NAME, description="remote to push autod branches to (never forced over); null: local"
    )
    push_timeout_s: float = Field(60, gt=0, le=600, description="deadline of one push")
    max_open: int = Field(
        5, ge=1, le=100, description="open autod branches plus patches at most; at the cap new failures wait"
    )


class Webhook(Strict):
    """One receiver of notifications (autod.webhooks). Its URL and token never appear in a log line."""

    name: str = Field(pattern=_NAME, description="names the webhook in logs, status and metrics")
    url: str | None = Field(None, description="http(s) URL; a secret one: url_env or url_credential")
    url_env: str | None = Field(None, pattern=_ENV_NAME, description="environment variable holding the URL")
    url_credential: str | None = Field(None, pattern=_NAME, description="systemd credential holding the URL")
    events: list[NotifyEvent] = Field(
        default_factory=lambda: ["fixed", "pending_approval", "quarantined", "wedged", "budget_spent",
                                 "delivery_failed"],
        min_length=1,
        max_length=len(NOTIFY_EVENTS),
        description="which notifications this webhook gets",
    )
    format: Literal["json", "slack"] = Field("json", description="json: autod's document; slack: {text}")
    token_env: str | None = Field(None, pattern=_ENV_NAME, description="environment variable holding a token")
    token_credential: str | None = Field(None, pattern=_NAME, description="systemd credential with a token")
    token_header: str = Field(
        "Authorization", pattern=r"^[A-Za-z0-9-]{1,64}$", description="header the token goes in"
    )
    token_prefix: str = Field("Bearer ", max_length=32, description="written before the token in the header")
    timeout_s: float = Field(10, gt=0, le=120, description="deadline of one POST")

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^https?://[^\s/]+", v):
            raise ValueError("must be an http(s) URL")
        return v

    @model_validator(mode="after")
    def _one_url_one_token(self) -> Webhook:
        if sum(x is not None for x in (self.url, self.url_env, self.url_credential)) != 1:
            raise ValueError("give exactly one of url, url_env, url_credential")
        if self.token_env is not None and self.token_credential is not None:
            raise ValueError("give at most one of token_env, token_credential")
        return self


class NotifyConfig(Strict):
    webhooks: list[Webhook] = Field(default_factory=list, max_length=20, description="notification receivers")
    outbox_max_items: int = Field(
        1000, ge=10, le=1_000_000, description="notifications kept while receivers are down; oldest dropped"
    )
    max_age_h: float = Field(72, gt=0, le=8760, description="a notification undelivered this long is dropped")
    retry_base_s: float = Field(5, gt=0, le=3600, description="first wait after a failed POST; doubles")
    retry_max_s: float = Field(600, gt=0, le=86400, description="longest wait between two tries of a webhook")

    @model_validator(mode="after")
    def _unique_names(self) -> NotifyConfig:
        names = [w.name for w in self.webhooks]
        if len(set(names)) != len(names):
            raise ValueError("webhook names must be unique")
        return self

    def secrets(self) -> list[str]:
        """Every token and URL read from the environment or a credential: redacted wherever they appear."""
        out = []
        for w in self.webhooks:
            for env, cred in ((w.token_env, w.token_credential), (w.url_env, w.url_credential)):
                value = read_secret(env, cred) if env or cred else None
                if value:
                    out.append(value)
        return out


def read_secret(env: str | None, credential: str | None) -> str | None:
    """A value from the environment variable `env`, or `$CREDENTIALS_DIRECTORY/credential` (stripped)."""
    import os

    if env:
        return os.environ.get(env) or None
    cred = os.environ.get("CREDENTIALS_DIRECTORY")
    if credential and cred:
        try:
            return (Path(cred) / credential).read_text().strip() or None
        except OSError:
            return None
    return None


class MetricsConfig(Strict):
    listen: str | None = Field(
        None, description="HOST:PORT on loopback serving Prometheus /metrics; null: off (`autod metrics`)"
    )
    sample_s: float = Field(15, ge=1, le=3600, description="how often the queue and memory gauges are read")

    @field_validator("listen")
    @classmethod
    def _loopback(cls, v: str | None) -> str | None:
        if v is None:
            return None
        from autod.metrics.address import parse_listen

        parse_listen(v)  # ValueError names what is wrong
        return v


class UndoConfig(Strict):
    keep_cycles: int = Field(100, ge=1, le=10000, description="kept cycles `autod undo` can take back")
    keep_days: float = Field(30, gt=0, le=3650, description="and none older than this")
