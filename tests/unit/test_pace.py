"""A server's reading speed against its writing speed, measured on streamed replies (autod.planner.pace)."""

from __future__ import annotations

import random

from autod.planner import pace
from autod.planner.pace import Pace, prompt_text, shared_prefix


def test_the_shared_prefix_is_the_longest_common_one_over_generated_texts():
    rng = random.Random(3)
    for _ in range(2000):
        a = "".join(rng.choice("ab\n") for _ in range(rng.randint(0, 60)))
        b = a[: rng.randint(0, len(a))] + "".join(rng.choice("ab\n") for _ in range(rng.randint(0, 20)))
        naive = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        assert shared_prefix(a, b) == naive == shared_prefix(b, a), (a, b)


def test_a_prompt_s_new_part_is_what_it_does_not_share_with_the_last_one_sent():
    p = Pace()
    assert p.sent("system\nuser: the failure\ncode A") == len("system\nuser: the failure\ncode A")
    assert p.sent("system\nuser: the failure\ncode B, longer") == len("B, longer")
    assert p.sent("system\nuser: the failure\ncode B, longer") == 0  # the same prompt again: all cached


def test_the_ratio_is_the_median_reading_s_once_there_are_enough_of_each():
    p = Pace()
    assert p.read_per_generated() is None
    # in characters: 10 ms a prompt token of CHARS_PER_TOKEN (3) characters read, 200 ms one written
    p.observe(3000, 10.0, 600, 40.0)
    assert p.read_per_generated() is None  # one reading says little
    p.observe(1500, 5.0, 300, 20.0)
    assert abs(p.read_per_generated() - 0.05) < 1e-9  # type: ignore[operator]
    p.observe(6000, 400.0, 300, 20.0)  # one outlier (a server busy with another client) moves no median
    p.observe(2400, 8.0, 150, 10.0)
    assert abs(p.read_per_generated() - 0.05) < 1e-9  # type: ignore[operator]
    assert p.as_dict() == {"read_ms_per_token": 10.0, "write_ms_per_token": 200.0, "readings": 4}


def test_readings_too_small_to_say_anything_are_not_kept():
    p = Pace()
    for _ in range(5):
        p.observe(pace.MIN_READ - 1, 3.0, pace.MIN_WRITTEN - 1, 3.0)  # the request's own overhead
        p.observe(0, 0.5, 100, 0.0)
    assert p.read_per_generated() is None and p.as_dict()["readings"] == 0


def test_a_ratio_past_what_any_server_does_is_held_at_the_bounds():
    slow_reader, fast_reader = Pace(), Pace()
    for _ in range(3):
        slow_reader.observe(300, 100.0, 300, 1.0)  # reads slower than it writes: a measurement gone wrong
        fast_reader.observe(10**6, 0.001, 100, 100.0)
    assert slow_reader.read_per_generated() == pace.BOUNDS[1]
    assert fast_reader.read_per_generated() == pace.BOUNDS[0]


def test_chat_messages_and_a_rendered_prompt_share_their_text():
    messages = [{"role": "system", "content": "You fix bugs."}, {"role": "user", "content": "the failure"}]
    chat = prompt_text({"messages": messages})
    rendered = prompt_text({"prompt": chat + "```python\ndef f():\n"})  # autod's ChatML rendering, begun
    assert rendered.startswith(chat) and shared_prefix(chat, rendered) == len(chat)


def test_the_measured_ratio_reaches_the_asker_through_the_daemon_s_metered_planner():
    """The daemon wraps the LLM planner for its metrics (autod.daemon.wiring): the ratio must come
    through the wrapper, or every plan would keep the constant."""
    from types import SimpleNamespace

    from autod.candidates.asker import Asker
    from autod.config.settings import LLMConfig
    from autod.metrics.observe import MeteredPlanner
    from autod.metrics.registry import Metrics
    from autod.planner import ServerPlanner
    from autod.planner.llm import LLMPlanner

    inner = LLMPlanner(LLMConfig(base_url="http://127.0.0.1:9/v1"), None)
    metered = MeteredPlanner(inner, Metrics())
    assert isinstance(metered, ServerPlanner)
    asker = SimpleNamespace(planner=metered)
    assert Asker.read_per_generated.fget(asker) is None  # type: ignore[attr-defined]
    for _ in range(pace.ENOUGH):
        inner._primary.pace.observe(3000, 2.0, 300, 4.0)  # 2 ms a prompt token, 40 ms a written one
    assert Asker.read_per_generated.fget(asker) == metered.read_per_generated == 0.05  # type: ignore[attr-defined]
    assert Asker.read_per_generated.fget(SimpleNamespace(planner=object())) is None  # type: ignore[attr-defined]
    # the seconds a written token takes, for pricing a draw in seconds (autod.candidates.fits)
    assert Asker.write_seconds.fget(asker) == metered.write_seconds == 0.04  # type: ignore[attr-defined]
    assert Asker.write_seconds.fget(SimpleNamespace(planner=object())) is None  # type: ignore[attr-defined]


