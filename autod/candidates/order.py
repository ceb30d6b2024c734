"""The order of a cycle's first draws: the likeliest fix per second of model time first, odds updated
after every miss (Blackwell's rule for a search with repeated looks).

The bug is in one place: one of the suspects (each asked about alone), one of the value groups, or
somewhere only the wide prompt shows. Each draw is a look at some of those places: it finds the bug
there with some probability (its detection) and costs model time. Blackwell's rule looks next where
odds x detection / cost is highest, and after a look that missed lowers the odds of what it looked at
by Bayes (a place looked at and not fixed is a little less likely to hold the bug). Every draw before
the fix missed (the search stops at a fix), so the whole order is known before the first draw.

- **Odds** (`RANK_PRIOR`, `TAIL_PRIOR`, `VALUE_PRIOR`): how often localization's kth suspect was the
  buggy definition on the dev half of the real-library corpus (bench/bench_corpus.py `--focus-k 10`,
  44 bugs in six libraries: rank 1 in 24, 2 in 6, 3 in 3, ranks 4 to 10 in 7 together, none in 4,
  with the frames ordered by their coverage, autod.localize.rank.FRAME_WEIGHT);
  the value groups held the bug in 2 of them. The held-out half was not looked at.
- **Detection** (`GREEDY`, `SAMPLED`, `VALUE`, `WIDE`): the oracle handed the model the buggy
  definition alone on the old six libraries' 46 bugs; its first reply (temperature 0) fixed 7 (15 %),
  its 2nd to 4th (sampled) 6 of the 39 left (~5 % a draw). A value group's question has one number,
  flag or text to change: the value-group draws asked where the bug was in the value (pyflakes-07 on
  the old six, constant_in_other_module on the dev bench) fixed it 2 of 2 times, (2 + 1) / (2 + 2) by
  Laplace's rule. The
  wide prompt's draws that showed the buggy definition fixed 1 bug in 60: 22 draws on the held-out
  libraries (docs/PERFORMANCE.md), 38 on the old six's bugs the oracle fixes, before the focused
  view (docs/lab/performance-history.md).
  `WIDE_SHOWN`: how often the wide prompt holds the buggy definition at all (held-out: 44 of 48).
- **Cost**, in generated tokens' time: the reply (what a suspect's draw generates of its definition,
  echo or fix: from the end of its head, which the server is given, to where the early stop ends it,
  or its two legs for a long one, `Sizes.written`, autod.candidates.fits; a value's assignment; a wide
  reply, which writes back the definition it changes: the odds-weighted length of the places it may
  be) plus the prompt's own part read when the server last read another
  prompt (a server that keeps the prompt it last read serves the rest from its cache), plus a fixed
  part per request. A prompt token costs `Sizes.read_per_generated` of a generated one: the server's
  own ratio as its streamed replies measured it (autod.planner.pace), and until they have,
  `READ_PER_GENERATED` (generation is ~9x slower than prompt reading with llama.cpp on a CPU).

A sampled draw that proposes nothing new (the code given back, a change already tried) looked at
nothing: the odds stay as they were, so the plan's next draw is that one again, and the search draws
it again in place (autod.candidates.search, at most as many such as the prompt has draws). A sampled
look therefore costs its draw / (1 - echo), `echo` the share of the suspect's sampled draws that give
the code back. That share follows the suspect's greedy draw (`ECHO_AFTER_ECHO`, `ECHO_AFTER_CHANGE`):
a model that read the question as "copy this" at temperature 0 mostly does so again when sampled.
Before the greedy draw is seen the plan prices the mix (`GREEDY_ECHO`); once it is, the search plans
the rest again (`replan`), so a long suspect that echoed has its samples priced as what they are.
From then on the share is the suspect's own, learnt as its samples come: every sampled draw that
proposed nothing new (`idle`) moves it by Laplace's rule from that prior (which counts as
`ECHO_WEIGHT` draws), and the search plans the rest again after each such draw, so a suspect whose
samples keep giving back what was already tried is left for the next place once it has cost more
than that place is worth.

So a short suspect of low rank is asked before a long one's samples, and a long suspect whose greedy
reply missed gets its samples only while they beat the wide prompt: the attempt's draws end with the
wide prompt's, and the focused draws still worth less then are not made. Unknown sizes (a drawer that
does not tell them) keep the fixed order: every suspect's first draw in rank order, the value groups,
then each suspect's samples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["RANK_PRIOR", "Sizes", "cost", "draw_tokens", "fixed_order", "plan", "prior", "ratio_of", "replan"]

RANK_PRIOR = (24 / 44, 6 / 44, 3 / 44)  # P(the kth suspect is the buggy definition), corpus dev half
TAIL_PRIOR = 7 / 44 / 7  # each of ranks 4 to 10 (7 of the 44 bugs among them)
TAIL_RANKS = 10  # past this rank, nothing measured: the wide prompt's odds
VALUE_PRIOR = 2 / 44 / 2  # each value group (2 of 44 bugs, ~2 groups a failure)
GREEDY = 0.15  # P(a suspect's first draw, at temperature 0, fixes the bug in it)
SAMPLED = 0.05  # P(a sampled draw fixes it, after the draws before it missed)
VALUE = 0.75  # P(a value group's one draw fixes a bug in its values)
WIDE = 1 / 60  # P(a wide draw fixes a bug the wide prompt shows)
WIDE_SHOWN = 0.9  # P(the wide prompt shows the buggy definition)
WIDE_REPLY = 300  # a wide reply's tokens when the bug is in none of the suspects: a definition, whole
READ_PER_GENERATED = 1 / 9  # a prompt token's time in generated tokens' (llama.cpp on a CPU)
REQUEST_TOKENS = 30  # a request's own cost in generated tokens: the reply's fence lines, its set-up
# The share of a suspect's later draws that propose nothing new (each drawn again: no look), by what
# its greedy draw did, and how often a greedy draw gives the code back: the first bug of each library
# of the corpus's dev half, 6-minute cycles (bench/reallib_draws.py; docs/PERFORMANCE.md): 22 of 39
# greedy draws gave the code back; after those, 20 of 36 draws proposed nothing new, after a greedy
# draw that changed something 17 of 45 (by Laplace's rule). The held-out half was not looked at.
GREEDY_ECHO = 0.56
ECHO_AFTER_ECHO = 0.55
ECHO_AFTER_CHANGE = 0.38
MAX_ECHO = 0.9  # a share no larger: a look is never priced past ten draws
ECHO_WEIGHT = 2  # the prior share counts as this many draws: a suspect's own outweigh it from the third
Done = tuple[str, bool | None]  # a draw made: its view, and whether it gave the code back (None: unknown)


def prior(rank: int) -> float:
    """P(the suspect of rank `rank`, from 1, is the buggy definition)."""
    if 1 <= rank <= len(RANK_PRIOR):
        return RANK_PRIOR[rank - 1]
    return TAIL_PRIOR if rank <= TAIL_RANKS else 0.0


def ratio_of(drawer: object) -> float:
    """The reading ratio of the server behind `drawer` as its replies measured it (its
    `read_per_generated`, autod.planner.pace), or `READ_PER_GENERATED` until they have."""
    measured = getattr(drawer, "read_per_generated", None)
    return measured if isinstance(measured, float) else READ_PER_GENERATED


def cost(code_tokens: int, read_tokens: int) -> float:
    """A suspect's draw in generated tokens' time: its definition written back, its prompt's own part
    (the definition and the values it reads) read."""
    return REQUEST_TOKENS + code_tokens + read_tokens * READ_PER_GENERATED


@dataclass(frozen=True)
class Sizes:
    """What the draws of a cycle's first attempt would cost, in tokens (the drawer's estimates)."""

    suspects: Sequence[tuple[int, int]]  # per suspect: (its definition, its prompt's own part)
    values: Sequence[int]  # per value group: its values' tokens (the reply and the prompt's own part)
    wide: int  # the wide prompt's tokens
    # a prompt token's time in generated tokens' time: the server's, measured (autod.planner.pace)
    read_per_generated: float = READ_PER_GENERATED
    # per suspect: what a draw of it generates, where the drawer knows (its head given, the early stop,
    # two legs: autod.candidates.fits.written_tokens); missing: the definition, whole
    written: Sequence[int] = ()

    def writes(self, k: int) -> int:
        """The tokens a draw of the kth suspect (from 1) generates: `written`'s, never more than the
        definition's."""
        code = self.suspects[k - 1][0]
        return min(code, self.written[k - 1]) if k <= len(self.written) else code


