"""The rest of a cycle's first attempt planned again from what its draws told (autod.candidates.order).

Two things a draw tells change the plan: a suspect's greedy draw says how its samples will echo (it
gave the code back or changed something), and each sampled draw that proposed nothing new (the code
given back, a change already tried) says how often that suspect's samples do. After either, the plan's
rest is made again from the draws so far; then each suspect whose greedy draw gave its code back gets
its pointed question in place of its next sample (autod.candidates.reask).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import structlog

from autod.candidates import order
from autod.candidates.reask import View, reask

__all__ = ["Planned", "log_plan", "replan_rest"]

log = structlog.get_logger("autod.candidates")

Planned = tuple[order.Sizes, int, int, bool]  # the first plan's sizes, draws a suspect, wide draws, greedy


def replan_rest(planned: Planned, ratio: float, views: list[View], start: int, looked: list[order.Done],
                idle: Mapping[str, int], after: str, echoed: bool | None) -> None:
    """`views[start:]` made again from the draws `looked` (each missed) and the `idle` ones, the server's
    reading priced at `ratio`; logged (`candidates.replan`) when it changed. `after`: the view whose
    draw prompted it; `echoed`: whether that draw gave the code back (None: a sampled draw)."""
    sizes, per, n, first = planned
    sizes = dataclasses.replace(sizes, read_per_generated=ratio)
    rest = order.replan(sizes, per, n, looked, idle)
    before = views[start:]
    views[start:] = [(v, first and greedy) for v, greedy in rest]
    firsts: dict[str, bool | None] = {}
    for v, e in looked:
        firsts.setdefault(v, e)  # a suspect's first draw: its greedy one
    for v, e in firsts.items():
        if e and v.startswith("focused:"):
            reask(views, start - 1, v, True)
    if views[start:] != before:
        log.info("candidates.replan", after=after, echoed=echoed, idle=sum(idle.values()),
                 draws=" ".join(f"{v}{'*' if t else ''}" for v, t in views[start:]),
                 read_per_generated=round(sizes.read_per_generated, 4))


def log_plan(views: list[View], ratio: float, planned: Planned | None) -> None:
    """The first attempt's plan (`candidates.plan`), as a bench fitting the order reads it: its draws
    (`*`: at temperature 0), the server's reading ratio, and what a draw of each suspect was priced to
    write (`writes`, in tokens; None when the sizes were not known)."""
    sizes = planned[0] if planned is not None else None
    writes = " ".join(str(sizes.writes(k)) for k in range(1, len(sizes.suspects) + 1)) if sizes else None
    log.info("candidates.plan", draws=" ".join(f"{v}{'*' if t else ''}" for v, t in views),
             read_per_generated=round(ratio, 4), writes=writes)
