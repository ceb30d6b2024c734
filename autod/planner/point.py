"""A long definition asked in two legs: which line, then the code from that line.

A focused prompt asks for one definition back, fixed (autod.modes.debug), and the greedy reply of a
small model is mostly the definition copied: on the held-out libraries two of every three generated
tokens went on replies that gave a definition back unchanged (echoes), each one copied from its head
(autod.planner.prefill gives that) down to the last line the failing tests ran (autod.planner.earlystop
ends it there). A copy of forty lines costs forty lines whether it holds a change or not.

So where a greedy reply would have to generate more than `min_lines` lines, the model is first asked
for the line it holds to be wrong: the same prompt, its answer begun with `ASK` (the definition named)
and a code fence, one line generated (leg one, a few tokens). That line is found in the definition
(`named`: the line it wrote, or the one line most like it, since a model often writes the line already
fixed). Leg two goes on with the conversation: leg one's answer, `FOLLOW`, and an answer begun with
the definition up to the named line (the server reads that text ~7 times faster than it writes it).
The model writes from the named line on, watched as every greedy reply is (autod.planner.earlystop),
and must see only the named statement (an `if` through its condition) and the line after it: a reply
that gives them back unchanged is an echo a few lines on, and one that changes them is ended once it
is back on the definition's lines. A leg one that names no line of the definition, or one found
twice, leaves the draw as it was (begun with the head).

A sampled draw of such a definition (one choice a request) names its line by sampling and is written
from it at its own temperature: each sample tries a line for a few tokens, where a whole sample of a
long definition was its dearest draw and mostly a copy. A request for several choices is asked whole
(a suspect's samples are asked one choice a request: autod.candidates.asker, `one_choice`).

What it gives up: a change the greedy reply would have made elsewhere than from the named line on,
a missing statement above it among them. A short definition is therefore asked whole: on the held-out
bench a 16-line definition whose fix inserts a guard at its top was fixed by its whole greedy reply
and not by two legs (the model named its last line), and on the held-out bench at 12 lines another fix
made by a whole greedy reply was lost. The pointed question that follows an echo
(autod.candidates.reask) is asked in two legs at any length (`PlanRequest.point_lines`).

Where the server holds it (llama.cpp by a grammar, vLLM by a list of choices: autod.planner.hold), leg
one may write only one of the lines `offered` (autod.planner.linechoice): the definition's through the
last the failing tests ran, less the lines it holds twice and the lines this suspect's earlier draws
named and wrote back unchanged (`Watched.tried`, kept by the asker), so the pointed question and the
samples after an echo name another line. An answer seen outside the lines offered moves the server to
its next spelling of the hold, and past the last it counts as not holding leg one: the draw order then
prices a miss again (autod.candidates.fits, `MISSED`). Leg two may be begun `llm.point_above` lines
above the named one.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import difflib
import textwrap
from collections import Counter
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from autod import pyast
from autod.linebreaks import lines_of
from autod.planner import linechoice
from autod.planner.fences import fence_for

if TYPE_CHECKING:
    from autod.planner import TokenUsage
    from autod.planner.earlystop import Watched
    from autod.planner.hold import Hold
    from autod.planner.linechoice import Offer
    from autod.planner.wire import Completion

log = structlog.get_logger(__name__)

__all__ = ["ASK", "FOLLOW", "LEG_ONE_TOKENS", "UNNAMED", "ask", "begun", "held", "legs", "name_of", "named",
           "offered", "question", "span", "statement_end"]

ASK = "The line of `{name}` that makes the test fail:\n"  # leg one's question, the definition named
UNNAMED = "The line that makes the test fail:\n"  # ... of a definition whose name is not found
FOLLOW = "Write the complete fixed definition, with that line corrected."
MAX_SAID_CHARS = 400  # a line written with a change is matched to the definition's up to this long
LEG_ONE_TOKENS = 96  # one line of code; longer is not a line of this definition
NEAR = 0.75  # a line written with a change of its own is still named (the likeliest fix is a small one)


def span(code: str, given: int, must_see: int) -> int:
    """How many lines a reply begun with `code`'s first `given` lines (its head) generates before the
    early stop may end it: through line `must_see` (0: the last). Two legs are asked where this exceeds
    `llm.point_lines`, and a draw is priced by it (autod.candidates.fits)."""
    total = len(lines_of(code.strip("\n")))
    return min(total, must_see or total) - given


def name_of(code: str) -> str:
    """The name `code` defines: its first line past blanks and decorators, a `def` or `class` line's;
    "" when that line is neither (an assignment, a decorator over several lines). Words, not a pattern:
    linear in the line however it is spaced."""
    for line in lines_of(code):
        words = line.split(None, 3)
        if not words or words[0].startswith("@"):
            continue
        if words[0] == "async":
            words = words[1:]
        if len(words) < 2 or words[0] not in ("def", "class"):
            return ""
        end = next((i for i, ch in enumerate(words[1]) if not (ch.isalnum() or ch == "_")), len(words[1]))
        name = words[1][:end]
        return name if name.isidentifier() else ""
    return ""


def question(code: str) -> str:
    """Leg one's question: `ASK` naming the definition (without its name, a small model named no line
    of it in 8 of 17 long definitions' prompts, mostly quoting a test's `assert` from the failure
    output; with it, in 3), or `UNNAMED` where the name is not found."""
    name = name_of(code)
    return ASK.format(name=name) if name else UNNAMED


def ask(code: str) -> str:
    """Leg one's answer start: the question and a fence as the prompt fences `code`."""
    return f"{question(code)}{fence_for(code)}python\n"


