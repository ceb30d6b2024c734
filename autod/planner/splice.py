"""Giving a sampled reply its definition's docstring instead of having it generated (`llm.prefill`).

The greedy draw is begun with the definition's whole head (autod.planner.prefill): decorators,
signature, docstring. A sampled draw is not, because it explores and may rightly change the head: a
wrong default value is a bug a sample can fix. Yet the bulk of a head is its docstring, which no fix
needs: on the held-out benches' sampled draws the head was ~36 % of the characters generated, nearly
all of it in definitions with a default value or a decorator (docs/lab/performance-history.md).

So a sampled reply is asked in two legs where the server takes a started answer. The first leg
generates from the block's fence; it is read as it streams (autod.planner.earlystop) and ended once
the reply has written the definition's lines before its docstring (decorators, signature, any
comment) exactly as the prompt shows them. The second leg is the same request with the answer begun
with what the first wrote and the docstring, as the prompt shows it, reindented as the reply indents
the definition; the model goes on from the first statement of the body. A first leg that changes a
line before the docstring is never ended there: it runs as any reply does, so a sample can still
change a default, a decorator or a parameter. The server keeps the first leg's tokens, so the
second reads only the docstring (a prompt is read ~7-9x faster than a reply is written on a CPU).

A docstring shorter than `MIN_CHARS` is generated: below it the second request's own cost (a round
trip, the boundary read again) is about what the splice would save. A docstring that shares a line
with the signature or with the body (`def f(): "doc"`) gives no line to end at and is generated too.
"""

from __future__ import annotations

import ast
import textwrap

from autod import pyast
from autod.linebreaks import lines_of
from autod.planner.fences import fence_for
from autod.planner.prefill import head

__all__ = ["MIN_CHARS", "docstring_lines", "first_leg"]

MIN_CHARS = 160  # ~40-50 tokens of code: ~8 s of writing on the bench's CPU against ~1 s to read them


def docstring_lines(code: str) -> tuple[int, int] | None:
    """(first, end) 0-based line indexes of `code`'s docstring, on lines of its own and at least
    `MIN_CHARS` long, followed by the body on a line of its own; None when there is no such docstring
    (or `code` is not one definition that parses)."""
    if code.startswith("\n") or len(lines_of(code.strip("\n"))) != len(code.strip("\n").split("\n")):
        return None  # the watch counts lines as lines_of() does (autod.planner.earlystop): one count
    opening = head(code)  # the lines before the body's first statement that is not the docstring
    if not opening:
        return None
    try:
        node = pyast.parse(textwrap.dedent(code)).body[0]
    except (SyntaxError, ValueError, IndexError):
        return None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return None
    doc = node.body[0]
    if not (isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)
            and isinstance(doc.value.value, str)) or doc.end_lineno is None:
        return None
    lines = code.split("\n")
    first, end = doc.lineno - 1, len(opening.split("\n"))
    if first < 1 or doc.end_lineno > end:
        return None
    before = textwrap.dedent(code).split("\n")[first][: doc.col_offset]
    if before.strip():
        return None  # the docstring starts on the signature's line
    if sum(len(ln) + 1 for ln in lines[first:end]) < MIN_CHARS:
        return None
    return first, end


def first_leg(code: str) -> str:
    """The first leg's answer start: the block's fence, as the prompt fences `code` (so both legs go to
    the server's raw-prompt endpoint, and the second finds the first's tokens in its cache)."""
    return f"{fence_for(code)}python\n"
