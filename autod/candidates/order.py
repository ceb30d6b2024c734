"""The order suspects are asked in: the likeliest fix per second of model time first.

Each suspect's first draw is a search step that finds the bug with some probability and costs model
time. Asking in descending order of probability over cost is the order with the least expected time to
the buggy suspect (Smith's rule for a sequential search); rank order alone pays a long definition's
copy before a short one's even when the short one is nearly as likely.

- The probability is the rank's: how often localization's kth suspect was the buggy definition on the
  dev half of the real-library corpus (bench/bench_corpus.py, `focus_rank`; 44 bugs in six
  libraries: rank 1 in 22, 2 in 7, 3 in 3). The held-out half was not looked at.
- The cost is the suspect's own tokens: its definition generated back (the reply is the whole
  definition, echo or fix) and read in its prompt with the values it reads, at the speeds of a CPU
  server (generation ~9x slower than prompt reading), plus a fixed part for the request. What every
  suspect's prompt shares (the system message and the failure: every focused prompt opens with them,
  autod.modes.debug) is read once, whichever goes first, by a server that keeps the prompt it last
  read, and is left out.

Unknown sizes (a drawer that does not tell them) keep rank order.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["RANK_PRIOR", "draw_order"]

RANK_PRIOR = (0.50, 0.16, 0.07)  # P(the kth suspect is the buggy definition), corpus dev half
TAIL_PRIOR = 0.02  # a rank past the table
READ_PER_GENERATED = 1 / 9  # a prompt token's time in generated tokens' (llama.cpp on a CPU)
REQUEST_TOKENS = 30  # a request's own cost in generated tokens: the reply's fence lines, its set-up


def prior(rank: int) -> float:
    """P(the suspect of rank `rank`, from 1, is the buggy definition)."""
    return RANK_PRIOR[rank - 1] if 1 <= rank <= len(RANK_PRIOR) else TAIL_PRIOR


def cost(code_tokens: int, read_tokens: int) -> float:
    """A suspect's draw in generated tokens' time: its definition written back, its prompt's own part
    (the definition and the values it reads) read."""
    return REQUEST_TOKENS + code_tokens + read_tokens * READ_PER_GENERATED


def draw_order(sizes: Sequence[tuple[int, int]], count: int) -> list[int]:
    """The ranks 1..count in the order to ask them; `sizes[k - 1]`: (the kth suspect's definition tokens,
    the tokens its prompt shows of it and its values). Rank order when `sizes` does not cover them all."""
    ranks = list(range(1, count + 1))
    if len(sizes) < count:
        return ranks
    return sorted(ranks, key=lambda k: (-prior(k) / cost(*sizes[k - 1]), k))