@dataclass
class _Place:
    view: str
    odds: float
    reply: int  # tokens of what a draw writes back: its definition (a wide reply writes it whole)
    read: int  # tokens of its prompt's own part
    looks: int  # draws it may still get
    per_read: float = READ_PER_GENERATED  # a prompt token's time in generated tokens'
    written: int | None = None  # tokens a draw of it generates (None: `reply`, all of it)
    done: int = 0
    echo: float = GREEDY_ECHO * ECHO_AFTER_ECHO + (1 - GREEDY_ECHO) * ECHO_AFTER_CHANGE
    idle: int = 0  # its sampled draws made that proposed nothing new (each drawn again: no look)
    sampled: int = 0  # its sampled draws made that were looks
    counted: bool = False  # whether `idle` was counted (else the prior share stands)

    def share(self) -> float:
        """The share of its sampled draws that propose nothing new: the prior `echo` (weighed as
        `ECHO_WEIGHT` draws) with its sampled draws made so far, when counted (a planned one tells
        nothing)."""
        if not self.counted:
            return self.echo
        return (self.echo * ECHO_WEIGHT + self.idle) / (ECHO_WEIGHT + self.idle + self.sampled)

    def detection(self) -> float:
        if self.view.startswith("value:"):
            return VALUE
        return GREEDY if self.done == 0 else SAMPLED

    def draw_cost(self, last: str) -> float:
        """A look here, in generated tokens' time: its prompt's own part unless the server read it last;
        a sampled look, the draws that give the code back (redrawn) included."""
        made = self.reply if self.written is None else self.written
        c = REQUEST_TOKENS + made + (0 if last == self.view else self.read * self.per_read)
        if self.done == 0 or self.view.startswith("value:"):
            return c
        return c / (1 - min(self.share(), MAX_ECHO))

    def looked(self, echoed: bool | None) -> None:
        """A look here missed; `echoed`: whether it gave the code back (a greedy draw's tells the rest)."""
        if self.done == 0 and echoed is not None:
            self.echo = ECHO_AFTER_ECHO if echoed else ECHO_AFTER_CHANGE
        self.odds *= 1 - self.detection()
        self.done += 1


