"""What the model's time went on, per library and in all: the echo share of generated tokens, and
autod's time to fix against the oracle's model time on the same bugs and server (bench_reallib --llm).

- echo share: of the tokens the model generated for autod's draws (each candidate's `reply_tokens`),
  those of replies that gave the definition back as it was (`echo`); `ended` counts the replies autod
  ended early (autod.planner.earlystop) and the tokens they were stopped at; `echo_model_share` the
  echoes' share of the draws' model time (reading the prompt included: on a CPU most of a short
  reply's time).
- time to fix: autod's wall time of `autod run --once` on a bug it fixed; the oracle's is the model
  time of its replies up to the one that fixed (its checks not counted: a floor autod cannot beat).
  Beside it, like for like: autod's model time against the oracle's (`model_over_oracle`), and the
  cycle's own time, from the failure's event to the verified fix (no start-up, no first check run),
  against the oracle's replies and the checks of their fixes (`cycle_over_oracle_wall`).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

__all__ = ["reply_figures"]


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, round(q * (len(xs) - 1)))], 1)


def _share(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    cands = [c for r in rows for c in r.get("candidates") or [] if c.get("view") != "replay"]
    generated = sum(int(c.get("reply_tokens") or 0) for c in cands)
    echo = sum(int(c.get("reply_tokens") or 0) for c in cands if c.get("echo"))
    ended = [c for c in cands if c.get("ended")]
    model_s = sum(int(c.get("model_ms") or 0) for c in cands) / 1000
    echo_s = sum(int(c.get("model_ms") or 0) for c in cands if c.get("echo")) / 1000
    return {"draws": len(cands), "reply_tokens": generated, "echo_tokens": echo,
            "echo_share": round(echo / generated, 3) if generated else None,
            "echoes": sum(1 for c in cands if c.get("echo")), "ended_early": len(ended),
            "ended_tokens": sum(int(c.get("reply_tokens") or 0) for c in ended),
            "model_s": round(model_s, 1), "echo_model_share": round(echo_s / model_s, 3) if model_s else None}


def _times(autod: list[dict[str, Any]], oracle: list[dict[str, Any]]) -> dict[str, Any]:
    fixed = [float(r["wall_s"]) for r in autod if r.get("outcome") == "fixed"]
    oracle_s = [sum(int(c.get("model_ms") or 0) for c in r.get("candidates") or []) / 1000
                for r in oracle if r.get("fixed")]
    model = [float(r.get("model_s") or 0) for r in autod if r.get("outcome") == "fixed"]
    cycle = [int((r.get("timing_ms") or {}).get("wall_ms") or 0) / 1000 for r in autod
             if r.get("outcome") == "fixed"]
    oracle_wall = [float(r["wall_s"]) for r in oracle if r.get("fixed")]
    out: dict[str, Any] = {"fixed": len(fixed), "median_s": _pct(fixed, 0.5), "p90_s": _pct(fixed, 0.9),
                           "median_model_s": _median(model), "median_cycle_s": _median(cycle)}
    if oracle:
        out["oracle_fixed"] = len(oracle_s)
        out["oracle_median_model_s"] = _pct(oracle_s, 0.5)
        out["oracle_median_wall_s"] = _median(oracle_wall)
        if fixed and oracle_s:
            out["median_over_oracle"] = round(statistics.median(fixed) / statistics.median(oracle_s), 2)
            out["model_over_oracle"] = round(statistics.median(model) / statistics.median(oracle_s), 2)
            out["cycle_over_oracle_wall"] = round(statistics.median(cycle) / statistics.median(oracle_wall),
                                                  2)
    return out


def _median(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 1) if xs else None


def reply_figures(autod: list[dict[str, Any]], oracle: list[dict[str, Any]],
                  library_of: dict[str, str]) -> dict[str, Any]:
    """{"all": figures, "by_library": {library: figures}}; `library_of` maps a bug id to its library."""
    libs = sorted({library_of.get(r["bug"], "?") for r in [*autod, *oracle]})

    def figures(keep: set[str] | None) -> dict[str, Any]:
        a = [r for r in autod if keep is None or library_of.get(r["bug"], "?") in keep]
        o = [r for r in oracle if keep is None or library_of.get(r["bug"], "?") in keep]
        return {**_share(a), **_times(a, o)}

    return {"all": figures(None), "by_library": {lib: figures({lib}) for lib in libs}}
