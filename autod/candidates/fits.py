"""No draw starts that the cycle's deadline would cut: the next one that can finish is asked first.

With a bound on a cycle's wall time (`candidates.max_cycle_minutes`, `autod run --once --max-minutes`)
the draw still in flight at the deadline is dropped (autod.candidates.clock). A draw dropped that way
spent the cycle's last minutes on nothing, and it does not stop there: a server cannot be told to stop
reading a prompt (llama.cpp reads it in one go), so it goes on with the abandoned one after the cycle
has ended, and the next cycle, or another client of the same server, waits for it (a 7k-token wide
prompt is two minutes on a CPU).

So before each draw the search prices it in seconds: the order's price of one look there
(autod.candidates.order.draw_tokens: its reply, its prompt's own part unless the server read that
prompt last) times the seconds a reply token takes on this server, measured on its streamed replies
(autod.planner.pace, kept across restarts). A suspect's reply is priced at what will be generated of
it, where the drawer says (`suspect_replies`, `streamed_tokens`): its head (signature, docstring) is
given to it where the server takes the answer's start (autod.planner.prefill), and a streamed reply is
ended once it is past the last line the failing tests ran (autod.planner.earlystop), so a method with a
100-line docstring the failing tests leave early is not priced as if all of it were written back; a
long one asked in two legs (autod.planner.point) is priced at the few lines they write. The order
prices its draws the same way (`written_tokens`, `order.Sizes.written`). A
draw expected to take longer than the time left is passed over for the next one in the plan that is
expected to finish (a short suspect's sample before the wide prompt); when none is, the cycle ends
there, at its deadline's reason, with the server free.

The cycle's first draw always starts: the speed it would be priced at was measured on earlier replies,
maybe on a server since moved to faster hardware, and a draw is what measures it anew. A draw the
seconds of which are not known (no measured speed yet, a plan whose sizes the drawer did not tell)
starts as before; the deadline still cuts it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog

from autod.candidates import order
from autod.candidates.reask import View
from autod.candidates.replans import Planned
from autod.planner import point

__all__ = ["MISSED", "POINTED_LINES", "Seconds", "bring_forward", "expected_ms", "in_time", "pricer",
           "streamed_tokens", "written_tokens"]

log = structlog.get_logger("autod.candidates")

POINTED_LINES = 4  # lines a draw in two legs generates: leg one's, then the named statement and two more
# the share of leg ones that name no line of the definition, whose draw is then asked whole: 3 of the 17
# long definitions' greedy prompts of two held-out runs (bench/point_probe.py --min-lines 24)
MISSED = 3 / 17
Seconds = Callable[[str], float | None]  # a view -> the seconds one draw of it is expected to take


def pricer(planned: Planned | None, drawer: object, last: str) -> Seconds | None:
    """The expected seconds of one draw of each view, the server having read `last`'s prompt last; None
    when they cannot be known: no sizes (a later attempt's plan, a drawer that does not tell them), or
    no speed measured for the server yet."""
    write_s = getattr(drawer, "write_seconds", None)
    if planned is None or not isinstance(write_s, float) or write_s <= 0:
        return None
    sizes = planned[0]
    written = sizes.written or getattr(drawer, "suspect_replies", None) or ()  # what is written of each
    sizes = order.Sizes(sizes.suspects, sizes.values, sizes.wide, order.ratio_of(drawer), written)

    def seconds(view: str) -> float | None:
        tokens = order.draw_tokens(sizes, view, last)
        return None if tokens is None else tokens * write_s

    return seconds


def expected_ms(planned: Planned | None, drawer: object, last: str, view: str) -> int | None:
    """The milliseconds one draw of `view` is expected to take, the server having read `last`'s prompt
    last ("": none this cycle): what each draw's record carries beside its `model_ms`, so the price can
    be calibrated on real runs. None when it cannot be known (`pricer`)."""
    seconds = pricer(planned, drawer, last)
    s = seconds(view) if seconds is not None else None
    return None if s is None else round(s * 1000)


def streamed_tokens(code: str, ran_to: int, chars_per_token: float, given: int = 0) -> int:
    """The tokens of `code` a streamed reply writes before the early stop may end it: its lines after the
    `given` ones (its head, when the server is given the answer's start) through the last one the
    failing tests ran and the one after (`ran_to` lines from its first ran; 0: not known, all)."""
    lines = code.split("\n")
    upto = min(len(lines), ran_to + 1) if ran_to > 0 else len(lines)
    return int(sum(len(ln) + 1 for ln in lines[min(given, upto):upto]) / chars_per_token)


def written_tokens(code: str, ran_to: int, chars_per_token: float, given: int = 0, point_lines: int = 0,
                   missed: float = MISSED, above: int = 0, ratio: float = order.READ_PER_GENERATED) -> int:
    """What a draw of the suspect `code` generates, in generated tokens' time: `streamed_tokens`, or,
    where it is asked in two legs (more than `point_lines` lines to write from its head, 0: never;
    autod.planner.point), the expected price of them: leg one's line, then either (`missed` of the
    time: it named no line of the definition; `MISSED` asked freely, 0 where a grammar holds it to the
    definition's lines, autod.planner.linechoice) the draw asked as before, or leg two's `POINTED_LINES`
    from the named line (the named statement, the line after, a line more; and the `above` lines before
    it where leg two is begun there, `llm.point_above`), its request's own part,
    and the definition read again up to the named line (half of it, expected) at `ratio`: the server's
    reading against its writing (autod.planner.pace), `order.READ_PER_GENERATED` until measured."""
    whole = streamed_tokens(code, ran_to, chars_per_token, given)
    lines = point.span(code, given, ran_to + 1 if ran_to > 0 else 0)
    if point_lines <= 0 or lines <= point_lines:
        return whole
    per_line = len(code) / max(1, len(code.split("\n"))) / chars_per_token
    reread = len(code) / chars_per_token / 2 * ratio
    two = (POINTED_LINES - 1 + above) * per_line + reread
    return int(per_line + order.REQUEST_TOKENS + missed * whole + (1 - missed) * two)


def bring_forward(views: list[View], start: int, seconds: Seconds | None, left_s: float) -> bool:
    """Make `views[start]` the first draw from `start` on that is expected to finish within `left_s`
    seconds (one whose seconds are not known counts as finishing), moving it there. False: none is,
    and the plan is left as it was."""
    if seconds is None or start >= len(views):
        return True
    expected: list[tuple[str, float]] = []
    for i in range(start, len(views)):
        s = seconds(views[i][0])
        if s is None or s <= left_s:
            if i > start:
                views.insert(start, views.pop(i))
                log.info("candidates.brought_forward", view=views[start][0], left_s=round(left_s, 1),
                         passed=" ".join(f"{v}:{round(x)}s" for v, x in dict(expected).items()))
            return True
        expected.append((views[i][0], s))
    log.info("candidates.nothing_fits", left_s=round(left_s, 1),
             expected=" ".join(f"{v}:{round(x)}s" for v, x in dict(expected).items()))
    return False


def in_time(views: list[View], start: int, planned: Planned | None, drawer: object, last: str,
            deadline: float) -> bool:
    """Whether the search may draw `views[start]` before the `deadline` (time.monotonic()): not past
    it, and, after the cycle's first draw (`last`, the view drawn last; "" before), the draw put there
    (`bring_forward`) expected to finish before it."""
    left = deadline - time.monotonic()
    if left <= 0:
        return False
    return not last or bring_forward(views, start, pricer(planned, drawer, last), left)
