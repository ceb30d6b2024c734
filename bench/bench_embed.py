"""Embedding throughput on the observe path: length-sorted batches against today's padding, same run.

The corpus is what the cycle observes (``kind: summary`` plus up to 2,000 characters of excerpt):
mostly short file-change notes, some check failures with pytest output, a few long tracebacks.
It is embedded in writes of 64 (the memory writer's batch) by three embedders that differ only in
padding, interleaved round by round so a busy machine slows them alike:

- ``fixed``: every text padded to 256 tokens (what the shipped tokenizer.json asks for);
- ``batch``: batches of 32 in arrival order, each padded to its longest (autod before this change);
- ``sorted``: texts grouped by token length under a token budget, each group padded to its longest.

One text at a time (no padding at all) is the floor for cost per item of short texts. The vectors
of ``sorted`` are compared with ``fixed``'s (cosine; 1.0 is identical).

    python bench/bench_embed.py            # 512 texts, 5 rounds
    python bench/bench_embed.py --quick    # 128 texts, 2 rounds
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autod.memory.embed import LocalEmbedder

WRITE = 64  # the memory writer's batch
WORDS = ["error", "failed", "test", "import", "module", "config", "build", "timeout", "assert", "KeyError",
         "TypeError", "None", "missing", "file", "path", "parser", "loader", "cache", "retry", "socket"]


def corpus(n: int, seed: int = 5) -> list[str]:
    """Observation texts as cycle.observe writes them, in a realistic mix of lengths."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        r = rng.random()
        if r < 0.6:
            paths = ", ".join(f"src/pkg/mod_{rng.randint(1, 40)}.py" for _ in range(rng.randint(1, 4)))
            out.append(f"files_changed: {rng.randint(1, 4)} files changed: {paths}\n")
        elif r < 0.9:
            lines = [f"FAILED tests/test_{rng.choice(WORDS)}.py::test_{i} - {rng.choice(WORDS)}Error: "
                     + " ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(rng.randint(2, 8))]
            out.append("check_failed: check tests failed (exit 1)\n" + "\n".join(lines)[:2000])
        else:
            frames = [
                f'  File "src/pkg/mod_{rng.randint(1, 40)}.py", line {rng.randint(1, 900)}, in '
                f"{rng.choice(WORDS)}\n    {' '.join(rng.choice(WORDS) for _ in range(8))}"
                for _ in range(30)
            ]
            out.append("build_failed: Traceback (most recent call last):\n" + "\n".join(frames)[:2000])
    return out


def rate(embedder: LocalEmbedder, texts: list[str]) -> float:
    start = time.perf_counter()
    for off in range(0, len(texts), WRITE):
        embedder.embed(texts[off : off + WRITE])
    return len(texts) / (time.perf_counter() - start)


def main(quick: bool) -> dict[str, Any]:
    texts = corpus(128 if quick else 512)
    rounds = 2 if quick else 5
    modes = {m: LocalEmbedder(padding=m) for m in ("fixed", "batch", "sorted")}  # type: ignore[arg-type]
    for e in modes.values():
        e.load()
        e.embed(texts[:4])  # warm the session
    rates: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(rounds):
        for name, e in modes.items():
            rates[name].append(rate(e, texts))
    start = time.perf_counter()
    for t in texts:
        modes["sorted"].embed([t])
    one_by_one = len(texts) / (time.perf_counter() - start)
    a = np.array(modes["sorted"].embed(texts))
    b = np.array(modes["fixed"].embed(texts))
    cosine = (a * b).sum(axis=1)
    tokens = [len(modes["sorted"]._tokenizer.encode(t).ids) for t in texts]
    med = {m: statistics.median(r) for m, r in rates.items()}
    return {
        "benchmark": "embed",
        "profile": "quick" if quick else "full",
        "python": platform.python_version(),
        "texts": len(texts),
        "tokens_p50_p95_max": [int(np.percentile(tokens, 50)), int(np.percentile(tokens, 95)), max(tokens)],
        "rounds": rounds,
        "items_per_s": {m: round(v, 1) for m, v in med.items()},
        "one_by_one_items_per_s": round(one_by_one, 1),
        "sorted_over_batch": round(med["sorted"] / med["batch"], 2),
        "sorted_over_fixed": round(med["sorted"] / med["fixed"], 2),
        "cosine_sorted_vs_fixed_min": round(float(cosine.min()), 6),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small profile")
    args = parser.parse_args()
    print(json.dumps(main(args.quick), indent=2))
