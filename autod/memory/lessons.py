"""Lessons (N2): merging a new lesson into a near-duplicate, and marking lessons used.

A lesson keeps its sign (``polarity``: ``success`` or ``failure``): a failure or an operator's
rejection never merges into a success lesson, nor the reverse, so "this fixed it" is never
overwritten by "do not propose this again". A daemon merges into, and marks, only its own
lessons; a lesson written before polarity existed has none and is never merged into. Each merge
records the spool id of the write (``last_write``) so a write replayed after a timeout that had
in fact landed is not counted twice. These run on the memory thread.
"""

from __future__ import annotations

from typing import Any

from autod.memory import Embedder
from autod.memory.identity import Identity
from autod.memory.recall import similarity_from_distance
from autod.memory.spool import Spool

DEDUPE_SIMILARITY = 0.92
CANDIDATES = 20  # nearest lessons looked at for a merge
SUCCESS, FAILURE = "success", "failure"


def add_lesson(col: Any, embedder: Embedder, who: Identity, own: dict[str, Any] | None, *, item_id: str,
               text: str, meta: dict[str, Any], success: bool, now: float, spool: Spool | None) -> str:
    """Store a lesson under item_id, or merge it into a near-duplicate of the same sign; returns its id."""
    if col.get(ids=[item_id], include=[])["ids"]:
        return item_id  # a replay of a lesson that was stored
    polarity = SUCCESS if success else FAILURE
    vector = embedder.embed([text])[0]
    meta = {**meta, **who.stamp(), "ts": now, "last_used": now, "polarity": polarity}
    match = _near_duplicate(col, vector, meta.get("fingerprint"), {**(own or {}), "polarity": polarity})
    if match is not None:
        lesson_id, old = match
        if old.get("last_write") == item_id:
            return lesson_id  # a replay of a merge that landed
        merged = {**old, **meta, "last_write": item_id}
        merged["uses"] = int(old.get("uses", 0)) + 1
        merged["successes"] = int(old.get("successes", 0)) + int(success)
        col.update(ids=[lesson_id], embeddings=[vector], documents=[text], metadatas=[merged])
        return lesson_id
    meta.update(uses=1, successes=int(success), last_write=item_id)
    col.add(ids=[item_id], embeddings=[vector], documents=[text], metadatas=[meta])
    if spool is not None:
        spool.tally_added("n2", 1, now, now)
    return item_id


def _near_duplicate(col: Any, vector: list[float], fingerprint: Any, must: dict[str, Any]
                    ) -> tuple[str, dict[str, Any]] | None:
    if col.count() == 0:
        return None
    # The nearest few of everyone's lessons, then ours of the same sign among them: a where filter
    # would cost chromadb a scan of the whole shared collection on every lesson.
    res = col.query(query_embeddings=[vector], n_results=CANDIDATES, include=["metadatas", "distances"])
    close = [
        (i, m or {}, similarity_from_distance(d))
        for i, m, d in zip(res["ids"][0], res["metadatas"][0], res["distances"][0], strict=True)
        if similarity_from_distance(d) >= DEDUPE_SIMILARITY and _matches(m or {}, must)
    ]
    if not close:
        return None
    # Same fingerprint first (the same failure), then the closest text.
    same = fingerprint is not None
    best = max(close, key=lambda c: (same and c[1].get("fingerprint") == fingerprint, c[2]))
    return best[0], dict(best[1])


def _matches(meta: dict[str, Any], must: dict[str, Any]) -> bool:
    return all(meta.get(k) == v for k, v in must.items())


def mark_used(col: Any, who: Identity, *, shared: bool, used: dict[str, float]) -> None:
    """Set last_used on this daemon's lessons; one pruned meanwhile (or another's) is left alone."""
    res = col.get(ids=list(used), include=["metadatas"])
    ids = [i for i, m in zip(res["ids"], res["metadatas"], strict=True)
           if not shared or (m or {}).get("instance") == who.instance]
    if ids:
        col.update(ids=ids, metadatas=[{"last_used": used[i]} for i in ids])
