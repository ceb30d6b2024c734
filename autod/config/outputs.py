"""Where fixes and news go: delivery (branch or patch), webhooks, metrics, undo: config."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from autod.config.credfile import CredentialError, read_credential
from autod.config.listen import parse_listen
from autod.config.models import Strict

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
    """A value from the environment variable `env`, or `$CREDENTIALS_DIRECTORY/credential` (stripped); a
    credential that is not one line of header-safe text is a CredentialError (`autod.config.credfile`)."""

    if env:
        return os.environ.get(env) or None
    cred = os.environ.get("CREDENTIALS_DIRECTORY")
    if credential and cred:
        try:
            return read_credential(Path(cred) / credential)
        except OSError:
            return None
        except CredentialError as exc:
            raise CredentialError(f"credential {credential}: {exc}") from None
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
        parse_listen(v)  # ValueError names what is wrong
        return v


class UndoConfig(Strict):
    keep_cycles: int = Field(100, ge=1, le=10000, description="kept cycles `autod undo` can take back")
    keep_days: float = Field(30, gt=0, le=3650, description="and none older than this")
