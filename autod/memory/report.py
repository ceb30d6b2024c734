"""Human and JSON renderings of memory stats and hits, shared by the CLI and the control socket."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from autod.memory import Recalled


def hits_to_json(hits: list[Recalled]) -> list[dict[str, Any]]:
    """Hits as JSON-able dicts."""
    return [
        {"id": h.id, "tier": h.tier.value, "score": round(h.score, 4), "text": h.text, "metadata": h.metadata}
        for h in hits
    ]


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _size(n: int | None) -> str:
    if n is None:
        return "n/a (server)"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # unreachable; keeps type checkers content


def _count(n: int | None) -> str:
    return "-" if n is None else str(n)


def format_stats(stats: dict[str, Any]) -> str:
    """A small table: one row per tier, then the store, its health, the spool and disk use."""
    lines = [f"{'tier':<5} {'collection':<12} {'count':>8} {'own':>8} {'spooled':>8} {'dropped':>8}  "
             f"{'oldest':<20}  {'newest':<20}"]
    for name, t in stats["tiers"].items():
        oldest, newest = _when(t["oldest_ts"]), _when(t["newest_ts"])
        lines.append(
            f"{name:<5} {t['collection']:<12} {_count(t['count']):>8} {_count(t.get('own')):>8} "
            f"{t.get('spooled', 0):>8} {t.get('dropped', 0):>8}  {oldest:<20}  {newest:<20}"
        )
    store = f"store: {stats['mode']} at {stats.get('location', '-')}"
    if stats.get("instance"):
        store += f" (this daemon: instance {stats['instance']})"
    lines.append(store)
    if stats.get("memory"):
        lines.append(f"memory: {stats['memory']}")
    dropped = stats.get("dropped")
    if isinstance(dropped, dict) and dropped.get("used"):
        lines.append(f"lesson-use marks dropped: {dropped['used']}")
    lines.append(f"disk: {_size(stats['disk_bytes'])}")
    return "\n".join(lines)


def format_hits(hits: list[Recalled], *, width: int = 100) -> str:
    """One block per hit: score, tier, id and the first line(s) of its text."""
    if not hits:
        return "no matches"
    out = []
    for h in hits:
        meta = h.metadata
        extra = []
        if meta.get("kind"):
            extra.append(str(meta["kind"]))
        if meta.get("status"):
            extra.append(str(meta["status"]))
        if h.tier.value == "n2":
            extra.append(f"{meta.get('successes', 0)}/{meta.get('uses', 0)} successes")
        ts = meta.get("ts")
        head = f"{h.score:.3f}  {h.tier.value}  {h.id}  {_when(ts if isinstance(ts, int | float) else None)}"
        if extra:
            head += "  " + ", ".join(extra)
        text = " ".join(h.text.split())
        if len(text) > width:
            text = text[: width - 1] + "…"
        out.append(f"{head}\n    {text}")
    return "\n".join(out)
