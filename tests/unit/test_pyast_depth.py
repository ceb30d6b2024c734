"""Every tree the one parse (autod.pyast) returns can be read by every recursive reader autod has, with
a caller's stack already deep; source nested deeper is a SyntaxError, never a RecursionError or a
MemoryError. Generated: every shape of nesting Python's grammar allows, at sizes around the limit and
far past it."""

from __future__ import annotations

import ast

import pytest

from autod import pyast
from autod.act.reach import runner_features

SHAPES = {
    "binop chain": lambda n: "x = " + "+".join(["a"] * n),
    "power chain": lambda n: "x = " + "**".join(["a"] * n),
    "not chain": lambda n: "x = " + "not " * n + "a",
    "unary minus": lambda n: "x = " + "-" * n + "1",
    "attribute chain": lambda n: "x = a" + ".b" * n,
    "call chain": lambda n: "x = f" + "()" * n,
    "subscript chain": lambda n: "x = a" + "[0]" * n,
    "lambda chain": lambda n: "x = " + "lambda: " * n + "1",
    "conditional chain": lambda n: "x = " + "1 if c else " * n + "1",
    "await chain": lambda n: "async def f():\n    x = " + "await (" * n + "a" + ")" * n,
    "nested lists": lambda n: "x = " + "[" * n + "]" * n,
    "nested calls": lambda n: "x = " + "f(" * n + ")" * n,
    "nested dicts": lambda n: "x = " + "{1: " * n + "1" + "}" * n,
    "a class base": lambda n: "class C(a" + ".b" * n + "):\n    pass",
    "a return in a def": lambda n: "def f():\n    return " + "+".join(["a"] * n),
    "nested ifs": lambda n: "".join("    " * i + "if a:\n" for i in range(min(n, 98))) + "    " * min(n, 98)
    + "pass",
    "boolean chain": lambda n: "x = " + " and ".join(["a"] * n),
    "comparison chain": lambda n: "x = " + "<".join(["a"] * n),
}
SIZES = (10, 60, 99, 100, 101, 150, 201, 1_000, 20_000)
FLAT = {"boolean chain", "comparison chain", "nested ifs"}  # one node holds all; indentation stops at 100


def _read_every_way(tree: ast.AST) -> None:
    ast.dump(tree)
    ast.unparse(tree)
    runner_features(ast.unparse(tree))
    ast.NodeVisitor().visit(tree)


def _with_a_deep_stack(depth: int, fn, *args):
    """Run `fn` with `depth` frames of this function below it (a daemon's stack, a thread's)."""
    if depth:
        return _with_a_deep_stack(depth - 1, fn, *args)
    return fn(*args)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_tree_the_parse_returns_is_readable_and_what_it_refuses_is_a_syntax_error(shape: str) -> None:
    for n in SIZES:
        source = SHAPES[shape](n) + "\n"
        try:
            tree = pyast.parse(source)
        except SyntaxError:
            assert n > 60, (shape, n)  # what real code nests is read
            continue
        assert n < 1_000 or shape in FLAT, (shape, n)  # what no reader could is refused
        _with_a_deep_stack(100, _read_every_way, tree)
