"""Fenced blocks no source text can close (autod.planner.fences), in prompts and in replies."""

from __future__ import annotations

import sys

from autod.localize.rank import Piece
from autod.localize.render import block
from autod.planner import fences
from autod.planner.codeform import parse_code_reply, quoted_code
from autod.planner.fences import blocks, fence_for, fenced

DOC = '''def is_due(now, deadline):
    """Whether the deadline has passed.

    ```pycon
    >>> is_due(3, 3)
    True
    ```

    More text after the example.
    """
    return deadline <= now
'''
FIXED = DOC.replace("deadline <= now", "deadline < now")
SHOWN = {"src/tick.py": ("is_due",)}


def reply(code: str, fence: str = "```") -> str:
    return f"The comparison is off by one.\n\n### src/tick.py · is_due\n{fence}python\n{code}{fence}\n"


def prompt(code: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"### src/tick.py · is_due (lines 1-11)\n{fenced(code, 'python')}\n"}]


def test_a_docstring_fence_does_not_end_the_reply_block():
    plan = parse_code_reply(reply(FIXED), SHOWN, ["src/tick.py"], quoted=quoted_code(prompt(DOC)))
    assert [(e.symbol, e.replace) for e in plan.edits] == [("is_due", FIXED)]


def test_a_reply_fenced_like_the_prompt_is_read_whole():
    text = reply(FIXED, fence_for(DOC))
    plan = parse_code_reply(text, SHOWN, ["src/tick.py"], quoted=quoted_code(prompt(DOC)))
    assert [(e.symbol, e.replace) for e in plan.edits] == [("is_due", FIXED)]


def test_an_echo_of_a_fenced_docstring_is_still_an_echo():
    for fence in ("```", fence_for(DOC)):
        plan = parse_code_reply(reply(DOC, fence), SHOWN, ["src/tick.py"], quoted=quoted_code(prompt(DOC)))
        assert plan.edits == []


def test_the_prompt_fences_code_longer_than_any_fence_inside_it():
    assert fence_for(DOC) == "````" and fence_for("x = 1") == "```" and fence_for("`````") == "``````"
    piece = Piece(path="src/tick.py", symbol="is_due", start=1, end=11, why="named", key=0.0)
    text, _ = block(piece, DOC.splitlines())
    (only,) = blocks(text)
    assert only.body == DOC and only.lang == "python"


def test_a_block_that_does_not_parse_ends_at_its_first_fence():
    text = "```python\nx = (\n```\nprose\n```python\ny = 2\n```\n"
    assert [b.body for b in blocks(text)] == ["x = (\n", "y = 2\n"]


def test_a_tilde_fence_is_closed_only_by_tildes():
    assert [b.body for b in blocks("~~~~\na\n```\n~~~~\n")] == ["a\n```\n"]


def test_the_bench_oracle_reads_a_reply_fenced_around_a_docstring_fence_whole(monkeypatch):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / "reallib_e2e.py"
    monkeypatch.syspath_prepend(str(path.parent))  # its sibling modules
    spec = importlib.util.spec_from_file_location("reallib_e2e_under_test", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    before = set(sys.modules)
    try:
        spec.loader.exec_module(bench)
        assert bench.fenced(reply(FIXED)) == FIXED and bench.fenced("no block") == "no block"
    finally:
        # its siblings (the bench's `overrides`, ...) must not stand in for libraries of the same name
        # that later tests in this process import (chromadb imports the `overrides` package)
        for name in set(sys.modules) - before:
            if str(getattr(sys.modules[name], "__file__", "") or "").startswith(str(path.parent)):
                del sys.modules[name]


def test_reading_a_reply_parses_at_most_a_budget_of_its_length_whatever_it_holds(monkeypatch):
    """Generated hostile replies (many Python blocks none of which parses, closers of every length,
    openers never closed, fences inside strings): the characters tried as Python stay within
    PARSE_BUDGET times the reply's length, so reading is linear in it (it was cubic: a 4.8 KB reply
    took 30 s on the event loop)."""
    import random

    tried = [0]
    real = fences._parses

    def counting(code: str) -> bool:
        tried[0] += len(code)
        return real(code)

    monkeypatch.setattr(fences, "_parses", counting)
    rng = random.Random(9)
    units = ["```python\n(\n```\n", "```\ndef f(:\n```\n", "````python\n'''\n```\n````\n", "```py\nx = [\n",
             "```python\nx = 1\n```\n", "~~~python\n(\n~~~\n", "```python\n\"\"\"\n```\n```\n"]
    for n in (10, 100, 1_000):
        for _ in range(3):
            text = "".join(rng.choice(units) for _ in range(n))
            tried[0] = 0
            fences.blocks(text)
            assert tried[0] <= fences.PARSE_BUDGET * len(text), (n, tried[0], len(text))
