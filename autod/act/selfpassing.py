"""What a Python edit adds that passes a test's check by itself, decided on the AST: an object whose
comparison, membership or type check answers the same whatever it is asked, or a context manager that
swallows every exception.

A test decides with `==`, `in`, `isinstance` and `with pytest.raises` / a context of the code's own.
The judge hears what each test did (autod.checks.judge_ran), but when the code under test returns an
object whose `__eq__` always says equal, the test's own comparison says passed, truthfully, with the
bug in place; so does a context manager of the code under test whose `__exit__` returns True around
the test's assertion. No fix needs either: a comparison that does not look at what it compares is not
a behaviour anyone tests for. So an edit that *adds* one (compared with the file as it was) is a judge
edit, like those autod.act.reach names:

- a definition of a comparison (`__eq__`, `__ne__`, `__lt__`, `__le__`, `__gt__`, `__ge__`), of
  `__contains__`, `__instancecheck__` or `__subclasscheck__`, by `def` or by a lambda bound to the name
  (in a class body, a dict's key as `type(...)` takes it, `setattr`), that answers without looking at
  what it is asked: the parameter that receives the other operand (the item, the instance) is never
  read, in the body or in a function nested in it, but as both sides of a comparison with itself; or
  a statement of the body's own rebinds it before anything reads it. Reading it any other way, even
  only to raise, counts as looking (`return self.v == other.v`, `if other is None: raise ...`), and a
  body that reads its frame (`locals()`, `vars()`, `eval`, `sys._getframe`) is taken to. A body that
  returns nothing but `NotImplemented` (or nothing at all) answers nothing and is left alone;
- such a dunder every return of which is the same constant, `NotImplemented` aside, whatever it reads:
  the answer is decided before the question (`NotImplemented` hands the question to the other side,
  so `return NotImplemented` for one kind of argument and `return True` for the rest still answers
  True whenever it answers; different constants on different branches are decided by the branches);
- an `__exit__` or `__aexit__` that returns a true constant: every exception inside its `with` is
  swallowed, an `AssertionError` too.

A constant is a literal, or `not`, `and`, `or` and comparisons of literals (`1 == 1`, `2 < 1`),
`bool()` of one, a comparison of an expression with itself (`other == other`, `x is x`), or an `or`
whose first true part is a literal (`True or other`).

Still a tripwire on forms: an answer that reads the operand and discards it (`other; return
self.flag`) is not seen. In real code (30 libraries and CPython's own library: 2,887 definitions of
these dunders) it refuses 174, 164 of them in tests (helpers such as `AlwaysEquals`, `mock.ANY`'s
tests); the other ten are abstract placeholders and type-only equalities (sympy's domains), which a
fix never adds.
"""

from __future__ import annotations

import ast
import operator
from collections import Counter

from autod import pyast

__all__ = ["self_passing_features"]

_ANSWERS = frozenset({"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__contains__",
                      "__instancecheck__", "__subclasscheck__"})
_EXITS = frozenset({"__exit__", "__aexit__"})
_UNDECIDED = object()  # an expression whose value is not known from the source alone
_ORDER = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
          ast.Gt: operator.gt, ast.GtE: operator.ge}
_KIND = {int: "number", bool: "number", float: "number", str: "text"}


def _constant(node: ast.expr | None) -> object:
    """The value of an expression decided by literals alone, or _UNDECIDED."""
    if node is None:
        return None
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and node.id == "NotImplemented":
        return NotImplemented
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _constant(node.operand)
        return _UNDECIDED if inner is _UNDECIDED else not inner
    if isinstance(node, ast.BoolOp):
        for value in node.values:  # as Python evaluates it: the first part that decides
            got = _constant(value)
            if got is _UNDECIDED:
                return _UNDECIDED
            if (bool(got) if isinstance(node.op, ast.Or) else not bool(got)):
                return got
        return got
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "bool" and (
            len(node.args) == 1 and not node.keywords):
        inner = _constant(node.args[0])
        return _UNDECIDED if inner is _UNDECIDED else bool(inner)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and _itself(node) is not None:
        return _itself(node)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right = _constant(node.left), _constant(node.comparators[0])
        compare = _ORDER.get(type(node.ops[0]))
        # two numbers, or two strings (`_UNDECIDED` is neither): what the comparison answers
        kinds = {_KIND.get(type(left)), _KIND.get(type(right))}
        if compare is not None and len(kinds) == 1 and None not in kinds:
            return compare(left, right)
    return _UNDECIDED


_SAME = (ast.Eq, ast.Is, ast.LtE, ast.GtE)  # true of anything compared with itself (NaN aside)
_OTHER = (ast.NotEq, ast.IsNot, ast.Lt, ast.Gt)
# calls that read a frame's locals without naming them: a body making one may look at its argument
_FRAME_READERS = frozenset({"locals", "vars", "eval", "exec", "_getframe", "currentframe", "getframeinfo"})