def test_a_suspect_s_reply_is_priced_through_the_last_line_its_failing_tests_ran_in_the_code_form():
    from types import SimpleNamespace

    from autod.candidates.asker import Asker
    from autod.planner import CHARS_PER_TOKEN as CPT

    code = "def f(x):\n" + "".join(f"    y{i} = x + {i}\n" for i in range(30)) + "    return y0\n"
    focused = [{"code": code, "ran_to": "3", "head_lines": "1"}, {"code": code, "ran_to": ""},
               {"read_by": "1", "blocks": "A = 1"}]
    lines = code.split("\n")  # the signature given (a head of one line), then lines 2 to 4 written
    settings = SimpleNamespace(llm=SimpleNamespace(point_lines=0, point_above=0))  # never in two legs
    for form, first in (("code", sum(len(x) + 1 for x in lines[1:4])), ("json", len(code) + 1)):
        asker = SimpleNamespace(focused=focused, form=form, settings=settings, holds_lines=False)
        replies = Asker.suspect_replies.fget(asker)  # type: ignore[attr-defined]
        assert replies == [int(first / CPT), int((len(code) + 1) / CPT)], form  # a value group is no suspect


def test_a_long_suspect_asked_in_two_legs_is_priced_at_what_they_write_not_at_its_copy():
    from types import SimpleNamespace

    from autod.candidates import fits
    from autod.candidates.asker import Asker
    from autod.planner import CHARS_PER_TOKEN as CPT

    code = "def f(x):\n" + "".join(f"    y{i} = x + {i}\n" for i in range(80)) + "    return y0\n"
    short = "def g(x):\n    return x\n"
    shown = ((code, ""), (code, "3"), (short, ""))
    focused = [{"code": c, "ran_to": ran, "head_lines": "1"} for c, ran in shown]
    for point_lines, form in ((24, "code"), (0, "code"), (24, "json"), (100, "code")):
        settings = SimpleNamespace(llm=SimpleNamespace(point_lines=point_lines, point_above=0))
        asker = SimpleNamespace(focused=focused, form=form, settings=settings, holds_lines=False)
        replies = Asker.suspect_replies.fget(asker)  # type: ignore[attr-defined]
        whole = fits.streamed_tokens(code, 0, CPT, 1 if form == "code" else 0)
        if point_lines == 24 and form == "code":  # 81 lines: two legs (or, missed, all of it)
            assert replies[0] == fits.written_tokens(code, 0, CPT, 1, 24) < whole / 2
            # where a grammar holds leg one to the definition's lines it cannot miss: no whole copy priced
            held = Asker.suspect_replies.fget(SimpleNamespace(**{**vars(asker), "holds_lines": True}))
            two_legs = fits.written_tokens(code, 0, CPT, 1, 24, missed=0.0)
            assert held[0] == two_legs and held[1:] == replies[1:]
            assert replies[0] - two_legs > 0.8 * fits.MISSED * whole  # the miss's whole copy, less its legs
            # leg two begun two lines higher writes them too (llm.point_above)
            higher = SimpleNamespace(point_lines=24, point_above=2)
            priced = Asker.suspect_replies.fget(SimpleNamespace(**{**vars(asker), "holds_lines": True,
                                                                   "settings": SimpleNamespace(llm=higher)}))
            line = len(code) / len(code.split("\n")) / CPT
            assert priced[0] == fits.written_tokens(code, 0, CPT, 1, 24, 0.0, 2)
            assert 2 * line - 1 <= priced[0] - held[0] <= 2 * line + 1
        else:  # asked whole (never in two legs, the JSON form, no longer than the setting)
            assert replies[0] == whole, (point_lines, form)
        # 3 lines to write: asked whole at any setting; a short definition likewise
        streamed = form == "code"
        assert replies[1:] == [fits.streamed_tokens(code, 3 if streamed else 0, CPT, int(streamed)),
                               fits.streamed_tokens(short, 0, CPT, int(streamed))]


