"""What autod knows of one LLM server's context window, and how it learns and keeps it.

The size in tokens comes from the config (`llm.context_tokens`), the server's own word (GET /props,
llama.cpp's server), a context error, or a reply the server cut short (llama-cpp-python states its
window nowhere). How many characters the server's tokens hold in autod's prompts is measured from
every reply's usage: the two together say how large a prompt fits before it is sent. A window learnt
rather than stated is kept (autod.runtime.windows: the state db) with its ratio, so a restart or a
config reload neither pays a cut reply to learn it again nor sizes its first prompt by an estimate
that code overruns.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import NamedTuple, Protocol

import structlog

from autod.planner import prompt_chars

log = structlog.get_logger("autod.planner.llm")

WINDOW_MEMORY_S = 5.0  # deadline of a read or write of the kept context windows
MEASURED_FROM_CHARS = 2000  # a shorter prompt's ratio is mostly the chat template's
RATIOS = (0.5, 8.0)  # characters per token a tokenizer gives (CJK text ~1); a count outside is garbage


def plausible(ratio: object) -> bool:
    """A characters-per-token figure some tokenizer could give (not a server's garbage count)."""
    return isinstance(ratio, int | float) and not isinstance(ratio, bool) and RATIOS[0] <= ratio <= RATIOS[1]


class Window(NamedTuple):
    """A server's context size in tokens, and how many characters its tokens held in autod's prompts
    (None when unmeasured)."""

    tokens: int
    chars_per_token: float | None = None


class WindowMemory(Protocol):
    """Where the context windows learnt of servers that state none are kept across restarts and config
    reloads, keyed by the server and the model."""

    async def recall(self, key: str) -> Window | None: ...

    async def keep(self, key: str, window: Window) -> None: ...


class ServerWindow:
    """One endpoint's context window and its characters per token."""

    def __init__(self, url: str, key: str, configured: int | None,
                 ask_server: Callable[[], Awaitable[int | None]]) -> None:
        self.url = url
        self.key = key
        self.tokens: int | None = configured
        self.chars_per_token: float | None = None
        self.memory: WindowMemory | None = None  # a window learnt here is kept there, and recalled
        self._ask_server = ask_server
        self._asked = configured is not None
        self._kept: Window | None = None  # what was last kept there (or recalled from it)

    async def size(self) -> int | None:
        """The context size in tokens, when configured, stated, learnt or kept from an earlier run
        (asked once: the server's own word first, then what was kept)."""
        if self.tokens is not None or self._asked:
            return self.tokens
        self._asked = True
        self.tokens = await self._ask_server()
        if self.tokens:
            log.info("llm.context_size_learnt", endpoint=self.url, context_tokens=self.tokens)
            return self.tokens
        if self.memory is None:
            return None
        try:
            kept = await asyncio.wait_for(self.memory.recall(self.key), WINDOW_MEMORY_S)
        except Exception as exc:  # the state db is a convenience here: budget as configured
            log.warning("llm.context_size_not_recalled", endpoint=self.url, error=type(exc).__name__)
            return None
        if kept:
            self.tokens, self._kept = kept.tokens, kept
            if self.chars_per_token is None:
                # without it, the first prompt is measured at CHARS_PER_TOKEN, which code overruns in
                # most tokenizers, and overflows the window just recalled
                self.chars_per_token = kept.chars_per_token
            log.info("llm.context_size_remembered", endpoint=self.url, context_tokens=kept.tokens,
                     chars_per_token=kept.chars_per_token,
                     hint="learnt on an earlier run; llm.context_tokens sets it")
        return self.tokens

    def measure(self, messages: list[dict[str, str]], prompt_tokens: int | None) -> int:
        """Characters per token, from a prompt of some size and its count (a reply's usage or a
        context error's): the fewest measured, since budgets must hold for the densest prompt.
        Returns the prompt's characters."""
        chars = prompt_chars(messages)
        if prompt_tokens and chars > MEASURED_FROM_CHARS and plausible(ratio := chars / prompt_tokens):
            self.chars_per_token = ratio if self.chars_per_token is None else min(self.chars_per_token, ratio)
        return chars

    async def learn(self, tokens: int, how: str) -> None:
        """The window as a reply or an error gave it away: budget to it from now on, and keep it."""
        self.tokens = tokens
        log.info("llm.context_size_learnt", endpoint=self.url, context_tokens=tokens, how=how)
        await self._keep(Window(tokens, self.chars_per_token))

    async def keep_ratio(self) -> None:
        """A learnt window's ratio, measured (or lowered by more than 2 %) after it was kept, joins it."""
        kept, ratio = self._kept, self.chars_per_token
        if kept is None or ratio is None:
            return
        if kept.chars_per_token is not None and ratio > kept.chars_per_token * 0.98:
            return
        await self._keep(Window(kept.tokens, ratio))

    async def _keep(self, window: Window) -> None:
        if self.memory is None:
            return
        self._kept = window  # tried once: a state db that fails is not asked again for this window
        try:
            await asyncio.wait_for(self.memory.keep(self.key, window), WINDOW_MEMORY_S)
        except Exception as exc:
            log.warning("llm.context_size_not_kept", endpoint=self.url, error=type(exc).__name__)
