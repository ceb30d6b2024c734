"""The config contract: one YAML file, AUTOD_* env overrides, systemd credential for the key.

Every model forbids unknown keys. Errors are turned into one short line naming the file, the
line of the offending key (when the YAML has it) and the field; input values are never echoed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    AliasPath,
    BaseModel,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from autod.config.credfile import CredentialError, credential
from autod.config.errors import ConfigError, env_json_error, env_keys, format_error, key_lines
from autod.config.keynames import raw_secrets, shown_key
from autod.config.llm import (
    CandidatesConfig,
    LLMConfig,
    LLMEndpoint,
    LocalizeConfig,
    TranscriptsConfig,
)
from autod.config.loadguard import check_credentials, config_errors
from autod.config.memory import (
    MemoryConfig,
    Retention,
)
from autod.config.models import (
    CheckConfig,
    CronSource,
    CronStr,
    DebugMode,
    DocMode,
    GitConfig,
    Limits,
    LoggingConfig,
    LogtailSource,
    Modes,
    PlanMode,
    SourceConfig,
    Strict,
    WatchSource,
    no_nul,
    validate_cron,
    validate_expose,
    yaml_off,
)
from autod.config.outputs import (
    DeliveryConfig,
    MetricsConfig,
    NotifyConfig,
    UndoConfig,
)
from autod.config.strict import misspelt_variables, read_yaml

__all__ = [
    "CREDENTIAL_NAME",
    "EXIT_CONFIG",
    "SEARCH_PATHS",
    "CandidatesConfig",
    "CheckConfig",
    "ConfigError",
    "CronSource",
    "CronStr",
    "DebugMode",
    "DocMode",
    "GitConfig",
    "LLMConfig",
    "LLMEndpoint",
    "Limits",
    "LocalizeConfig",
    "LoggingConfig",
    "LogtailSource",
    "MemoryConfig",
    "Modes",
    "PlanMode",
    "Retention",
    "Settings",
    "SourceConfig",
    "Strict",
    "TranscriptsConfig",
    "WatchSource",
    "find_config",
    "key_lines",
    "load_config",
    "validate_cron",
]

EXIT_CONFIG = 78  # EX_CONFIG from sysexits.h; systemd units use RestartPreventExitStatus=78
SEARCH_PATHS = ("./autod.yaml", "./config/autod.yaml", "/etc/autod/autod.yaml")
CREDENTIAL_NAME = "llm_api_key"
MEMORY_CREDENTIAL_NAME = "memory_token"


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
    # `checks.sandbox` in the YAML (AUTOD_CHECKS__SANDBOX): a reserved key inside `checks:`, taken
    # out of the mapping before the checks are validated, so no check may be named `sandbox`.
    checks_sandbox: Literal["auto", "bwrap", "off"] = Field(
        "auto",
        validation_alias=AliasPath("checks", "sandbox"),
        description="auto: bwrap when it works here, else unsandboxed (said loudly); bwrap: required; off",
    )
    # `checks.expose` in the YAML: a second reserved key inside `checks:` (no check may be named `expose`).
    checks_expose: list[Path] = Field(
        default_factory=list,
        validation_alias=AliasPath("checks", "expose"),
        max_length=100,
        description="host paths checks need that the sandbox hides (an interpreter under /root), read-only",
    )
    sources: list[SourceConfig] = Field(default_factory=list)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    limits: Limits = Field(default_factory=Limits)
    git: GitConfig = Field(default_factory=GitConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    localize: LocalizeConfig = Field(default_factory=LocalizeConfig)
    candidates: CandidatesConfig = Field(default_factory=CandidatesConfig)
    transcripts: TranscriptsConfig = Field(default_factory=TranscriptsConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    # where fixes go (modes.*.delivery picks), who is told, what is served, what can be undone
    delivery: DeliveryConfig = Field(default_factory=DeliveryConfig)
    notify: NotifyConfig = Field(default_factory=NotifyConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    undo: UndoConfig = Field(default_factory=UndoConfig)
    # The file these settings were loaded from (None: defaults only): one of autod's own files.
    _config_file: Path | None = PrivateAttr(None)

    @model_validator(mode="before")
    @classmethod
    def _no_alias_by_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and "checks_sandbox" in data:
            raise ValueError("checks_sandbox: unknown key (the sandbox mode is checks.sandbox)")
        if isinstance(data, dict) and "checks_expose" in data:
            raise ValueError("checks_expose: unknown key (the list is checks.expose)")
        return data

    @field_validator("*", mode="before")
    @classmethod
    def _no_nul(cls, v: Any) -> Any:
        return no_nul(v)

    @field_validator("checks_expose")
    @classmethod
    def _expose(cls, v: list[Path]) -> list[Path]:
        return [validate_expose(p) for p in v]

    @field_validator("checks_sandbox", mode="before")
    @classmethod
    def _sandbox_mode(cls, v: Any) -> Any:
        v = yaml_off(v)
        if v not in ("auto", "bwrap", "off"):
            raise ValueError(
                "must be auto, bwrap or off (checks.sandbox is reserved for the sandbox mode:"
                " no check may be named 'sandbox')"
            )
        return v

    @field_validator("checks", mode="before")
    @classmethod
    def _drop_sandbox_key(cls, v: Any) -> Any:
        if isinstance(v, dict) and ("sandbox" in v or "expose" in v):
            # validated as checks_sandbox and checks_expose
            return {k: x for k, x in v.items() if k not in ("sandbox", "expose")}
        return v

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
                raise ValueError(f"cron source mode must be a mode name, not {shown_key(src.mode)!r}")
        return self

    # -- resolved paths -------------------------------------------------------------
    @property
    def config_file(self) -> Path | None:
        """The config file loaded (absolute), or None when running on defaults."""
        return self._config_file

    @property
    def state_path(self) -> Path:
        return self.state_dir if self.state_dir is not None else self.workspace / ".autod"

    @property
    def log_file(self) -> Path:
        return self.logging.file or self.state_path / "logs" / "autod.jsonl"

    @property
    def control_socket(self) -> Path:
        """$RUNTIME_DIRECTORY/autod.sock under systemd, else <state_dir>/autod.sock (autod.control.socket)."""
        runtime = os.environ.get("RUNTIME_DIRECTORY", "").split(":")[0]
        return Path(runtime) / "autod.sock" if runtime else self.state_path / "autod.sock"

    def mode_requires_confirmation(self, mode: str) -> bool:
        override = self.modes.get(mode).require_confirmation
        return self.limits.require_confirmation if override is None else override

    def api_key(self) -> str | None:
        """The LLM key: credential dir, then api_key_file, then the config/env value."""
        return credential(CREDENTIAL_NAME, self.llm.api_key_file, self.llm.api_key, "llm.api_key")

    def memory_token(self) -> str | None:
        """The Chroma server token: credential `memory_token`, then memory.auth_token_file, then the value."""
        return credential(
            MEMORY_CREDENTIAL_NAME, self.memory.auth_token_file, self.memory.auth_token, "memory.auth_token"
        )

    def secrets(self) -> list[str]:
        """Every secret value in force: redacted from logs, check output, prompts and memory.

        The LLM key from wherever it comes (credential, key file, config, env) and every other
        SecretStr in the config (the fallback's key, a memory server token, ...), found by walking
        the models so a secret field added later is covered without a change here.
        """
        out: list[str] = []
        key = None
        try:
            key = self.api_key()
        except (OSError, CredentialError):  # load_config refused a malformed one; it changed since
            key = None
        if key:
            out.append(key)
        try:
            token = self.memory_token()  # also from the credential or the token file
        except (OSError, CredentialError):
            token = None
        if token:
            out.append(token)
        out += _secret_values(self)
        out += self.notify.secrets()  # webhook tokens and URLs from the environment or credentials
        return sorted({s for s in out if len(s) >= 4})


def _secret_values(value: Any, depth: int = 0) -> list[str]:
    """The values of every SecretStr in a config model tree."""
    if depth > 8:
        return []
    if isinstance(value, SecretStr):
        return [value.get_secret_value()]
    if isinstance(value, BaseModel):
        fields = type(value).model_fields
        return [s for name in fields for s in _secret_values(getattr(value, name), depth + 1)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _secret_values(v, depth + 1)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _secret_values(v, depth + 1)]
    return []


# ---------------------------------------------------------------------------------------
# Loading


MODE_NAMES = ("auto-debug", "auto-doc", "auto-plan")


def _only_listed_modes(data: dict[str, Any]) -> None:
    """A `modes:` section that names some modes runs only those: a mode it leaves out is disabled
    (the defaults enable auto-debug and auto-plan only when the file has no `modes:` at all)."""
    modes = data.get("modes")
    if not isinstance(modes, dict) or not modes:
        return
    named = {str(k).replace("_", "-") for k in modes}
    for name in MODE_NAMES:
        if name not in named:
            modes[name] = {"enabled": False}


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


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    overrides: dict[str, Any] | None = None,
) -> Settings:
    """Load, validate and resolve the config. Raises ConfigError with a one-line message, whatever fails
    (`autod.config.loadguard`): never another exception, so every caller exits 78 or refuses a reload."""
    cfg_path = find_config(path)
    with config_errors(cfg_path):
        return _load(cfg_path, overrides)


def _load(cfg_path: Path | None, overrides: dict[str, Any] | None) -> Settings:
    data: dict[str, Any] = {}
    text = ""
    if cfg_path is not None:
        data, text = read_yaml(cfg_path)
        _only_listed_modes(data)
    if overrides:
        data = {**data, **overrides}
    if "workspace" not in data and not os.environ.get("AUTOD_WORKSPACE") and cfg_path is None:
        data["workspace"] = "."  # no config file at all: the current directory, all defaults

    misspelt = misspelt_variables(Settings.model_fields)
    if misspelt:
        raise ConfigError("; ".join(misspelt))

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
        hidden = raw_secrets(data) + raw_secrets({k.lower(): v for k, v in os.environ.items()})
        raise ConfigError(format_error(cfg_path, text, exc, Settings.model_fields, hidden)) from None
    except (ValueError, TypeError) as exc:  # env values that fail to parse as JSON, etc.
        said = env_json_error(exc, Settings.model_fields)
        if said is not None:
            raise ConfigError(said) from None
        if not env_keys(Settings.model_fields):
            raise  # no AUTOD_ override is set: not the environment's fault (the guard names the file)
        where = str(cfg_path) if cfg_path else "<environment>"
        raise ConfigError(f"{where}: {type(exc).__name__}: invalid value in environment") from None
    settings = _resolve(settings, cfg_path)
    check_credentials((settings.api_key, settings.memory_token, settings.notify.secrets), cfg_path, text)
    return settings


def _resolve(settings: Settings, cfg_path: Path | None) -> Settings:
    ws = settings.workspace.expanduser()
    # Relative paths resolve against the directory autod was started in (documented).
    ws = ws.resolve()
    where = str(cfg_path) if cfg_path else "<config>"
    if os.environ.get("AUTOD_WORKSPACE"):
        where = "environment variable AUTOD_WORKSPACE"
    if not ws.is_dir():
        raise ConfigError(f"{where}: workspace: not a directory: {ws}")
    settings.workspace = ws
    if settings.state_dir is not None:
        sd = settings.state_dir.expanduser()
        settings.state_dir = (ws / sd).resolve() if not sd.is_absolute() else sd.resolve()
    if settings.logging.file is not None and not settings.logging.file.is_absolute():
        settings.logging.file = (settings.state_path / settings.logging.file).resolve()
    settings._config_file = cfg_path.resolve() if cfg_path is not None else None
    return settings
