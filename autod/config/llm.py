"""The LLM, what a prompt holds (localization), the candidate search and the transcripts: config."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator

from autod.config.keynames import shown_key
from autod.config.models import Strict


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
    # code: what Qwen2.5-Coder-1.5B fixes most with (bench_realllm 13/14 against 11/14 as JSON, in half
    # the prompt tokens; docs/REAL_LLM.md); json: a schema-checked object, a grammar on llama.cpp
    reply_form: Literal["code", "json"] = Field(
        "code", description="auto-debug's plans: header lines and fenced code blocks (code: no "
        "response_format; autod.planner.codeform), or a JSON object (json)"
    )
    constrain_paths: bool = Field(
        True, description="the schema lists the files a plan may edit (a grammar on llama.cpp)"
    )
    stop_early: bool = Field(
        True, description="stream a suspect's reply and end it once the rest cannot change the fix "
        "(an echo, or a change back on the definition's own lines; autod.planner.earlystop)"
    )
    stream: bool = Field(
        True, description="ask for every one-choice reply as a stream, so a reply autod gives up on "
        "(a deadline, a stop) also ends on the server, which would otherwise generate it to the end"
    )
    prefill: Literal["auto", "none", "chatml"] = Field(
        "auto", description="start a suspect's greedy reply with its definition's head (signature, "
        "docstring) so the model generates only the body: chatml renders the prompt in the ChatML "
        "template for the server's /completions endpoint (Qwen and other ChatML models; "
        "autod.planner.prefill); auto does so when the server's tokenizer reads ChatML's markers as "
        "tokens; a sampled reply is given its docstring once it has written its signature unchanged "
        "(autod.planner.splice); none asks every reply whole (YAML's off reads as none)"
    )
    point_lines: int = Field(
        24, ge=0, le=100_000, description="a suspect's one-choice reply that would generate more lines "
        "than this (of its body, to the last line the failing tests ran) is asked in two legs, greedy or "
        "sampled: the line the model holds wrong, then the code from that line (autod.planner.point); "
        "0: never"
    )
    point_above: int = Field(
        0, ge=0, le=100, description="leg two of a two-leg reply is begun this many lines above the line "
        "leg one named, so the model may also rewrite them or put a statement before them "
        "(autod.planner.point); 0: begun at the named line"
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
            modes = ", ".join(MODE_REPLY_TOKENS)
            raise ValueError(f"unknown mode {shown_key(unknown[0])!r}; modes are {modes}")
        return {**MODE_REPLY_TOKENS, **v}

    @field_validator("prefill", mode="before")
    @classmethod
    def _prefill(cls, v: object) -> object:
        return "none" if v is False else v  # YAML 1.1 reads `off` as false

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None:
            return None
        if not re.match(r"^https?://[^\s/]+", v):
            raise ValueError("must be an http(s) URL")
        return v.rstrip("/")


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
    index_max_summary_mb: int = Field(
        256, ge=16, le=16384, description="MiB the AST index's summaries may hold (about twice the source"
        " for ordinary code, 15-35x for many one-line definitions); also what is kept across cycles"
    )
    index_timeout_s: float = Field(20, gt=0, le=600, description="time the AST index may take to build")
    need_max: int = Field(8, ge=0, le=32, description="definitions a plan may ask for by name, once a cycle")
    focus_definitions: int = Field(
        10, ge=0, le=10,
        description="suspects: the top-ranked definitions the focused draws may ask about "
        "(candidates.focused); which are asked, and how often, follows their odds and length "
        "(autod.candidates.order)",
    )
    focus_values: int = Field(
        3, ge=0, le=10,
        description="value groups: for this many suspects that read short constants or class attributes, "
        "those values are asked about together, without the function, once each, after every suspect's "
        "first draw and before their sampled ones (0: values are only shown beside the suspects)",
    )


class CandidatesConfig(Strict):
    """Several plans per attempt, each verified on a mirror of the workspace (autod.candidates)."""

    n: int = Field(4, ge=1, le=16, description="plans drawn per attempt; the first at temperature 0")
    temperature: float = Field(0.8, ge=0, le=2, description="sampling temperature of the 2nd..nth plan")
    seed: int = Field(
        1, ge=0, le=2**31 - 1, description="seed of each prompt's 1st plan in a cycle; its ith uses seed + i"
    )
    focused: int = Field(
        4, ge=0, le=15, description="plans drawn from each suspect definition alone (the failure and that "
        "definition), the first at temperature 0, all in a cycle's first attempt before the wide ones"
    )
    isolation: Literal["auto", "off"] = Field(
        "auto", description="auto: verify candidates on a mirror when bwrap works; off: in the tree"
    )
    mirror_max_files: int = Field(
        50_000, ge=100, le=2_000_000, description="past this many files the workspace is not mirrored"
    )
    mirror_max_mb: int = Field(2048, ge=1, le=1_000_000, description="past this size it is not mirrored")
    check_timeout_factor: float = Field(
        10, ge=0, le=1000, description="a candidate's check on the mirror is stopped after this many times "
        "the longest of the failing run and the check's last passing run (0: the check's own timeout_s)"
    )
    check_timeout_min_s: float = Field(
        120, gt=0, le=86400, description="... never sooner than this (nor later than the check's timeout_s)"
    )
    max_cycle_minutes: float = Field(
        0, ge=0, le=10080, description="a cycle's wall time at most: past it no draw starts and the one in "
        "flight is dropped, the cycle ends unfixed with the deadline as its reason, no edit half-applied "
        "(0: no bound; `autod run --once --max-minutes` sets it for one run)"
    )


class TranscriptsConfig(Strict):
    """Each cycle's exchanges with the model, redacted, for `autod show CYCLE` (autod.transcripts)."""

    enabled: bool = Field(True, description="keep what the model was sent and answered, per cycle")
    keep_days: float = Field(14, gt=0, le=3650, description="transcripts older than this are removed")
    max_mb: int = Field(256, ge=1, le=100_000, description="all transcripts together, at most (oldest go)")


# -- where a fix goes, who is told, what is measured, what can be taken back: autod.config.outputs --
