"""A reply ended early never loses or invents a line: generated over the definitions of real libraries."""

from __future__ import annotations

import ast
import importlib
import random
from pathlib import Path

import pytest

from autod.planner.codeform import parse_code_reply
from autod.planner.earlystop import ReplyWatch, Watched
from autod.planner.fences import blocks, fence_for

# standard-library modules and three PyPI libraries none of us wrote (autod's own dependencies)
MODULES = ("fractions", "textwrap", "argparse", "json.decoder", "httpx._urlparse", "yaml.constructor",
           "structlog.processors", "pydantic.networks")


def definitions(name: str) -> list[tuple[str, str]]:
    """(qualname, exact text with the file's indentation) of every function and method of a module."""
    path = Path(importlib.import_module(name).__file__ or "")
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    out: list[tuple[str, str]] = []

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                walk(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno:
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                out.append((prefix + node.name, "\n".join(lines[first - 1 : node.end_lineno])))

    walk(ast.parse(text).body, "")
    return out


def reply_for(code: str, intro: str = "The bug is in the loop.\n\n") -> str:
    """A reply as a model writes it: a sentence, the block (dedented, as models mostly do), a remark."""
    lines = code.splitlines()
    base = len(lines[0]) - len(lines[0].lstrip())
    body = "\n".join(ln[base:] if ln[:base].strip() == "" else ln for ln in lines)
    fence = "```" if "```" not in code else fence_for(code)
    return f"{intro}{fence}python\n{body}\n{fence}\n\nThis keeps every other line as it was.\n"


def streamed(reply: str, watch: ReplyWatch, rng: random.Random) -> bool:
    i = 0
    while i < len(reply):
        step = rng.choice((1, 2, 3, 5, 8, 13))
        if watch.feed(reply[i : i + step]):
            return True
        i += step
    return False


def code_of(reply: str) -> str:
    found = [b for b in blocks(reply) if b.lang in ("python", "")]
    return found[0].body if found else ""


def sample(rng: random.Random, k: int) -> list[tuple[str, str, str]]:
    out = []
    for name in MODULES:
        defs = [(q, c) for q, c in definitions(name) if 3 <= c.count("\n") + 1 <= 120]
        out += [(name, q, c) for q, c in rng.sample(defs, min(k, len(defs)))]
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_an_echo_is_ended_at_the_last_line_that_matters_and_read_back_as_the_definition_unchanged(seed):
    rng = random.Random(seed)
    for name, qual, code in sample(rng, 12):
        n = code.count("\n") + 1
        must = rng.randint(1, n)
        reply = reply_for(code)
        watch = ReplyWatch(Watched(code, must))
        assert streamed(reply, watch, rng), (name, qual, must)
        assert watch.echo, (name, qual)
        if must < n:  # ended as soon as the last line that matters was read, not at the block's end
            assert (watch.stopped, watch.lines, watch.spliced) == ("echo", must, n - must), (name, qual)
        else:  # every line matters: ended where the block closes, before the remark after it
            assert watch.stopped == "closed" and "remark" not in watch.content(), (name, qual)
        assert code_of(watch.content()) == code_of(reply), (name, qual)


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_a_reply_with_a_change_anywhere_reads_back_exactly_as_written_whenever_it_is_ended(seed):
    """One line changed, inserted or removed at any line, whatever the bound: the reply the parser reads
    is the one the model was writing, never a line lost, added or moved."""
    rng = random.Random(seed)
    ended = 0
    for name, qual, code in sample(rng, 12):
        lines = code.splitlines()
        i = rng.randrange(1, len(lines))  # the def line itself stays (the block is that definition's)
        kind = rng.choice(("change", "insert", "remove"))
        new = list(lines)
        indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        if kind == "change":
            new[i] = lines[i] + "  # fixed" if lines[i].strip() else indent + "pass  # fixed"
        elif kind == "insert":
            new.insert(i, f"{indent}assert x is not None  # fixed")
        else:
            del new[i]
        reply = reply_for("\n".join(new))
        # the bound is past the change: the failing tests ran that line, so it may matter
        must = rng.randint(min(i + 1, len(lines)), len(lines))
        watch = ReplyWatch(Watched(code, must))
        if streamed(reply, watch, rng):
            ended += 1
            assert not watch.echo, (name, qual, kind, i)
        assert code_of(watch.content()) == code_of(reply), (name, qual, kind, i, must)
    assert ended  # most replies are ended early; this says the property is not vacuous


def test_a_reply_that_adds_a_line_after_the_last_one_is_never_taken_for_an_echo():
    code = "def total(xs):\n    s = 0\n    for x in xs:\n        s += x\n"
    watch = ReplyWatch(Watched(code))
    assert not streamed(reply_for(code + "    return s"), watch, random.Random(0))
    plan = parse_code_reply(watch.content(), {"m.py": ("total",)}, ("m.py",))
    assert plan.edits[0].replace.rstrip().endswith("return s")


def test_another_definition_or_reindented_code_is_read_whole_never_ended():
    code = "def f(a):\n    if a:\n        return 1\n    return 2\n"
    rng = random.Random(0)
    for reply in (reply_for("def g(a):\n    return 3\n"),
                  reply_for(code.replace("    ", "  ")) + "tail",
                  "Nothing to change here: the test is wrong.\n"):
        watch = ReplyWatch(Watched(code, 2))
        assert not streamed(reply, watch, rng)
        assert watch.content() == reply


def test_a_fence_inside_a_docstring_does_not_end_the_block_early():
    code = 'def f():\n    """Example:\n\n    ```\n    >>> f()\n    ```\n    """\n    return 1\n'
    reply = reply_for(code.replace("return 1", "return 2"))
    watch = ReplyWatch(Watched(code, 0))
    streamed(reply, watch, random.Random(1))
    assert "return 2" in code_of(watch.content()) and code_of(watch.content()) == code_of(reply)


def test_a_suspects_prompt_is_watched_through_the_lines_its_failing_tests_ran_and_the_next():
    from autod.candidates.asker import watched

    code = "def f(a):\n    if a:\n        return 1\n    return 2"
    suspect = {"path": "m.py", "symbol": "f", "code": code, "ran_to": "3", "values": "# X\nX = 1"}
    assert watched(suspect, suspect) == Watched(code, 4)  # values shown too: a value's reply is read whole
    assert watched({**suspect, "ran_to": ""}, {**suspect, "ran_to": ""}) == Watched(code, 0)  # no spectrum
    assert watched(suspect, {**suspect, "code": code[:20]}) is None  # cut to fit: not the file's text
    assert watched(None, suspect) is None
