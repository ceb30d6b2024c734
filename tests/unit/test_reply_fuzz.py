"""The code reply form read back over every definition of real libraries: a reply that returns a
definition with one change parses back to exactly that change, and an echo to no edit.

Each top-level function, and each method of a top-level class, of the libraries below (their installed
source, walked with ast) is shown in a prompt block as autod renders it, then answered as a model does:
the definition with one change (the last comparison flipped, else the last number changed, else a
comment added to its header), fenced with three backticks (what a model writes whatever the prompt
did) and with the prompt's own fence. Docstrings with Markdown fences, nested triple quotes,
f-strings, decorators and tabs are whatever these libraries hold, plus the cases written out below.
"""

from __future__ import annotations

import ast
import bisect
import importlib.util
import io
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

from autod.errors import PlanInvalid
from autod.localize.rank import Piece
from autod.localize.render import block
from autod.planner.codeform import parse_code_reply, quoted_code
from autod.planner.fences import fence_for

LIBRARIES = ("pydantic", "httpx", "yaml", "structlog", "tenacity", "click", "_pytest", "hypothesis")
_FLIP = {"<=": "<", "<": "<=", ">=": ">", ">": ">=", "==": "!=", "!=": "=="}


def definitions(source: str) -> Iterator[tuple[str, int, int]]:
    """(qualname, first line, last line) of each top-level def and each method of a top-level class."""
    defs = ast.FunctionDef | ast.AsyncFunctionDef
    for node in ast.parse(source).body:
        nodes = [(node, "")] if isinstance(node, defs) else []
        if isinstance(node, ast.ClassDef):
            nodes = [(m, node.name + ".") for m in node.body if isinstance(m, defs)]
        for d, prefix in nodes:
            first = min([d.lineno, *(x.lineno for x in d.decorator_list)])
            yield prefix + d.name, first, d.end_lineno or d.lineno


class Source:
    """One file's text, lines and tokens, split once (a definition's are slices of them)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines()
        self.kept = text.splitlines(keepends=True)
        self.tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
        self.rows = [t.start[0] for t in self.tokens]  # in source order

    def tokens_of(self, first: int, last: int) -> list[tokenize.TokenInfo]:
        return self.tokens[bisect.bisect_left(self.rows, first) : bisect.bisect_right(self.rows, last)]


def one_change(src: Source, first: int, last: int) -> str:
    """Lines first..last of `src` with one small change, as a model that fixes them writes them."""
    seg = src.kept[first - 1 : last]
    toks = src.tokens_of(first, last)
    flips = [t for t in toks if t.type == tokenize.OP and t.string in _FLIP]
    numbers = [t for t in toks if t.type == tokenize.NUMBER]
    if flips or numbers:
        t = (flips or numbers)[-1]
        new = _FLIP[t.string] if flips else ("7" if t.string != "7" else "8")
        (row, col), (erow, ecol) = t.start, t.end
        assert row == erow
        i = row - first
        seg[i] = seg[i][:col] + new + seg[i][ecol:]
    else:  # no operator, no number: a comment after the header's colon
        colon = next(t for t in toks if t.type == tokenize.NEWLINE)
        i = colon.start[0] - first
        seg[i] = seg[i][: colon.start[1]] + "  # changed" + seg[i][colon.start[1] :]
    out = "".join(seg)
    return out if out.endswith("\n") else out + "\n"


def check(path: str, src: Source, qualname: str, first: int, last: int) -> list[str]:
    """What went wrong reading this definition back ([] when nothing did)."""
    original = "\n".join(src.lines[first - 1 : last]) + "\n"
    changed = one_change(src, first, last)
    piece = Piece(path=path, start=first, end=last, why="named", key=0.0, symbol=qualname)
    shown, _ = block(piece, src.lines, long=10**9)
    quoted = quoted_code([{"role": "user", "content": f"The bug is here:\n\n{shown}\n"}])
    wrong = []
    for fence in dict.fromkeys(("```", fence_for(original))):  # the prompt's own, when it is another
        def reply(code: str, fence: str = fence) -> str:
            return f"The fix changes one line.\n\n### {path} · {qualname}\n{fence}python\n{code}{fence}\n"

        try:
            plan = parse_code_reply(reply(changed), {path: (qualname,)}, [path], quoted=quoted)
            got = [(e.path, e.symbol, e.replace) for e in plan.edits]
            if got != [(path, qualname, changed)]:
                wrong.append(f"{path}::{qualname} ({fence}): the change read as {got!r:.200}")
            if parse_code_reply(reply(original), {path: (qualname,)}, [path], quoted=quoted).edits:
                wrong.append(f"{path}::{qualname} ({fence}): an echo read as an edit")
        except PlanInvalid as exc:
            wrong.append(f"{path}::{qualname} ({fence}): refused, {exc.reason}")
    return wrong


def library_files(name: str) -> list[Path]:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        return []
    return sorted(Path(spec.origin).parent.rglob("*.py"))


@pytest.mark.slow
@pytest.mark.early
def test_every_definition_of_real_libraries_parses_back_to_its_one_change():
    counts: dict[str, int] = {}
    fenced: dict[str, int] = {}
    wrong: list[str] = []
    for lib in LIBRARIES:
        files = library_files(lib)
        if not files:
            continue
        root = files[0].parent
        for file in files:
            src = Source(file.read_text(encoding="utf-8"))
            path = f"{lib}/{file.relative_to(root).as_posix()}"
            for qualname, first, last in definitions(src.text):
                counts[lib] = counts.get(lib, 0) + 1
                fenced[lib] = fenced.get(lib, 0) + any("```" in x for x in src.lines[first - 1 : last])
                wrong += check(path, src, qualname, first, last)
    total = sum(counts.values())
    misread = len({w.split(" (", 1)[0] for w in wrong})
    per = ", ".join(f"{k} {n} ({fenced[k]})" for k, n in counts.items())
    print(f"\n{total} definitions of {len(counts)} libraries read back, {misread} misread;"
          f" {sum(fenced.values())} hold a fence: {per}")
    assert len(counts) >= 5 and total > 5000
    assert wrong == [], "\n".join(wrong[:20])


CASES = {
    "fenced docstring": 'def f(a, b):\n    """Doc.\n\n    ```pycon\n    >>> f(1, 2)\n    ```\n    """\n'
                        '    return a <= b\n',
    "nested triple quotes": "def f():\n    s = '''a \"\"\" b\n```\n'''\n    return s == 'x'\n",
    "f-string with a fence": 'def f(x):\n    return f"""```{x}\n```""" if x > 1 else ""\n',
    "tabs": 'class C:\n\tdef m(self, x):\n\t\t"""Doc\n```\n\t\t"""\n\t\treturn x >= 2\n',
    "decorated, column-0 docstring lines": 'class C:\n    @property\n    def m(self):\n        """Doc.\n\n'
                                           '```python\nx = 1\n```\n"""\n        return self.n > 0\n',
    "long fence inside": 'def f():\n    """\n    `````\n    ```\n    `````\n    """\n    return 1\n',
}


@pytest.mark.parametrize("source", CASES.values(), ids=CASES.keys())
def test_a_hard_definition_parses_back_to_its_one_change(source):
    found = list(definitions(source))
    assert found
    for qualname, first, last in found:
        assert check("src/mod.py", Source(source), qualname, first, last) == []
