"""No draw starts that the cycle's deadline would cut (autod.candidates.fits): each draw priced in seconds
at the order's price and the server's measured writing speed; the next one that can finish goes first."""

from __future__ import annotations

import asyncio
import random
import time

from test_candidates import Judge, ViewDrawer, search, whole
from test_draw_order import generated

from autod.candidates import fits, order
from autod.candidates.order import REQUEST_TOKENS, WIDE_REPLY, Sizes, draw_tokens, plan


def test_one_draw_is_priced_as_the_plan_prices_a_first_look_there():
    rng = random.Random(3)
    for _ in range(300):
        sizes = generated(rng)
        last = rng.choice(["", "wide", "focused:1", "value:1", "pointed:2"])
        for k, (code, read) in enumerate(sizes.suspects, 1):
            place = order._Place(f"focused:{k}", 0.1, code, read, 3, sizes.read_per_generated)
            mapped = last.replace("pointed:", "focused:")
            assert draw_tokens(sizes, f"focused:{k}", last) == place.draw_cost(mapped)
            assert draw_tokens(sizes, f"pointed:{k}", last) == draw_tokens(sizes, f"focused:{k}", last)
        for j, tokens in enumerate(sizes.values, 1):
            place = order._Place(f"value:{j}", 0.1, tokens, tokens, 1, sizes.read_per_generated)
            assert draw_tokens(sizes, f"value:{j}", last) == place.draw_cost(last)
        wide = draw_tokens(sizes, "wide", last)
        read = 0 if last == "wide" else sizes.wide * sizes.read_per_generated
        assert wide == REQUEST_TOKENS + WIDE_REPLY + read
        for unknown in (f"focused:{len(sizes.suspects) + 1}", "focused:0", f"value:{len(sizes.values) + 1}",
                        "replay", "focused:x", ""):
            assert draw_tokens(sizes, unknown, last) is None, unknown


def test_the_draw_brought_forward_is_the_first_that_finishes_and_nothing_else_moves():
    rng = random.Random(5)
    stopped = moved = 0
    for _ in range(2000):
        names = [f"focused:{k}" for k in range(1, 6)] + ["value:1", "wide", "pointed:2"]
        views = [(rng.choice(names), rng.random() < 0.5) for _ in range(rng.randint(0, 12))]
        cost = {v: rng.choice([None, rng.uniform(0, 400)]) for v in names}
        start, left = rng.randint(0, len(views)), rng.uniform(0, 300)
        before = list(views)
        ok = fits.bring_forward(views, start, cost.get, left)
        finishes = [i for i in range(start, len(before))
                    if cost[before[i][0]] is None or cost[before[i][0]] <= left]  # type: ignore[operator]
        if not ok:
            stopped += 1
            assert views == before and not finishes and start < len(before)
            continue
        assert sorted(views) == sorted(before) and views[:start] == before[:start]
        if finishes:
            i = finishes[0]
            assert views[start:] == [before[i], *before[start:i], *before[i + 1:]]
            moved += i > start
        else:
            assert views == before and start == len(before)
    assert stopped > 100 and moved > 100
    unpriced = [("wide", True), ("focused:1", False)]
    assert fits.bring_forward(unpriced, 0, None, 0.0) and unpriced == [("wide", True), ("focused:1", False)]


def test_no_seconds_without_a_measured_speed_or_the_plan_s_sizes():
    planned = (Sizes(((40, 40),), (), 900), 2, 1, True)
    drawer = ViewDrawer(suspects=1, sizes=((40, 40),), wide=900)
    assert fits.pricer(planned, drawer, "wide") is None  # no `write_seconds`: nothing measured
    drawer.write_seconds = None  # type: ignore[attr-defined]
    assert fits.pricer(planned, drawer, "wide") is None
    drawer.write_seconds = 0.5  # type: ignore[attr-defined]
    assert fits.pricer(None, drawer, "wide") is None  # a plan whose sizes are not known
    seconds = fits.pricer(planned, drawer, "wide")
    assert seconds is not None
    assert seconds("focused:1") == 0.5 * (REQUEST_TOKENS + 40 + 40 * order.READ_PER_GENERATED)
    drawer.read_per_generated = 0.5  # type: ignore[attr-defined]
    seconds = fits.pricer(planned, drawer, "focused:1")  # the server's ratio, and its cache
    assert seconds is not None and seconds("focused:1") == 0.5 * (REQUEST_TOKENS + 40)
    assert seconds("wide") == 0.5 * (REQUEST_TOKENS + WIDE_REPLY + 900 * 0.5)


def asked_within(tmp_path, left_s: float, write_s: float | None) -> tuple[list[tuple[str, bool]], bool, list]:
    """The draws a first attempt makes with `left_s` seconds to its deadline on a server writing a token
    in `write_s` (None: not measured); every draw misses, and the drawer answers at once."""
    sizes = ((400, 450), (20, 30), (60, 60))
    drawer = ViewDrawer(*[whole(f"return a * {k}") for k in range(40)], suspects=3, values=1, sizes=sizes,
                        value_sizes=(15,), wide=3000)
    drawer.write_seconds = write_s  # type: ignore[attr-defined]
    s = search(tmp_path, drawer, Judge({}), n=2, focused=3)
    s.deadline = time.monotonic() + left_s
    result = asyncio.run(s.attempt(1))
    planned = plan(Sizes(sizes, (15,), 3000), 3, 2)
    asked = [(a.get("view", "wide"), a["temperature"] == 0.0) for a in drawer.asked]
    return asked, result.out_of_time, planned


