"""Planners turn an event plus context into a Plan. They never write files."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from autod.events import Event
from autod.plan import Plan
from autod.planner.earlystop import Watched

# A conservative estimate of characters per token before the server has counted one of our prompts
# (code tokenises denser than prose: ~3 characters a token for Qwen and Llama tokenizers).
CHARS_PER_TOKEN = 3.0
TEMPLATE_TOKENS = 64  # chat-template tokens around the messages


def prompt_chars(messages: list[dict[str, str]]) -> int:
    """The characters of the messages' contents (what a server's prompt token count is measured on)."""
    return sum(len(m.get("content") or "") for m in messages)


def estimated_tokens(messages: list[dict[str, str]], chars_per_token: float | None = None) -> float:
    """The messages' tokens at the server, before it has counted them (without the chat template)."""
    return prompt_chars(messages) / (chars_per_token or CHARS_PER_TOKEN)


@dataclass
class TokenUsage:
    prompt: int = 0
    completion: int = 0

    def __iadd__(self, other: TokenUsage) -> TokenUsage:
        self.prompt += other.prompt
        self.completion += other.completion
        return self

    @property
    def total(self) -> int:
        return self.prompt + self.completion


@dataclass
class PlanRequest:
    """What a mode hands a planner: the event, rendered prompt messages and structured context."""

    mode: str
    event: Event
    messages: list[dict[str, str]]
    context: dict[str, Any] = field(default_factory=dict)
    # The files a plan may edit, when the mode knows them (what the prompt showed, less what the act
    # rules refuse); an LLM planner sends them in the schema, None leaves `path` free.
    paths: tuple[str, ...] | None = None
    # Sampling temperature for this request only (None: the planner's own, llm.temperature).
    temperature: float | None = None
    # path -> qualnames the prompt showed whole: the only `symbol`s a whole-definition edit may name.
    symbols: dict[str, tuple[str, ...]] | None = None
    seed: int | None = None  # for a reproducible sample (servers that take it)
    # "json": a JSON plan (response_format, a grammar on llama.cpp); "code": header lines and fenced
    # blocks (autod.planner.codeform), no response_format
    form: str = "json"
    # stop sequences sent with the request (the code form's: the prompt's own section titles, where a
    # small model that started copying its prompt back is cut short)
    stop: tuple[str, ...] = ()
    n: int = 1  # plans wanted from this one request (a server that ignores `n` gives one)
    # the one definition a focused prompt asks back, fixed: its reply is streamed and ended once the
    # rest cannot change the fix (autod.planner.earlystop); None: read whole
    watch: Watched | None = None
    # asked in two legs where a reply would write more lines than this and `llm.point_lines` (0: never)
    # (autod.planner.point): a suspect's pointed question, after an echo, at any length past one line
    point_lines: int = 100_000
    # receives every exchange with the server, as a dict (the cycle's transcript); None: not kept
    record: Callable[[dict[str, Any]], None] | None = None


@dataclass
class PlanResult:
    plan: Plan
    tokens: TokenUsage = field(default_factory=TokenUsage)
    endpoint: str = ""
    # with n > 1: the further valid plans of the same request, and why the invalid ones were dropped
    alternatives: list[Plan] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    ended: str = ""  # why a watched reply was ended early (autod.planner.earlystop), if it was
    named: str = ""  # the line a long definition's leg one named, stripped (autod.planner.point), if any

    @property
    def choices(self) -> int:
        """How many plans the request gave back, valid or not."""
        return 1 + len(self.alternatives) + len(self.invalid)


class Planner(Protocol):
    async def plan(self, request: PlanRequest) -> PlanResult:
        """Return a valid Plan or raise PlanInvalid / LLMUnavailable."""
        ...


@runtime_checkable
class ServerPlanner(Planner, Protocol):
    """A planner that asks a server (the LLM's): what prompt budgets, `autod status` and shutdown read of
    it. The offline planner is not one: it has no window, no endpoint and nothing to close."""

    @property
    def endpoint(self) -> str:
        """The base URL it asks now (the fallback's while the primary is benched)."""
        ...

    @property
    def chars_per_token(self) -> float | None:
        """Characters a token of the server held in the prompts it counted (None: not yet seen)."""
        ...

    @property
    def read_per_generated(self) -> float | None:
        """A prompt token's time in reply tokens' time on the server, as measured on its streamed
        replies (autod.planner.pace; None: not yet)."""
        ...

    @property
    def write_seconds(self) -> float | None:
        """Seconds the server takes to write a reply token, as measured on its streamed replies
        (autod.planner.pace; None: not yet)."""
        ...

    @property
    def holds_lines(self) -> bool:
        """A long suspect's leg one is held to its definition's lines there (autod.planner.linechoice)."""
        ...

    async def context_window(self) -> int | None:
        """Tokens the server's context holds (prompt and reply), when known."""
        ...

    def reply_tokens(self, mode: str) -> int:
        """The reply token cap for a mode's requests."""
        ...

    async def ping(self) -> bool:
        """Whether the server answers now."""
        ...

    async def aclose(self) -> None:
        """Close its connections."""
        ...
