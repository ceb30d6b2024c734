"""Tiered vector memory: N0 observations, N1 episodes, N2 lessons."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol


class Tier(StrEnum):
    N0 = "n0"
    N1 = "n1"
    N2 = "n2"


@dataclass
class Recalled:
    id: str
    tier: Tier
    text: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)


class Embedder(Protocol):
    dim: int

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Blocking; callers run it off the event loop."""
        ...

    def load(self) -> None:
        """Load the model now, when it loads lazily on first use (the local one); blocking."""
        ...


class Memory(Protocol):
    async def observe(self, text: str, metadata: dict[str, Any]) -> str:
        """Queue an N0 observation (batched write); returns its id."""
        ...

    async def add_episode(self, text: str, metadata: dict[str, Any], *, defer: bool = False) -> str:
        """Store an episode; defer=True queues the write (the next recall sees it)."""
        ...

    async def add_lesson(
        self, text: str, metadata: dict[str, Any], *, success: bool, defer: bool = False
    ) -> str:
        """Store a lesson, merging into a near-duplicate (counts uses/successes). Returns its id."""
        ...

    async def recall(self, query: str, *, budget_tokens: int, k: int = 8) -> list[Recalled]: ...

    async def search(self, query: str, *, tier: Tier | None = None, k: int = 10) -> list[Recalled]:
        """The items most like `query`, of one tier or all, unbudgeted (reports, `autod memory`)."""
        ...

    async def flush(self) -> None: ...

    async def close(self) -> None: ...
