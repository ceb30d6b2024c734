"""A sampled reply given its docstring (autod.planner.splice): over every definition of real libraries,
the two legs joined read back as the reply the model would have written whole, and a reply that
changes a line of the signature is never ended there."""

from __future__ import annotations

import ast
import random
import textwrap

import pytest
from test_earlystop import MODULES, code_of, definitions, reply_for, streamed

from autod.planner import splice
from autod.planner.earlystop import ReplyWatch, Watched

# with richer docstrings than the watch's own modules: more PyPI libraries none of us wrote
MORE = ("click.core", "httpx._client", "_pytest.python", "pydantic.main", "apscheduler.schedulers.base",
        "structlog.stdlib", "chromadb.api.models.Collection")


def with_docstrings() -> list[tuple[str, str, str, tuple[int, int]]]:
    out = []
    for name in (*MODULES, *MORE):
        for qual, code in definitions(name):
            span = splice.docstring_lines(code)
            if span is not None:
                out.append((name, qual, code, span))
    return out


SPLICED = with_docstrings()


def test_real_libraries_give_the_property_below_many_cases():
    assert len(SPLICED) > 200 and len({name for name, *_ in SPLICED}) >= 10


@pytest.mark.parametrize("name, qual, code, span", SPLICED, ids=[f"{n}:{q}" for n, q, *_ in SPLICED])
def test_what_comes_before_the_given_lines_is_the_signature_and_they_hold_the_whole_docstring(
    name: str, qual: str, code: str, span: tuple[int, int]
):
    lines = code.split("\n")
    first, end = span
    body = lines[end]
    indent = body[: len(body) - len(body.lstrip())]
    # the lines before the docstring and a `pass`: the same decorators and signature as the definition
    node = ast.parse(textwrap.dedent(code)).body[0]
    bare = ast.parse(textwrap.dedent("\n".join([*lines[:first], f"{indent}pass"]))).body[0]
    assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    assert isinstance(bare, type(node))
    node.body, bare.body = [ast.Pass()], [ast.Pass()]
    assert ast.dump(node) == ast.dump(bare)
    # the given lines are the docstring and nothing the body runs
    given = ast.parse(textwrap.dedent("\n".join(["def f():", *lines[first:end], f"{indent}pass"])))
    stmts = given.body[0].body  # type: ignore[attr-defined]
    assert len(stmts) == 2 and isinstance(stmts[0], ast.Expr) and isinstance(stmts[1], ast.Pass)
    assert sum(len(ln) + 1 for ln in lines[first:end]) >= splice.MIN_CHARS


def legs(reply: str, code: str, span: tuple[int, int], must: int, rng: random.Random) -> tuple[str, bool]:
    """The reply asked as the planner asks a sampled draw: the first leg streamed until the watch pauses
    it, then (if it did) the second from the answer's start it gives, the model going on from where the
    given lines end. What the parser reads, and whether it was paused."""
    start = splice.first_leg(code)
    assert reply.startswith(start)
    first = ReplyWatch(Watched(code, must, span))
    first.feed(start)
    model = reply[len(start):]  # what the model writes after the fence it is given
    if not streamed(model, first, rng) or first.stopped != "paused":
        return first.content(), False
    opening = first.content()
    # the model goes on after the given lines: its own text from the line after them
    written = opening.count("\n") - 1  # the code lines the answer's start holds
    after = "".join(model.splitlines(keepends=True)[written:])
    second = ReplyWatch(Watched(code, must))
    second.feed(opening)
    streamed(after, second, rng)
    return second.content(), True


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_reply_given_its_docstring_reads_back_as_the_reply_written_whole(seed: int):
    rng = random.Random(seed)
    paused = 0
    for name, qual, code, span in rng.sample(SPLICED, 40):
        lines = code.split("\n")
        new = list(lines)
        i = rng.randrange(span[1], len(lines))  # a change in the body, or none
        if rng.random() < 0.7 and lines[i].strip():
            new[i] = lines[i] + "  # fixed"
        # the model reproduces the docstring itself as the prompt has it: the legs must join to it
        reply = reply_for("\n".join(new), intro="")
        # the failing tests ran the changed line (a change past them ends the reply as an echo: earlystop)
        joined, was = legs(reply, code, span, rng.randint(i + 1, len(lines)), rng)
        paused += was
        assert was, (name, qual)
        assert code_of(joined) == code_of(reply), (name, qual, i)
    assert paused == 40


@pytest.mark.parametrize("seed", [4, 5])
def test_a_reply_that_changes_a_line_before_the_docstring_is_never_paused_and_reads_as_written(seed: int):
    rng = random.Random(seed)
    for name, qual, code, span in rng.sample(SPLICED, 40):
        lines = code.split("\n")
        new = list(lines)
        i = rng.randrange(0, span[0])
        new[i] = lines[i].rstrip() + "  # changed"  # a default, a decorator, a parameter: any change
        reply = reply_for("\n".join(new), intro="")
        joined, was = legs(reply, code, span, len(lines), rng)
        assert not was, (name, qual, i)
        assert code_of(joined) == code_of(reply), (name, qual, i)


def test_a_short_docstring_or_one_on_the_signature_s_line_is_generated():
    long_text = "word " * 40
    assert splice.docstring_lines(f'def f(x):\n    """{long_text}"""\n    return x') == (1, 2)
    assert splice.docstring_lines('def f(x):\n    """Short."""\n    return x') is None
    assert splice.docstring_lines(f'def f(x): """{long_text}"""; return x') is None
    assert splice.docstring_lines(f'def f(x):\n    """{long_text}"""') is None  # no body after it
    assert splice.docstring_lines(f'def f(x):\n    x = 1\n    """{long_text}"""\n    return x') is None
    form_feed = f'def f(x):\n    """{long_text}\x0c"""\n    return x'  # a line to Python, and to autod
    assert splice.docstring_lines(form_feed) == (1, 2)
    lone_cr = f'def f(x):\n    """{long_text}\r"""\n    return x'  # the stream's watch splits at \n only
    assert splice.docstring_lines(lone_cr) is None
    assert splice.docstring_lines("not python at all (") is None


@pytest.mark.parametrize("seed", [6, 7])
def test_a_line_short_of_the_definition_s_indentation_is_given_back_as_it_is(seed: int):
    """A string may hold a line short of the definition's indentation (in a method's docstring, a
    blank line of two spaces: the parse ignores it, the text keeps it): the lines given keep it as it
    is, so a reply written at the file's own indentation reads back character for character (no
    change inside a string that the model did not make)."""
    rng = random.Random(seed)
    methods = [(n, q, c, s) for n, q, c, s in SPLICED if c.startswith("    ")]
    checked = 0
    for name, qual, code, (first, end) in rng.sample(methods, 40):
        lines = code.split("\n")
        lines.insert(rng.randrange(first + 1, end), "  ")  # inside the docstring, its opening line kept
        code = "\n".join(lines)
        span = splice.docstring_lines(code)
        assert span is not None, (name, qual)
        start = splice.first_leg(code)  # the fence and its `python`
        closing = start.removesuffix("python\n")
        joined, was = legs(f"{start}{code}\n{closing}\n", code, span, len(lines), rng)  # not dedented
        assert was, (name, qual)
        assert code_of(joined).rstrip("\n") == code, (name, qual)  # the two-space line among them
        checked += 1
    assert checked == 40
