"""What a Python edit adds that reaches outside its own module, decided on the AST: the tests' modules,
other modules' attributes, and names spelt in pieces.

The judge runs in the test process (autod.checks.judge_ran), so code under test that reaches the values
a test compares against can make it pass with the bug in place, however the judge looks: mutate the
test module's expected dict, rebind a conftest's or a `tests/` helper's value, patch `math.isclose` or
`pytest.approx` for one use and put it back, walk frames by an attribute name assembled at run time
(`attrgetter('tb_' + 'frame')`). A fix changes the behaviour of the code under test; it never needs to
import the tests, assign another module's attributes, or spell a name in pieces. So an edit that *adds*
one of these (compared with the file as it was) is a judge edit, like those autod.act.reach names:

- an import of a module the tests are made of: by pytest's naming (`test_*`, `*_test`, `conftest`, a
  `tests`/`test`/`testing` package) or, given the workspace, any module a judged file provides;
- an assignment, augmented assignment, deletion or `setattr` whose target is an attribute of an
  imported module, or of anything reached through one (`math.isclose = f`, `unittest.TestCase.x = f`,
  `os.path.join = f`);
- a string built only from constants (`'f_' + 'locals'`, `''.join([...])`, `'...'[::-1]`, an f-string
  of constants), folded and read as the constant it is: a folded name is judged like a written one.

The lists in autod.act.reach say which names reach the runner; this module says how a name may be
spelt. Still a tripwire on forms, not a proof: SECURITY.md says what it misses.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable

from autod import pyast

__all__ = ["names_a_test_module", "world_features"]

_TEST_PACKAGES = frozenset({"tests", "test", "testing"})
_MAX_FOLD = 10_000  # characters a folded string may reach (a constant built by repetition is not folded)


def names_a_test_module(dotted: str) -> bool:
    """Whether a module name is one pytest's naming makes a test module, a conftest or a test package."""
    for part in dotted.split("."):
        if part == "conftest" or part.startswith("test_") or part.endswith("_test") or part in _TEST_PACKAGES:
            return True
    return False


def fold(node: ast.expr) -> str | None:
    """The string an expression built only from string constants evaluates to, or None."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = fold(node.left)
        right = fold(node.right) if left is not None else None
        if left is None or right is None or len(left) + len(right) > _MAX_FOLD:
            return None
        return left + right
    if isinstance(node, ast.JoinedStr):
        parts = [fold(v) if not isinstance(v, ast.FormattedValue) else None for v in node.values]
        return None if None in parts else "".join(p for p in parts if p is not None)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        base = fold(node.value)
        s = node.slice
        parts = (s.lower, s.upper, s.step)
        bounds = [_int(b) if b is not None else None for b in parts]
        if base is None or any(b is not None and n is None for b, n in zip(parts, bounds, strict=True)):
            return None
        if bounds[2] == 0:
            return None
        return base[slice(*bounds)]
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join"
            and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.List | ast.Tuple)):
        sep = fold(node.func.value)
        parts = [fold(e) for e in node.args[0].elts]
        if sep is None or None in parts:
            return None
        joined = sep.join(p for p in parts if p is not None)
        return joined if len(joined) <= _MAX_FOLD else None
    return None


def _int(node: ast.expr) -> int | None:
    """An integer constant, signed or not, or None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _int(node.operand)
        return -inner if inner is not None else None
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


class _World(ast.NodeVisitor):
    def __init__(self, judging: Callable[[str], bool], reaching: Callable[[str], bool]) -> None:
        self.found: Counter[str] = Counter()
        self.modules: set[str] = set()  # local names bound to an imported module (or a name from one)
        self.judging, self.reaching = judging, reaching

    def _imported(self, name: str) -> None:
        if names_a_test_module(name) or self.judging(name):
            self.found[f"import of the tests' module {name}"] += 1

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self._imported(a.name)
            self.modules.add(a.asname or a.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = node.module or ""
        if node.level == 0:
            self._imported(mod)
            for a in node.names:
                if names_a_test_module(a.name):
                    self._imported(f"{mod}.{a.name}")
        for a in node.names:
            self.modules.add(a.asname or a.name)

    def _rooted(self, node: ast.expr) -> str | None:
        """The imported name an attribute chain starts from (`math` of `math.isclose`), or None."""
        while isinstance(node, ast.Attribute | ast.Subscript):
            node = node.value
        return node.id if isinstance(node, ast.Name) and node.id in self.modules else None

    def _target(self, target: ast.expr) -> None:
        if isinstance(target, ast.Attribute):
            root = self._rooted(target.value)
            if root is not None:
                self.found[f"assigns {root}...{target.attr}: another module's attribute"] += 1
        elif isinstance(target, ast.Tuple | ast.List):
            for t in target.elts:
                self._target(t)

    def _assigning(self, node: ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete) -> None:
        targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
        for t in targets:
            self._target(t)
        self.generic_visit(node)

    visit_Assign = visit_AugAssign = visit_AnnAssign = visit_Delete = _assigning

    def visit_Call(self, node: ast.Call) -> None:
        value = fold(node)  # `''.join([...])` of constants
        if value is not None and self.reaching(value):
            self.found[f"a name spelt in pieces: {value[:60]!r}"] += 1
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if name in ("setattr", "delattr") and node.args and (
                self._rooted(node.args[0]) is not None or (isinstance(node.args[0], ast.Name)
                and node.args[0].id in self.modules)):
            self.found[f"{name}() on another module's object"] += 1
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        self._folded(node)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        self._folded(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self._folded(node)

    def _folded(self, node: ast.expr) -> None:
        """Judge a string built from constants as the constant it is; anything else, its parts. A chain
        of `+` is folded once per node it holds (a long chain of non-strings stops at its first part)."""
        value = fold(node)
        if value is None:
            self.generic_visit(node)
        elif self.reaching(value):
            self.found[f"a name spelt in pieces: {value[:60]!r}"] += 1


def world_features(source: str, reaching: Callable[[str], bool],
                   judging: Callable[[str], bool] | None = None) -> Counter[str] | None:
    """What the source does that reaches outside its module, counted; None if it does not parse.
    `reaching`: whether a string names something that reaches the runner (autod.act.reach's lists);
    `judging`: whether a module name is one a judged file of the workspace provides."""
    try:
        tree = pyast.parse(source)
    except (SyntaxError, ValueError):
        return None
    finder = _World(judging or (lambda name: False), reaching)
    finder.visit(tree)
    return finder.found
