"""The config contract: one YAML file, AUTOD_* env overrides, systemd credential for the key.

Every model forbids unknown keys. Errors are turned into one short line naming the file, the
line of the offending key (when the YAML has it) and the field; input values are never echoed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

EXIT_CONFIG = 78  # EX_CONFIG from sysexits.h; systemd units use RestartPreventExitStatus=78
SEARCH_PATHS = ("./autod.yaml", "./config/autod.yaml", "/etc/autod/autod.yaml")
CREDENTIAL_NAME = "llm_api_key"


class ConfigError(Exception):
    """A config problem the operator can fix; the message names file, line and field."""


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


CronStr = Annotated[str, Field(min_length=9, max_length=200)]


class DebugMode(Strict):
    enabled: bool = Field(True, description="fix failing checks and build errors")
    require_confirmation: bool | None = Field(None, description="override limits.require_confirmation")
    max_attempts_per_cycle: int = Field(2, ge=1, le=5, description="re-plans after a rolled-back attempt")


class DocMode(Strict):
    enabled: bool = Field(False, description="keep docs and docstrings in step with code changes")
    require_confirmation: bool | None = None
    doc_globs: list[str] = Field(default_factory=lambda: ["docs/**", "*.md"])


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


class LLMConfig(Strict):
    base_url: str | None = Field(None, description="null: the offline rules planner")
    model: str = "qwen2.5-coder:7b"
    api_key: SecretStr | None = None
    api_key_file: Path | None = Field(None, description="file holding the key (systemd credential)")
    timeout_s: float = Field(120, gt=0, le=3600, description="overall deadline for one plan")
    request_timeout_s: float = Field(60, gt=0, le=3600)
    max_retries: int = Field(3, ge=0, le=10)
    max_tokens: int = Field(4096, ge=64, le=200000)
    temperature: float = Field(0.1, ge=0, le=2)
    response_format: Literal["auto", "json_schema", "json_object", "none"] = "auto"
    fallback: LLMEndpoint | None = None
    circuit_failures: int = Field(5, ge=1, le=100, description="failed plans before the breaker opens")
    circuit_cooldown_s: float = Field(300, ge=1, le=86400)

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
    deny_globs: list[str] = Field(
        default_factory=lambda: [
            ".env",
            ".env.*",
            "**/.env",
            "**/.env.*",
            "**/*.pem",
            "**/*.key",
            "**/id_rsa*",
            "**/id_ed25519*",
            "**/.ssh/**",
            "**/secrets/**",
            "**/*secret*",
            "**/.netrc",
            "**/.pypirc",
        ]
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

    _cron = field_validator("prune_schedule")(lambda v: validate_cron(v))


class LoggingConfig(Strict):
    level: Literal["debug", "info", "warning", "error"] = "info"
    file: Path | None = Field(None, description="default <state_dir>/logs/autod.jsonl")


class Settings(BaseSettings):
    """The whole config. Built by :func:`load_config`, never directly."""

    model_config = SettingsConfigDict(
        env_prefix="AUTOD_",
        env_nested_delimiter="__",
        extra="forbid",
        hide_input_in_errors=True,
        populate_by_name=True,
    )

    workspace: Path
    state_dir: Path | None = None
    modes: Modes = Field(default_factory=Modes)
    checks: dict[str, CheckConfig] = Field(default_factory=dict)
    sources: list[SourceConfig] = Field(default_factory=list)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    limits: Limits = Field(default_factory=Limits)
    git: GitConfig = Field(default_factory=GitConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)

    @field_validator("checks")
    @classmethod
    def _check_names(cls, v: dict[str, CheckConfig]) -> dict[str, CheckConfig]:
        for name in v:
            if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name):
                raise ValueError("check names use letters, digits, '_', '-', '.'")
        return v

    @model_validator(mode="after")
    def _cross(self) -> Settings:
        for src in self.sources:
            if isinstance(src, CronSource) and src.mode not in ("auto-debug", "auto-doc", "auto-plan"):
                raise ValueError(f"cron source mode must be a mode name, not {src.mode!r}")
        return self

    # -- resolved paths -------------------------------------------------------------
    @property
    def state_path(self) -> Path:
        return self.state_dir if self.state_dir is not None else self.workspace / ".autod"

    @property
    def log_file(self) -> Path:
        return self.logging.file or self.state_path / "logs" / "autod.jsonl"

    def mode_requires_confirmation(self, mode: str) -> bool:
        override = self.modes.get(mode).require_confirmation
        return self.limits.require_confirmation if override is None else override

    def api_key(self) -> str | None:
        """The LLM key: credential dir, then api_key_file, then the config/env value."""
        cred = os.environ.get("CREDENTIALS_DIRECTORY")
        if cred:
            p = Path(cred) / CREDENTIAL_NAME
            if p.is_file():
                return p.read_text().strip() or None
        if self.llm.api_key_file is not None and self.llm.api_key_file.is_file():
            return self.llm.api_key_file.read_text().strip() or None
        return self.llm.api_key.get_secret_value() if self.llm.api_key else None

    def secrets(self) -> list[str]:
        """Every secret value in force, for the log redaction processor."""
        out: list[str] = []
        key = None
        try:
            key = self.api_key()
        except OSError:
            key = None
        if key:
            out.append(key)
        if self.llm.fallback and self.llm.fallback.api_key:
            out.append(self.llm.fallback.api_key.get_secret_value())
        return [s for s in out if len(s) >= 4]


# ---------------------------------------------------------------------------------------
# Loading


def _key_lines(text: str) -> dict[tuple[Any, ...], int]:
    lines: dict[tuple[Any, ...], int] = {}
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return lines

    def walk(node: yaml.Node, path: tuple[Any, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else str(k)
                lines[(*path, key)] = k.start_mark.line + 1
                walk(v, (*path, key))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                lines[(*path, i)] = item.start_mark.line + 1
                walk(item, (*path, i))

    if root is not None:
        walk(root, ())
    return lines


def find_config(explicit: str | os.PathLike[str] | None) -> Path | None:
    """-c, then $AUTOD_CONFIG, then the search paths. None when there is no file at all."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("AUTOD_CONFIG")
    if env:
        return Path(env)
    for candidate in SEARCH_PATHS:
        p = Path(candidate)
        if p.is_file():
            return p
    return None


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config: {type(exc).__name__}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"{where}: YAML syntax error: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: the config must be a mapping of keys to values")
    _check_aliases(path, data)
    return data


