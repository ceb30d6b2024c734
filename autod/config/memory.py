"""The tiered memory's config: retention per tier, recall, resilience and sharing a Chroma server."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from autod.config.models import CronStr, Strict, validate_cron


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
