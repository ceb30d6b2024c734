"""Recall scoring and packing: pure functions over query hits from the three tiers.

score = similarity x tier weight x recency decay x outcome factor, then the best items are
packed into a token budget. Lessons (N2) never decay: a lesson is as true in a year as today.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from autod.linebreaks import lines_of
from autod.localize.excerpt import strip_progress
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


# How the episode and lesson texts of a failed cycle read (autod.cycle.reflect; older autods stored them).
FAILED_OUTCOMES = ("Outcome: the cycle failed", "Outcome: failed")


def is_experience(hit: Hit) -> bool:
    """Whether an episode or lesson tells something about the code. A cycle that failed (the LLM
    unreachable, a budget spent, a stop) tried nothing; autod no longer stores such items, and those an
    older autod stored are not recalled (they taught small models that "ConnectError" is the outcome)."""
    if hit.tier is Tier.N0:
        return True
    if hit.metadata.get("status") == "failed" or hit.metadata.get("external"):
        return False
    return not any(mark in hit.text for mark in FAILED_OUTCOMES)


def rank(hits: Iterable[Hit], now: float, *, min_similarity: float = 0.0) -> list[Recalled]:
    """Score hits and sort best first, leaving out those below the similarity floor and what is not
    experience (`is_experience`).

    Texts equal once test-runner noise is stripped (the same pytest output at another time) keep
    only their best copy.
    """
    best: dict[str, Recalled] = {}
    for hit in hits:
        if hit.similarity < min_similarity or not is_experience(hit):
            continue
        item = Recalled(id=hit.id, tier=hit.tier, text=hit.text, score=score(hit, now),
                        metadata=dict(hit.metadata))
        key = strip_progress(hit.text)
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


# -- rendering for a prompt ------------------------------------------------------------------------

LABELS = {Tier.N0: "seen before", Tier.N1: "earlier attempt", Tier.N2: "lesson"}
MIN_NEW_CHARS = 24  # an item that adds less than this beyond what the prompt shows is left out


def episode_text(raw: str) -> str:
    """An episode as plain sentences; older episodes were stored as JSON, whose shape a model copies."""
    try:
        doc = json.loads(raw)
    except ValueError:
        return raw
    if not isinstance(doc, dict) or "status" not in doc:
        return raw
    files = ", ".join(
        f"{e.get('path')} (+{e.get('added', 0)} -{e.get('removed', 0)})"
        for e in doc.get("edits") or []
        if isinstance(e, dict)
    )
    parts = [f"Failure: {str(doc.get('event') or '').strip()[:300]}."]
    if doc.get("plan"):
        parts.append(f"Tried: {str(doc['plan']).strip()[:300]}.")
    if files:
        parts.append(f"Changed {files}.")
    outcome = f"Outcome: {doc.get('status')}"
    if doc.get("reason"):
        outcome += f" ({str(doc['reason'])[:200]})"
    parts.append(outcome + ".")
    return " ".join(parts)


def _norm(line: str) -> str:
    return " ".join(line.split())


def render_recalled(
    recalled: Iterable[Recalled], *, shown: str = "", budget_tokens: int | None = None
) -> str:
    """Recalled items as `- (label) text` lines within the budget.

    Noise is stripped, lines the prompt already shows (or an earlier item showed) are left out, and
    an item that adds nothing is dropped.
    """
    seen = {_norm(x) for x in lines_of(strip_progress(shown)) if _norm(x)}
    out: list[str] = []
    left = budget_tokens if budget_tokens is not None else 10**9
    for r in recalled:
        text = episode_text(r.text) if r.tier is Tier.N1 else r.text
        fresh = []
        for line in lines_of(strip_progress(text)):
            key = _norm(line)
            if key and key not in seen:
                seen.add(key)
                fresh.append(line.rstrip())
        body = "\n  ".join(fresh)
        if len(body) < MIN_NEW_CHARS:
            continue
        item = f"- ({LABELS.get(r.tier, str(r.tier))}) {body}"
        cost = estimate_tokens(item)
        if cost > left:
            continue
        out.append(item)
        left -= cost
    return "\n".join(out)


BRIEF_CHARS = 300  # one recalled item's line in a focused prompt, at most
MODE_TAG = re.compile(r"^\[[a-z-]+\] ")  # "[auto-debug] " at the head of a lesson


def brief_line(r: Recalled) -> str:
    """One recalled episode or lesson as a line: what failed, what was changed, whether it held.
    An observation (N0: raw failure output seen before) tells nothing a focused prompt lacks: ""."""
    if r.tier is Tier.N0:
        return ""
    text = episode_text(r.text) if r.tier is Tier.N1 else r.text
    first = MODE_TAG.sub("", _norm(strip_progress(text).split("\n", 1)[0]))  # the prompt's mode's own
    if len(first) > BRIEF_CHARS:
        first = first[: BRIEF_CHARS - 3] + "..."
    failed = r.metadata.get("polarity") == "failure" or "did NOT work" in first
    return f"- ({'did not work' if failed else LABELS[r.tier]}) {first}" if first else ""


def render_brief(recalled: Iterable[Recalled], *, budget_tokens: int) -> str:
    """Recalled items for a prompt that shows one definition: a short line each, within the budget,
    no line twice (the same failure fixed twice reads once)."""
    out: list[str] = []
    left = budget_tokens
    for r in recalled:
        line = brief_line(r)
        cost = estimate_tokens(line)
        if not line or line in out or cost > left:
            continue
        out.append(line)
        left -= cost
    return "\n".join(out)


REPLAY_KEY = "replay"  # an episode's or lesson's metadata: what its kept fix changed (candidates.replay)


def fixed_definitions(recalled: Iterable[Recalled]) -> dict[tuple[str, str], float]:
    """(path, qualname) -> how strongly recalled (the best item's score, at most 1) of each definition
    a remembered fix that held changed; a malformed record is skipped (memory is untrusted)."""
    out: dict[tuple[str, str], float] = {}
    for r in recalled:
        if r.tier is Tier.N0 or r.metadata.get("status") not in ("fixed", "improved"):
            continue
        try:
            doc = json.loads(str(r.metadata.get(REPLAY_KEY) or "null"))
        except ValueError:
            continue
        defs = doc.get("definitions") if isinstance(doc, dict) else None
        for d in defs if isinstance(defs, list) else []:
            if isinstance(d, dict) and isinstance(d.get("path"), str) and isinstance(d.get("symbol"), str):
                key = (d["path"], d["symbol"])
                out[key] = max(out.get(key, 0.0), min(1.0, max(0.0, float(r.score))))
    return out