_MAX_NODES = 100_000  # far above any real config; stops alias bombs before validation walks them


def _check_aliases(path: Path, data: Any) -> None:
    """Refuse an anchor used inside itself (endless recursion) or aliases that expand without bound."""
    seen = 0
    stack: list[tuple[Any, set[int]]] = [(data, set())]
    while stack:
        node, above = stack.pop()
        seen += 1
        if seen > _MAX_NODES:
            raise ConfigError(f"{path}: YAML aliases expand to over {_MAX_NODES} values")
        if isinstance(node, dict | list):
            if id(node) in above:
                raise ConfigError(f"{path}: a YAML anchor is used inside itself (recursive alias)")
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, above | {id(node)}) for child in children)


def _format_error(path: Path | None, text: str, exc: ValidationError) -> str:
    lines = _key_lines(text) if text else {}
    parts = []
    for err in exc.errors(include_input=False, include_url=False):
        loc = tuple(x for x in err["loc"] if not (isinstance(x, str) and x in _UNION_TAGS))
        # walk back up the path until a key with a known line is found
        line = None
        probe = loc
        while probe:
            if probe in lines:
                line = lines[probe]
                break
            probe = probe[:-1]
        field = ".".join(str(x) for x in loc) or "(top level)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "missing":
            msg = "required key is missing"
        where = str(path) if path else "<config>"
        if line is not None:
            where += f":{line}"
        parts.append(f"{where}: {field}: {msg}")
    return "; ".join(parts[:5]) + (f" (+{len(parts) - 5} more)" if len(parts) > 5 else "")


_UNION_TAGS = {"watch", "logtail", "cron"}


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    overrides: dict[str, Any] | None = None,
) -> Settings:
    """Load, validate and resolve the config. Raises ConfigError with a one-line message."""
    cfg_path = find_config(path)
    data: dict[str, Any] = {}
    text = ""
    if cfg_path is not None:
        data = _read_yaml(cfg_path)
        text = cfg_path.read_text(encoding="utf-8")
    if overrides:
        data = {**data, **overrides}
    if "workspace" not in data and not os.environ.get("AUTOD_WORKSPACE") and cfg_path is None:
        data["workspace"] = "."  # no config file at all: the current directory, all defaults

    class _Loaded(Settings):
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            # env overrides the file; init carries the file's values
            return (env_settings, init_settings)

    try:
        settings: Settings = _Loaded(**data)
    except ValidationError as exc:
        raise ConfigError(_format_error(cfg_path, text, exc)) from None
    except (ValueError, TypeError) as exc:  # env values that fail to parse as JSON, etc.
        where = str(cfg_path) if cfg_path else "<environment>"
        raise ConfigError(f"{where}: {type(exc).__name__}: invalid value in environment") from None
    return _resolve(settings, cfg_path)


def _resolve(settings: Settings, cfg_path: Path | None) -> Settings:
    ws = settings.workspace.expanduser()
    # Relative paths resolve against the directory autod was started in (documented).
    ws = ws.resolve()
    where = str(cfg_path) if cfg_path else "<config>"
    if not ws.is_dir():
        raise ConfigError(f"{where}: workspace: not a directory: {ws}")
    settings.workspace = ws
    if settings.state_dir is not None:
        sd = settings.state_dir.expanduser()
        settings.state_dir = (ws / sd).resolve() if not sd.is_absolute() else sd.resolve()
    if settings.logging.file is not None and not settings.logging.file.is_absolute():
        settings.logging.file = (settings.state_path / settings.logging.file).resolve()
    return settings