def _itself(node: ast.Compare) -> bool | None:
    """What a one-operator comparison of an expression with itself answers, or None (not one)."""
    if ast.dump(node.left) != ast.dump(node.comparators[0]):
        return None
    if isinstance(node.ops[0], _SAME):
        return True
    return False if isinstance(node.ops[0], _OTHER) else None


def _looks_at(node: ast.AST, name: str) -> bool:
    """Whether `node` reads `name` (a comparison of an expression with itself aside), or reads its frame."""
    stack: list[ast.AST] = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Compare) and len(n.ops) == 1 and _itself(n) is not None:
            continue
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load):
            return True
        if isinstance(n, ast.Call):
            f = n.func
            called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if called in _FRAME_READERS:
                return True
        stack.extend(ast.iter_child_nodes(n))
    return False


def _asked(args: ast.arguments) -> str | None:
    """The parameter a binary dunder receives the other operand in: the second positional, or the
    `*args` that takes it."""
    positional = [*args.posonlyargs, *args.args]
    if len(positional) >= 2:
        return positional[1].arg
    return args.vararg.arg if args.vararg is not None else None


def _blind(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> bool:
    """Whether a binary dunder's answer is made without looking at the operand it is asked about."""
    name = _asked(fn.args)
    if name is None:
        return False  # it cannot be called with an operand: a TypeError, not an answer
    body: list[ast.AST] = [fn.body] if isinstance(fn, ast.Lambda) else list(fn.body)
    for stmt in body:
        if _looks_at(stmt, name):
            return False
        gone = isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                                    for t in stmt.targets)
        gone = gone or (isinstance(stmt, ast.AnnAssign | ast.Delete) and any(
            isinstance(t, ast.Name) and t.id == name
            for t in (stmt.targets if isinstance(stmt, ast.Delete) else [stmt.target])))
        if gone:
            return True  # rebound before any read: the operand is out of reach from here on
    return True


def _returns(body: list[ast.stmt]) -> list[ast.expr | None]:
    """What each return of a function's own body returns (nested functions' returns are theirs)."""
    out: list[ast.expr | None] = []
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):  # a class's or a lambda's hold none
            continue
        if isinstance(node, ast.Return):
            out.append(node.value)
        stack.extend(ast.iter_child_nodes(node))
    return out


def _decided(name: str, results: list[ast.expr | None], blind: bool = False) -> str | None:
    """Why a dunder `name` returning `results` passes by itself, or None. `blind`: its body never looks
    at the operand it is asked about."""
    values = [v for v in (_constant(r) for r in results) if v is not NotImplemented]
    one = bool(values) and all(v is not _UNDECIDED and type(v) is type(values[0]) and v == values[0]
                               for v in values)  # not `True` on one branch and `False` on another
    if one and name in _ANSWERS:
        return f"{name} that answers {values[0]!r} whatever it is asked"
    if one and name in _EXITS and bool(values[0]):
        return f"{name} that returns {values[0]!r}: every exception in its with-block swallowed"
    if blind and name in _ANSWERS and any(r is not None for r in results) and values:
        return f"{name} that answers without looking at what it is asked"
    return None


class _Finder(ast.NodeVisitor):
    def __init__(self) -> None:
        self.found: Counter[str] = Counter()

    def _judge(self, name: str, results: list[ast.expr | None],
               fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        if name not in _ANSWERS | _EXITS:
            return
        why = _decided(name, results, blind=name in _ANSWERS and _blind(fn))
        if why is not None:
            self.found[why] += 1

    def _defined(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._judge(node.name, _returns(node.body), node)
        self.generic_visit(node)

    visit_FunctionDef = visit_AsyncFunctionDef = _defined

    def _bound(self, name: str | None, value: ast.expr | None) -> None:
        if name is not None and isinstance(value, ast.Lambda):
            self._judge(name, [value.body], value)

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:  # `__eq__ = lambda self, other: True`, `C.__eq__ = ...`
            name = t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else None
            self._bound(name, node.value)
        self.generic_visit(node)

    def visit_Dict(self, node: ast.Dict) -> None:
        for key, value in zip(node.keys, node.values, strict=True):  # `type('N', (int,), {...})`
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                self._bound(key.value, value)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        if isinstance(f, ast.Name) and f.id == "setattr" and len(node.args) == 3:
            name = node.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                self._bound(name.value, node.args[2])
        self.generic_visit(node)


def self_passing_features(source: str) -> Counter[str] | None:
    """What the source defines that passes a test's check by itself, counted; None if it does not parse."""
    try:
        tree = pyast.parse(source)
    except (SyntaxError, ValueError):
        return None
    finder = _Finder()
    finder.visit(tree)
    return finder.found