def test_a_draw_that_would_run_past_the_deadline_is_passed_over_for_one_that_finishes(tmp_path):
    sizes = Sizes(((400, 450), (20, 30), (60, 60)), (15,), 3000)
    asked, out_of_time, planned = asked_within(tmp_path, 200, None)  # the speed not known: as before
    assert asked == planned and not out_of_time
    asked, out_of_time, planned = asked_within(tmp_path, 200, 1.0)  # a token a second, 200 s left
    assert asked[0] == planned[0]  # the cycle's first draw always starts
    last = asked[0][0]
    for view, _ in asked[1:]:  # every later one was expected to finish in the time left
        assert draw_tokens(sizes, view, last) <= 200, (view, last)  # type: ignore[operator]
        last = view
    skipped = [v for v in planned if v not in asked]
    assert ("focused:1", True) in skipped and ("wide", True) in skipped  # 480 s and 663 s: never started
    assert ("focused:2", True) in asked and ("value:1", True) in asked  # short ones still asked
    assert out_of_time  # the cycle ended when nothing left would finish: the deadline's reason
    asked, out_of_time, planned = asked_within(tmp_path, 1.0, 1.0)
    assert asked == planned[:1] and out_of_time  # the first draw, then nothing fits


def test_a_suspect_is_priced_at_what_its_streamed_reply_writes_before_the_early_stop():
    rng = random.Random(9)
    for _ in range(500):
        lines = ["".join(rng.choice("ab ()=:") for _ in range(rng.randint(0, 60)))
                 for _ in range(rng.randint(1, 80))]
        code = "\n".join(lines)
        whole = fits.streamed_tokens(code, 0, 4.0)
        assert whole == int((len(code) + 1) / 4.0)
        last = 0
        for ran_to in range(1, len(lines) + 3):
            got = fits.streamed_tokens(code, ran_to, 4.0)
            upto = min(len(lines), ran_to + 1)  # the lines the failing tests ran, and the one after
            assert got == int(sum(len(x) + 1 for x in lines[:upto]) / 4.0)
            assert last <= got <= whole
            last = got
            given = rng.randint(0, len(lines) + 2)  # its head, given to the reply: never written
            kept = lines[min(given, upto):upto]
            assert fits.streamed_tokens(code, ran_to, 4.0, given) == int(sum(len(x) + 1 for x in kept) / 4.0)


def test_a_long_suspect_the_failing_tests_leave_early_is_not_passed_over_as_if_written_whole(tmp_path):
    planned = (Sizes(((400, 450), (20, 30)), (), 3000), 2, 1, True)
    drawer = ViewDrawer(suspects=2, sizes=((400, 450), (20, 30)), wide=3000)
    drawer.write_seconds = 1.0  # type: ignore[attr-defined]
    whole = fits.pricer(planned, drawer, "wide")
    assert whole is not None and whole("focused:1") == REQUEST_TOKENS + 400 + 450 * order.READ_PER_GENERATED
    drawer.suspect_replies = [40, 20]  # type: ignore[attr-defined]
    streamed = fits.pricer(planned, drawer, "wide")
    assert streamed is not None
    assert streamed("focused:1") == REQUEST_TOKENS + 40 + 450 * order.READ_PER_GENERATED
    assert streamed("pointed:1") == streamed("focused:1") and streamed("wide") == whole("wide")
    views = [("focused:1", True), ("focused:2", True)]
    assert fits.bring_forward(views, 0, whole, 200.0) and views[0][0] == "focused:2"  # 480 s: passed over
    views = [("focused:1", True), ("focused:2", True)]
    assert fits.bring_forward(views, 0, streamed, 200.0) and views[0][0] == "focused:1"  # 120 s: it fits


def test_every_draw_s_record_says_what_it_was_expected_to_take_beside_what_it_took(tmp_path):
    """For a bench to calibrate the price: each drawn candidate's record carries `expected_ms`, the
    draw's price with the server having read the previous draw's prompt last; none without a measured
    speed, and none on a candidate that is no draw of its own."""
    sizes = ((400, 450), (20, 30), (60, 60))
    for write_s in (None, 0.25):
        drawer = ViewDrawer(*[whole(f"return a * {k}") for k in range(40)], suspects=3, values=1,
                            sizes=sizes, value_sizes=(15,), wide=3000)
        drawer.write_seconds = write_s  # type: ignore[attr-defined]
        s = search(tmp_path, drawer, Judge({}), n=2, focused=3)
        result = asyncio.run(s.attempt(1))
        drawn = [c for c in result.candidates if not c.part]
        assert drawn and len(drawn) == len(drawer.asked)
        last = ""
        for c in drawn:
            record = c.record()
            if write_s is None:
                assert c.expected_ms is None and "expected_ms" not in record
            else:
                tokens = draw_tokens(Sizes(sizes, (15,), 3000, order.ratio_of(drawer)), c.view, last)
                assert tokens is not None and record["expected_ms"] == round(tokens * write_s * 1000), c.view
            last = c.view