def named(said: str, code: str) -> int | None:
    """The index of the line of `code` that leg one's reply names: the line it wrote, stripped, found once
    in the definition; else the one line most like it (a ratio of `NEAR` or more, no other as close);
    None when it names none, or the blank."""
    line = said.split("\n", 1)[0].strip()
    if not line or line.startswith(("```", "~~~")):
        return None
    lines = [ln.strip() for ln in lines_of(code.strip("\n"))]
    exact = [i for i, ln in enumerate(lines) if ln == line]
    if exact:
        return exact[0] if len(exact) == 1 else None
    if len(line) > MAX_SAID_CHARS:  # the match below is quadratic in the lengths: never on a reply's worth
        return None
    scored = []
    for i, ln in enumerate(lines):
        if not ln or len(ln) > MAX_SAID_CHARS:
            continue
        match = difflib.SequenceMatcher(None, ln, line, autojunk=False)
        if match.real_quick_ratio() >= NEAR and match.quick_ratio() >= NEAR:  # upper bounds, cheap
            scored.append((match.ratio(), i))
    scored.sort(reverse=True)
    if not scored or scored[0][0] < NEAR or (len(scored) > 1 and scored[1][0] == scored[0][0]):
        return None
    return scored[0][1]


def begun(code: str, at: int) -> str:
    """Leg two's answer start: the block's fence and `code`'s lines before line `at`, as written."""
    lines = lines_of(code.strip("\n"))
    return f"{fence_for(code)}python\n" + "".join(f"{ln}\n" for ln in lines[:at])


class Completes(Protocol):
    """The endpoint's one request (autod.planner.endpoint.Endpoint.complete), and how the server holds leg
    one to the lines offered, as far as seen (autod.planner.hold)."""

    hold: Hold

    async def complete(self, messages: list[dict[str, str]], max_tokens: int, usage: TokenUsage,
                       deadline: float, paths: tuple[str, ...] | None = None,
                       temperature: float | None = None, *, held: Offer | None = None, **kw: Any
                       ) -> Completion: ...