def plan(sizes: Sizes, per: int, wide_n: int) -> list[tuple[str, bool]]:
    """(view, at temperature 0) of the first attempt's draws, in order: suspects ("focused:K", at most
    `per` draws each, the first greedy), value groups ("value:J", once, greedy) and the wide prompt's
    `wide_n` draws (the first greedy), each next draw the one of highest odds x detection / cost given
    that every draw before it missed. Ends with the wide prompt's last draw: a focused draw that would
    come after it is not made."""
    return replan(sizes, per, wide_n, ())


def replan(sizes: Sizes, per: int, wide_n: int, done: Sequence[Done],
           idle: Mapping[str, int] | None = None) -> list[tuple[str, bool]]:
    """The rest of `plan` after the draws `done` (each missed; a suspect's pointed question,
    "pointed:K", is a sampled look at it), knowing which of them gave the code back, and `idle`: per
    view, its sampled draws that proposed nothing new (None: not counted; each suspect's share is then
    the prior's). With nothing learnt from them it is the plan's own rest."""
    per_read = sizes.read_per_generated
    places = [_Place(f"focused:{k}", prior(k), code, read, per, per_read, sizes.writes(k))
              for k, (code, read) in enumerate(sizes.suspects, 1) if per > 0]
    places += [_Place(f"value:{j}", VALUE_PRIOR, tokens, tokens, 1, per_read)
               for j, tokens in enumerate(sizes.values, 1) if per > 0]
    # the bug somewhere no focused prompt shows: only the wide prompt can find it
    elsewhere = max(0.0, 1.0 - sum(p.odds for p in places))
    wide_done, last = 0, ""
    by_view = {p.view: p for p in places}
    for p in places if idle is not None else ():
        p.counted = True
    for view, count in (idle or {}).items():
        if (p := by_view.get(view.replace("pointed:", "focused:", 1))) is not None:
            p.idle += count
    for view, echoed in done:
        if view == "wide":
            wide_done += 1
            elsewhere *= 1 - WIDE * WIDE_SHOWN
            for p in places:
                p.odds *= 1 - WIDE
        elif (p := by_view.get(view.replace("pointed:", "focused:", 1))) is not None and p.done < p.looks:
            p.sampled += p.done > 0
            p.looked(echoed)
        last = view.replace("pointed:", "focused:", 1)
    out: list[tuple[str, bool]] = []
    while wide_done < wide_n:
        seen = elsewhere * WIDE_SHOWN + sum(p.odds for p in places)
        # a wide reply writes back the definition it changes: the odds-weighted length of where the bug is
        mass = elsewhere + sum(p.odds for p in places)
        weighted = elsewhere * WIDE_REPLY + sum(p.odds * p.reply for p in places)
        reply = weighted / mass if mass else WIDE_REPLY
        wide_cost = REQUEST_TOKENS + reply + (0 if last == "wide" else sizes.wide * per_read)
        best, best_value = None, seen * WIDE / wide_cost
        for p in places:
            if p.done >= p.looks:
                continue
            value = p.odds * p.detection() / p.draw_cost(last)
            if value > best_value:
                best, best_value = p, value
        if best is None:  # the wide prompt: it looks at every place, and at what no focused prompt shows
            out.append(("wide", wide_done == 0))
            wide_done += 1
            elsewhere *= 1 - WIDE * WIDE_SHOWN
            for p in places:
                p.odds *= 1 - WIDE
            last = "wide"
            continue
        out.append((best.view, best.done == 0))
        best.looked(None)
        last = best.view
    return out