def test_two_legs_read_the_definition_again_at_the_server_s_measured_ratio_not_the_constant():
    """Leg two re-reads the definition up to the named line: priced at what the server's replies
    measured (autod.planner.pace), a slow reader makes two legs dearer than the constant said."""
    from types import SimpleNamespace

    from autod.candidates import fits, order
    from autod.candidates.asker import Asker
    from autod.planner import CHARS_PER_TOKEN as CPT

    code = "def f(x):\n" + "".join(f"    y{i} = x + {i}\n" for i in range(80)) + "    return y0\n"
    settings = SimpleNamespace(llm=SimpleNamespace(point_lines=24, point_above=0))
    base = {"focused": [{"code": code, "ran_to": "", "head_lines": "1"}], "form": "code",
            "settings": settings, "holds_lines": True}
    priced = {ratio: Asker.suspect_replies.fget(SimpleNamespace(**base, read_per_generated=ratio))[0]  # type: ignore[attr-defined]
              for ratio in (None, 0.3, 0.05)}
    assert priced[None] == fits.written_tokens(code, 0, CPT, 1, 24, 0.0)  # unmeasured: the constant
    reread = len(code) / CPT / 2
    assert abs(priced[0.3] - priced[None] - reread * (0.3 - order.READ_PER_GENERATED)) <= 1
    assert abs(priced[0.05] - priced[None] - reread * (0.05 - order.READ_PER_GENERATED)) <= 1


def test_the_asker_says_leg_one_is_held_where_its_planners_server_holds_it():
    from types import SimpleNamespace

    from autod.candidates.asker import Asker
    from autod.config.settings import LLMConfig
    from autod.planner.llm import LLMPlanner

    planner = LLMPlanner(LLMConfig(base_url="http://127.0.0.1:9/v1", reply_form="code"), None)
    endpoint = planner._first()
    assert Asker.holds_lines.fget(SimpleNamespace(planner=planner)) is True  # type: ignore[attr-defined]
    endpoint.hold.ignored = True  # answers were seen outside every spelling of the hold sent (Ollama)
    assert Asker.holds_lines.fget(SimpleNamespace(planner=planner)) is False  # type: ignore[attr-defined]
    endpoint.hold.ignored, endpoint.hold.taken = False, False  # refused (OpenAI)
    assert Asker.holds_lines.fget(SimpleNamespace(planner=planner)) is False  # type: ignore[attr-defined]
    assert Asker.holds_lines.fget(SimpleNamespace(planner=object())) is False  # type: ignore[attr-defined]


def test_speeds_kept_by_an_earlier_run_price_the_first_plan_and_three_fresh_readings_outvote_them():
    p = Pace()
    assert p.seed(pace.Speeds(0.010, 0.200))
    assert abs(p.read_per_generated() - 0.05) < 1e-9  # type: ignore[operator]  # before any reply
    p.observe(3000, 1.0, 300, 2.0)  # the server now reads at 1 ms and writes at 20 ms a token
    p.observe(3000, 1.0, 300, 2.0)
    assert p.read_per_generated() != 0.05  # two against two: the medians lie between
    p.observe(3000, 1.0, 300, 2.0)
    assert abs(p.read_per_generated() - 0.05) < 1e-9  # type: ignore[operator]  # the same ratio, ...
    assert p.speeds() == pace.Speeds(0.001, 0.02)  # ... and the fresh speeds, not the kept ones


def test_kept_speeds_never_replace_this_run_s_own_readings_nor_enter_when_implausible():
    measured = Pace()
    measured.observe(1000, 1.0, 100, 2.0)
    assert not measured.seed(pace.Speeds(0.5, 0.5)) and measured.as_dict()["readings"] == 1
    for bad in [(0.0, 0.1), (-1.0, 0.1), (0.01, float("nan")), (float("inf"), 0.1), (0.01, 3600.0)]:
        fresh = Pace()
        assert not fresh.seed(pace.Speeds(*bad)), bad
        assert fresh.read_per_generated() is None


def test_speeds_are_kept_again_only_when_a_median_moved_past_the_drift():
    kept = pace.Speeds(0.010, 0.200)
    assert pace.drifted(kept, None)
    assert not pace.drifted(pace.Speeds(0.0104, 0.196), kept)
    assert pace.drifted(pace.Speeds(0.0106, 0.200), kept)
    assert pace.drifted(pace.Speeds(0.010, 0.189), kept)