async def legs(endpoint: Completes, messages: list[dict[str, str]], usage: TokenUsage, deadline: float,
               watch: Watched, opening: str, min_lines: int, *, temperature: float | None = 0.0,
               above: int = 0, **kw: Any) -> tuple[list[dict[str, str]], str, Watched, str] | None:
    """Leg two's messages, start and watch, and the line named (stripped); None (ask as before) unless
    more than `min_lines` lines would be generated from `opening` (the head) on and leg one, asked at
    `temperature` (a sampled draw names its line by sampling too), names a line of the definition. Leg
    two is the conversation with leg one's answer and `FOLLOW`, its reply begun with the definition up
    to the named line (`above` lines before it, not above the head) and watched through the named
    statement and the line after it. Leg one is held to the lines `held` offers where the server holds
    it. `kw`: the request's seed and record."""
    code = watch.code
    total = len(lines_of(code.strip("\n")))
    given = max(0, len(lines_of(opening)) - 1)  # the opening's lines after its fence
    written = span(code, given, watch.must_see)
    if min_lines <= 0 or written <= min_lines:
        return None
    start = ask(code)
    lines, offer = await asyncio.to_thread(_held, code, watch)  # the lines it may name, where held
    reply = await endpoint.complete(messages, LEG_ONE_TOKENS, usage, deadline, None, temperature, free=True,
                                    stop=("\n",), opening=start, held=offer, **kw)
    said = reply.content.removeprefix(start).split("\n", 1)[0]
    whole = reply.finish_reason != "length"  # a long line cut at LEG_ONE_TOKENS proves nothing
    if offer is not None and endpoint.hold.taken and whole and said.strip() not in lines:
        endpoint.hold.outside()  # sent, not refused, not followed: another spelling, or leg one may miss
    at, end = await asyncio.to_thread(_placed, said, code)  # a match and a parse: off the loop
    log.info("llm.line_named", line=at, lines=total, span=written, tokens=reply.completion_tokens,
             temperature=temperature, held=offer is not None and endpoint.hold.taken,
             tried=len(watch.tried))
    if at is None:
        return None
    fence = fence_for(code)
    answer = f"{start}{said.rstrip()}\n{fence}"
    conversation = [*messages, {"role": "assistant", "content": answer}, {"role": "user", "content": FOLLOW}]
    line = lines_of(code.strip("\n"))[at].strip()
    start_at = max(min(at, given), at - above)
    return conversation, begun(code, start_at), dataclasses.replace(watch, must_see=min(total, end + 1)), line


def held(code: str, watch: Watched) -> Offer | None:
    """What leg one is held to (autod.planner.linechoice): the lines `offered`; None where fewer than two
    are."""
    return _held(code, watch)[1]


def offered(code: str, watch: Watched) -> list[str]:
    """The lines leg one may name, stripped: the definition's through the last the failing tests ran (and
    the one after it, `must_see`), less those the suspect's earlier draws named and wrote back unchanged
    (`tried`) and those it holds twice (`named` could not place them, and the draw would go whole)."""
    lines = lines_of(code.strip("\n"))
    seen = Counter(ln.strip() for ln in lines)
    twice = [text for text, times in seen.items() if times > 1]
    return linechoice.choices(lines[: watch.must_see] if watch.must_see else lines, (*watch.tried, *twice))


def _held(code: str, watch: Watched) -> tuple[list[str], Offer | None]:
    lines = offered(code, watch)
    return lines, linechoice.offer(lines, lines_of(code.strip("\n")))


def _placed(said: str, code: str) -> tuple[int | None, int]:
    at = named(said, code)
    return at, (statement_end(code, at) if at is not None else 0)


def statement_end(code: str, at: int) -> int:
    """How many lines of `code` reach through the statement that line `at` (0-based) is part of: a simple
    statement to its last line, a compound one through its header (an `if`'s whole condition, not its
    body); `at + 1` where the code does not parse."""
    try:
        tree = pyast.parse(textwrap.dedent(code.strip("\n")))
    except (SyntaxError, ValueError):
        return at + 1
    line, end = at + 1, at + 1
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or not node.lineno <= line <= (node.end_lineno or 0):
            continue
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
            if line < body[0].lineno:  # in the header: through its last line
                end = max(line, body[0].lineno - 1)
        else:  # a simple statement holding the line: the innermost is the last one walked
            end = node.end_lineno or line
    return end
