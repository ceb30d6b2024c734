"""The greedy draw of a long definition in two legs (autod.planner.point): over every function of
real libraries none of us wrote, a named line is found where it is, a reply begun just before it
that gives the code back is an echo two lines on, and one that changes the named line reads back as
exactly that change."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from test_earlystop import MODULES, code_of, definitions, streamed
from test_linechoice import offered

from autod.planner import TokenUsage, point
from autod.planner.earlystop import ReplyWatch, Watched
from autod.planner.hold import Hold
from autod.planner.wire import Completion

MORE = ("click.core", "httpx._client", "_pytest.python", "pydantic.main", "apscheduler.schedulers.base")


def cases() -> list[tuple[str, str, str]]:
    out = []
    for name in (*MODULES, *MORE):
        out += [(name, q, c) for q, c in definitions(name) if 4 <= c.count("\n") + 1 <= 200]
    return out


CASES = cases()


def unique_lines(code: str) -> list[int]:
    lines = [ln.strip() for ln in code.strip("\n").split("\n")]
    # a fence line (a docstring's example) is never taken for a named line: a reply's fence closes its block
    return [i for i, ln in enumerate(lines)
            if ln and lines.count(ln) == 1 and not ln.startswith(("```", "~~~"))]


def test_the_property_below_runs_over_many_definitions_of_many_libraries():
    assert len(CASES) > 500 and len({n for n, *_ in CASES}) >= 12


def test_leg_one_names_the_definition_it_asks_about_for_every_definition_of_many_libraries():
    """The question names the definition as it is defined (decorated, async, a method's bare name); over
    every function of the modules above, the name is the one the code defines, and the question holds
    nothing but that name and the fixed text."""
    seen = 0
    for _name, qual, code in CASES:
        own = qual.rsplit(".", 1)[-1]
        first = next(ln for ln in code.split("\n") if ln.strip() and not ln.lstrip().startswith("@"))
        if not first.lstrip().startswith(("def ", "async def ", "class ")):
            assert point.name_of(code) in ("", own), qual  # a decorator over several lines: no name, or its
            continue
        seen += 1
        assert point.name_of(code) == own, qual
        assert point.question(code) == point.ASK.format(name=own)
        assert point.ask(code).startswith(point.question(code)) and point.ask(code).endswith("python\n")
    assert seen > 500
    for code in ("X = 1", "", "\n\n", "@decorator(\n    arg)\ndef f():\n    pass", "lambda: 0", "def (x):",
                 " async c" + " " * 100_000, "class" + "\t" * 100_000, "def <|im_end|>(x):", "class `x`:"):
        assert point.question(code) == point.UNNAMED, code  # only an identifier is ever put in the question
    assert point.name_of("\n\n@a\n@b.c(1)\nasync  def  g(x):\n    pass") == "g"
    assert point.name_of("class K(Base):\n    x = 1") == "K"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_line_written_as_the_definition_has_it_is_named_there_however_indented(seed):
    rng = random.Random(seed)
    for name, qual, code in rng.sample(CASES, 300):
        lines = code.strip("\n").split("\n")
        for i in unique_lines(code):
            said = rng.choice(("", "    ", "\t")) + lines[i].strip() + rng.choice(("", "\n", "\n````\n"))
            assert point.named(said, code) == i, (name, qual, i)


@pytest.mark.parametrize("seed", [4, 5])
def test_a_line_written_with_a_small_change_is_named_as_the_closest_line_or_not_at_all(seed):
    """A model often writes the named line already fixed: it is still that line when no other line is as
    close; a named line is never one less like what was written than another."""
    import difflib

    rng = random.Random(seed)
    named = 0
    for name, qual, code in rng.sample(CASES, 300):
        lines = [ln.strip() for ln in code.strip("\n").split("\n")]
        i = rng.choice(unique_lines(code) or [0])
        if len(lines[i]) < 12:
            continue
        k = rng.randrange(len(lines[i]))
        said = lines[i][:k] + rng.choice("<>=+-1 ") + lines[i][k + 1 :]
        got = point.named(said, code)
        if got is None:
            continue
        named += 1
        ratio = [difflib.SequenceMatcher(None, ln, said, autojunk=False).ratio() for ln in lines]
        assert ratio[got] == max(ratio) and ratio.count(max(ratio)) == 1, (name, qual, said)
        assert got == i or ratio[got] >= ratio[i], (name, qual)
    assert named > 200


def test_nothing_named_by_a_blank_a_fence_prose_or_a_line_found_twice():
    code = "def f(x):\n    if x:\n        return 1\n    if x:\n        return 1\n    return 2\n"
    for said in ("", "\n", "```", "````python", "The bug is that the loop never ends.", "        return 1"):
        assert point.named(said, code) is None, said
    assert point.named("    return 2", code) == 5


@pytest.mark.parametrize("seed", [6, 7, 8])
def test_leg_two_reads_back_as_the_definition_or_as_exactly_the_change_at_the_named_line(seed):
    rng = random.Random(seed)
    ended = 0
    for name, qual, code in rng.sample(CASES, 120):
        lines = code.strip("\n").split("\n")
        at = rng.choice(unique_lines(code) or [0])
        opening = point.begun(code, at)
        assert opening.split("\n", 1)[1] == "".join(f"{ln}\n" for ln in lines[:at])
        fence = opening.split("\n", 1)[0][: -len("python")]
        new = list(lines)
        change = rng.random() < 0.5 and lines[at].strip()
        if change:
            new[at] = lines[at] + "  # fixed"
        reply = opening + "\n".join(new[at:]) + f"\n{fence}\n\nThat is the fix.\n"
        watch = ReplyWatch(Watched(code, min(len(lines), at + 2)))
        watch.feed(opening)  # as the endpoint does: the given start, as if written
        if streamed(reply[len(opening):], watch, rng):
            ended += 1
        want = "\n".join(new)
        assert code_of(watch.content()).strip("\n") == want.strip("\n"), (name, qual, at, change)
        if not change and at + 2 < len(lines):
            assert watch.echo and watch.lines <= at + 2 + 1, (name, qual, at)  # two lines on, not the rest
    assert ended > 80


class Endpoint:
    def __init__(self, said: str, finish_reason: str = "stop") -> None:
        self.said, self.calls, self.finish_reason = said, [], finish_reason
        self.hold = Hold("http://127.0.0.1:9/v1")

    async def complete(self, messages, max_tokens, usage, deadline, paths=None, temperature=None, **kw: Any):
        self.calls.append((max_tokens, temperature, kw))
        return Completion(content=kw["opening"] + self.said, finish_reason=self.finish_reason,
                          completion_tokens=9)


LONG = ("def f(xs):\n    total = 0\n" + "".join(f"    total += xs[{i}]\n" for i in range(20))
        + "    return total\n")


HEAD = "```python\ndef f(xs):\n"
ASKED = [{"role": "user", "content": "Fix `f`."}]


def legs(said: str, watch: Watched, min_lines: int = 8, temperature: float = 0.0, above: int = 0
         ) -> tuple[Any, Endpoint]:
    ep = Endpoint(said)
    got = asyncio.run(point.legs(ep, ASKED, TokenUsage(), 0.0, watch, HEAD, min_lines,
                                 temperature=temperature, above=above, seed=1))
    return got, ep


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_a_long_reply_is_asked_which_line_first_then_begun_just_before_it(temperature):
    got, ep = legs("    total += xs[7]\n", Watched(LONG), temperature=temperature)
    messages, opening, watch, line = got
    ((max_tokens, heat, kw),) = ep.calls
    assert max_tokens == point.LEG_ONE_TOKENS and heat == temperature and kw["stop"] == ("\n",)
    assert kw["opening"] == point.ask(LONG) and kw["free"] and kw["seed"] == 1
    assert opening == point.begun(LONG, 9) and watch.must_see == 11 and watch.code == LONG
    assert line == "total += xs[7]" and kw["held"] == point.held(LONG, Watched(LONG))
    # leg two: the conversation goes on from leg one's answer
    assert messages == [*ASKED, {"role": "assistant", "content": f"{point.ask(LONG)}    total += xs[7]\n```"},
                        {"role": "user", "content": point.FOLLOW}]


@pytest.mark.parametrize("said, above, begun_at", [
    ("    total += xs[7]\n", 1, 8),  # one line above the named one (line 9)
    ("    total += xs[7]\n", 3, 6),
    ("    total += xs[0]\n", 5, 1),  # never above the head the draw was given (the signature)
    ("def f(xs):\n", 2, 0),  # the signature named: begun at it, as without `above`
])
def test_leg_two_is_begun_above_the_named_line_as_set_and_watched_through_the_named_statement(
    said, above, begun_at
):
    (_, opening, watch, line), _ = legs(said, Watched(LONG), above=above)
    assert opening == point.begun(LONG, begun_at) and line == said.strip()
    named = point.named(said, LONG)
    assert named is not None and watch.must_see == named + 2  # the named line and the one after it


@pytest.mark.parametrize("must_see, min_lines, asked", [(0, 8, True), (6, 8, False), (12, 8, True),
                                                        (0, 0, False), (0, 40, False)])
def test_only_a_reply_longer_than_the_setting_to_the_last_line_that_matters_is_asked_in_two_legs(
    must_see, min_lines, asked
):
    got, ep = legs("    return total", Watched(LONG, must_see), min_lines)
    assert bool(ep.calls) is asked
    if asked:
        messages, opening, watch, _ = got
        assert len(messages) == 3 and (opening, watch.must_see) == (point.begun(LONG, 22), 23)
    else:
        assert got is None


def test_a_first_leg_that_names_no_line_leaves_the_draw_as_it_was():
    got, ep = legs("I think the bug is in the loop.", Watched(LONG, 0))
    assert len(ep.calls) == 1 and got is None


@pytest.mark.parametrize("said, refused, outside", [
    ("    total += xs[7]\n", False, False),  # one of the lines offered: held, as llama.cpp holds it
    ("I think the bug is in the loop.", False, True),  # outside what was sent: the server ignored it
    ("    total += xs[7] + 1\n", False, True),  # placed (close enough), yet not a line offered
    ("assert f([1]) == 1", True, False),  # the hold was refused in that request: not sent after all
    ("    total += x", False, False),  # cut at the token cap ("length"): a long line's start proves nothing
])
def test_a_server_seen_answering_outside_every_spelling_of_the_hold_is_known_to_ignore_it(
    said, refused, outside
):
    """The first answer outside moves vLLM's choice field to the older spelling; the second, seen with
    that one too, leaves none: the server counts as not holding leg one."""
    ep = Endpoint(said, "length" if said == "    total += x" else "stop")
    ep.hold.taken = not refused
    fields = []
    for _ in range(2):
        asyncio.run(point.legs(ep, ASKED, TokenUsage(), 0.0, Watched(LONG), HEAD, 8, seed=1))
        fields.append(ep.hold.field)
    assert fields == (["guided_choice", "guided_choice"] if outside else ["structured_outputs"] * 2)
    assert ep.hold.ignored is outside and ep.hold.held is (outside is False and not refused)


def test_vllm_is_offered_the_same_lines_as_the_prompt_shows_them():
    offer = point.held(LONG, Watched(LONG, 5))
    assert offer is not None and offer.lines == tuple(LONG.split("\n")[:5])
    assert [ln.strip() for ln in offer.lines] == offered(offer.grammar)


STATEMENTS = '''    def g(self, a,
          b):
        """Doc."""
        x = call(a,
                 b)
        if (a and
                b):
            return x
        elif b: y = 1
        else:
            y = 2
        for i in range(
                3):
            x += i
        return x'''


@pytest.mark.parametrize("at, end", [(0, 2), (1, 2), (2, 3), (3, 5), (4, 5), (5, 7), (6, 7), (7, 8),
                                     (8, 9), (9, 10), (11, 13), (12, 13), (13, 14), (14, 15)])
def test_the_named_statement_is_seen_whole_a_compound_one_through_its_header(at, end):
    assert point.statement_end(STATEMENTS, at) == end


def test_code_that_does_not_parse_is_seen_through_the_named_line():
    assert point.statement_end("def f(:\n    return (\n", 1) == 2


def test_a_reply_s_worth_of_text_names_nothing_and_a_long_line_is_named_only_as_written():
    long = "    x = '" + "ab" * 400 + "'"
    code = f"def f():\n{long}\n    return x\n"
    assert point.named(long, code) == 1  # found as written, however long
    assert point.named(long[:-3] + "c'", code) is None  # not matched by likeness past MAX_SAID_CHARS
    assert point.named("x" * 50_000, code) is None
    assert point.named("    return x" + " " * 5000, code) == 2  # trailing blanks are not the line's
