"""autod has one notion of a line, Python's (`autod.linebreaks`): proved over generated text and
generated modules with every character `str.splitlines` breaks at and Python does not, under each of
Python's three line endings. A whole-definition edit placed by `ast` line numbers over `splitlines()`
lines deleted a comment and left the old body as dead code in a file with `^L` page breaks."""

from __future__ import annotations

import ast
import io
import random
from pathlib import Path

import pytest

import autod
from autod.act.definition import definition_texts, replace_definition
from autod.act.imports import _insert
from autod.linebreaks import byte_lines, lines_of, split_lines

# every character str.splitlines() ends a line at that Python's tokenizer does not
NOT_PYTHONS = ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
ENDINGS = ["\n", "\r\n", "\r"]


def pythons_lines(text: str) -> list[str]:
    """The lines as Python reads a file: universal newlines, untranslated."""
    return io.StringIO(text, newline="").readlines()


@pytest.mark.parametrize("seed", range(6))
def test_lines_are_pythons_lines_over_generated_text(seed: int):
    rng = random.Random(seed)
    alphabet = ["a", "b", " ", *ENDINGS, *NOT_PYTHONS]
    for _ in range(400):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
        expected = pythons_lines(text)
        assert lines_of(text, keepends=True) == expected, repr(text)
        assert lines_of(text) == [ln.rstrip("\r\n") for ln in expected], repr(text)
        assert "".join(lines_of(text, keepends=True)) == text
        assert split_lines(text) == [*(ln.rstrip("\r\n") for ln in expected),
                                     *([""] if not expected or expected[-1][-1] in "\r\n" else [])]
        if not any(c in text for c in NOT_PYTHONS):
            assert lines_of(text) == text.splitlines()  # where the two rules agree, the same answer
        data = text.encode()
        assert byte_lines(data) == [ln.encode() for ln in lines_of(text)]


def test_nothing_in_autod_splits_text_with_str_splitlines():
    """The invariant, read from every module's tree: the one splitter is the only caller."""
    package = Path(autod.__file__).parent
    callers = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "linebreaks.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "splitlines":
                callers.append(f"{path.relative_to(package)}:{node.lineno}")
    assert callers == [], f"split with autod.linebreaks, Python's lines: {callers}"


def _module(rng: random.Random, ending: str) -> tuple[str, int]:
    """A module of a few functions, with characters Python does not break at in its comments, strings,
    docstrings and page breaks between sections; and how many functions it has."""
    def odd() -> str:
        return rng.choice(NOT_PYTHONS)

    out: list[str] = [f'"""A module{odd()} of sections."""', "decorated = lambda f: f", ""]
    n = rng.randrange(2, 6)
    for i in range(n):
        kind = rng.randrange(5)
        if kind == 0:
            out += ["\x0c", f"# --- section {i}"]  # a GNU page break on a line of its own
        elif kind == 1:
            out += [f"# note {i}{odd()} more of the note{odd()}"]
        elif kind == 2:
            out += [f'TEXT_{i} = "a{odd()}b{odd()}c"']
        elif kind == 3:
            out += [f"def helper_{i}():", f'    """Docs{odd()} with{odd()} breaks."""', "    return 0", ""]
        if rng.random() < 0.3:
            out += ["@decorated"]
        out += [f"def f{i}(a, b):", f"    total = a - b  # old body {i}{odd()}",
                f"    s = 'x{odd()}y'", "    return total", ""]
    text = "\n".join(out) + "\n"
    return text.replace("\n", ending), n


def _span(text: str, name: str) -> tuple[int, int]:
    node = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == name)
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return start, node.end_lineno or node.lineno


@pytest.mark.parametrize("ending", ENDINGS, ids=["lf", "crlf", "cr"])
@pytest.mark.parametrize("seed", range(4))
def test_a_whole_definition_edit_replaces_exactly_the_definition_python_reads(ending: str, seed: int):
    rng = random.Random(seed * 31 + len(ending))
    checked = 0
    for _ in range(25):
        text, n = _module(rng, ending)
        ast.parse(text)  # every generated module is Python
        lines = pythons_lines(text)
        for i in range(n):
            start, end = _span(text, f"f{i}")
            new = f"def f{i}(a, b):\n    return a + b  # fixed {i}\n"
            if lines[start - 1].startswith("@"):
                new = "@decorated\n" + new  # given back whole, with its decorator
            out = replace_definition("src/m.py", text, f"f{i}", new)
            head, tail = "".join(lines[: start - 1]), "".join(lines[end:])
            assert out.startswith(head) and out.endswith(tail), (text, i)
            middle = out[len(head): len(out) - len(tail)]
            assert middle.replace("\r\n", "\n").replace("\r", "\n").strip("\n") == new.strip("\n"), (text, i)
            tree = ast.parse(out)
            fixed = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == f"f{i}"]
            assert len(fixed) == 1 and ast.unparse(fixed[0]) == ast.unparse(ast.parse(new).body[0])
            checked += 1
            # what a prompt is shown as the definition is the definition Python reads
            shown = definition_texts(text, "src/m.py")[f"f{i}"]
            assert shown == "\n".join(ln.rstrip("\r\n") for ln in lines[start - 1: end]), (text, i)
        for node in ast.parse(text).body:  # a helper given back without its docstring keeps it
            if isinstance(node, ast.FunctionDef) and node.name.startswith("helper_"):
                out = replace_definition("src/m.py", text, node.name, f"def {node.name}():\n    return 1\n")
                kept = next(n for n in ast.parse(out).body if isinstance(n, ast.FunctionDef)
                            and n.name == node.name)
                assert ast.get_docstring(kept, clean=False) == ast.get_docstring(node, clean=False)
                assert ast.unparse(kept.body[-1]) == "return 1"
        with_import = _insert(text, ["os"])  # an import a fix needs goes after the module's docstring
        tree = ast.parse(with_import)
        assert isinstance(tree.body[1], ast.Import) and tree.body[1].lineno == 2, with_import
    assert checked >= 50