def draw_tokens(sizes: Sizes, view: str, last: str) -> float | None:
    """One draw of `view` in generated tokens' time, as the plan prices a look there but without the
    redraws a sampled look may bring: its reply, its prompt's own part unless the server read `view`
    last (a suspect's pointed question shares its prompt), a request's own part. None: a view the
    sizes do not cover."""
    kind, _, number = view.partition(":")
    same = last.replace("pointed:", "focused:", 1) == view.replace("pointed:", "focused:", 1)
    if kind == "wide":
        reply, read = WIDE_REPLY, sizes.wide
    elif kind in ("focused", "pointed", "value") and number.isdigit():
        k, table = int(number), sizes.values if kind == "value" else sizes.suspects
        if not 1 <= k <= len(table):
            return None
        size = table[k - 1]
        reply, read = (size, size) if isinstance(size, int) else (sizes.writes(k), size[1])
    else:
        return None
    return REQUEST_TOKENS + reply + (0 if same else read * sizes.read_per_generated)


def fixed_order(suspects: int, values: int, per: int, wide_n: int) -> list[tuple[str, bool]]:
    """The order when the draws' sizes are not known: every suspect's first draw in rank order, each
    value group once, each suspect's sampled draws, the wide prompt's."""
    out = [(f"focused:{k}", True) for k in range(1, suspects + 1)] if per else []
    out += [(f"value:{j}", True) for j in range(1, values + 1)]
    for k in range(1, suspects + 1) if per else ():
        out += [(f"focused:{k}", False)] * (per - 1)
    return out + [("wide", i == 0) for i in range(wide_n)]
