"""Recall scoring and packing: pure functions over query hits from the three tiers.

score = similarity x tier weight x recency decay x outcome factor, then the best items are
packed into a token budget. Lessons (N2) never decay: a lesson is as true in a year as today.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from autod.memory import Recalled, Tier

TIER_WEIGHT: dict[Tier, float] = {Tier.N2: 1.0, Tier.N1: 0.8, Tier.N0: 0.6}
HALF_LIFE_S: dict[Tier, float | None] = {Tier.N0: 86400.0, Tier.N1: 30 * 86400.0, Tier.N2: None}
FIXED_EPISODE_BONUS = 1.2


@dataclass(frozen=True)
class Hit:
    """One raw query result: cosine similarity and the stored item."""

    id: str
    tier: Tier
    text: str
    similarity: float
    metadata: Mapping[str, Any]


def similarity_from_distance(distance: float) -> float:
    """Cosine similarity from chromadb's cosine distance (1 - cos)."""
    return 1.0 - float(distance)


def recency_decay(tier: Tier, ts: float | None, now: float) -> float:
    """0.5 ** (age / half-life) for the tier; 1.0 for tiers that never decay or undated items."""
    half_life = HALF_LIFE_S[tier]
    if half_life is None or ts is None:
        return 1.0
    age = max(0.0, now - float(ts))
    return math.pow(0.5, age / half_life)


def outcome_factor(tier: Tier, metadata: Mapping[str, Any]) -> float:
    """Bonus for what worked: lessons by success rate, episodes that fixed the problem."""
    if tier is Tier.N2:
        uses = max(0, int(metadata.get("uses", 0) or 0))
        successes = max(0, int(metadata.get("successes", 0) or 0))
        return 1.0 + successes / (uses + 1)
    if tier is Tier.N1 and metadata.get("status") == "fixed":
        return FIXED_EPISODE_BONUS
    return 1.0


def score(hit: Hit, now: float) -> float:
    """The recall score of one hit; negative similarity counts as zero (unrelated, not opposite)."""
    ts = hit.metadata.get("ts")
    return (
        max(0.0, hit.similarity)
        * TIER_WEIGHT[hit.tier]
        * recency_decay(hit.tier, ts if isinstance(ts, int | float) else None, now)
        * outcome_factor(hit.tier, hit.metadata)
    )


def rank(hits: Iterable[Hit], now: float) -> list[Recalled]:
    """Score hits and sort best first; an identical text seen twice keeps only its best copy."""
    best: dict[str, Recalled] = {}
    for hit in hits:
        item = Recalled(id=hit.id, tier=hit.tier, text=hit.text, score=score(hit, now),
                        metadata=dict(hit.metadata))
        key = hit.text.strip()
        if key not in best or item.score > best[key].score:
            best[key] = item
    return sorted(best.values(), key=lambda r: (-r.score, r.id))


def estimate_tokens(text: str) -> int:
    """A cheap token estimate: about four characters per token plus framing."""
    return len(text) // 4 + 8


def pack(ranked: Iterable[Recalled], budget_tokens: int, k: int) -> list[Recalled]:
    """Keep the best items that fit the budget, at most k; an item too big is skipped, not cut."""
    kept: list[Recalled] = []
    left = budget_tokens
    for item in ranked:
        if len(kept) >= k:
            break
        cost = estimate_tokens(item.text)
        if cost <= left:
            kept.append(item)
            left -= cost
    return kept
