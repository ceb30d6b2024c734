"""What a Python edit adds that reaches outside its own module, decided on the AST: the tests' modules,
other modules' state, and names spelt in pieces.

The judge runs in the test process (autod.checks.judge_ran), so code under test that reaches the values
a test compares against can make it pass with the bug in place, however the judge looks: mutate the
test module's expected dict, rebind a conftest's or a `tests/` helper's value, patch `math.isclose` or
`pytest.approx` for one use and put it back, walk frames by an attribute name assembled at run time
(`attrgetter('tb_' + 'frame')`). A fix changes the behaviour of the code under test; it never needs to
import the tests, change another module's state, or spell a name in pieces. So an edit that *adds*
one of these (compared with the file as it was) is a judge edit, like those autod.act.reach names:

- an import of a module the tests are made of: by pytest's naming (`test_*`, `*_test`, `conftest`, a
  `tests`/`test`/`testing` package) or, given the workspace, any module a judged file provides;
- a change to state outside the module: an assignment, augmented assignment or deletion of an
  attribute or an item, a `setattr`/`delattr`, or a call of a container's changing method (`update`,
  `append`, `__setitem__`, ...), whose object is reached from another module's state. The chain from
  the changed object back to its root is followed through attributes, items, getters called without
  arguments (`get().x`: what `get` returns), `vars`/`getattr`/`type` (their first argument's state)
  and aliases, scope by scope (`m = math`; a first pass also finds those bound below their use, the
  attributes given outside state, `self.m = math`, and the items of containers given it,
  `ms = [math]`); the root is an imported name, a builtin function (`len.__self__` is the builtins
  module), `__builtins__` or a module `import_module` hands back (`math.isclose = f`,
  `math.__dict__['isclose'] = f`, `len.__self__.sorted = f`, `vars(m).update(x=f)`,
  `object.__setattr__(m, 'x', f)`). What a fix does to its own objects (`self`, its arguments, its
  locals, `super()`, `globals()`) and a module's own functions (`os.remove(p)`) are not followed;
- a string built only from constants (`'f_' + 'locals'`, `''.join([...])`, `'...'[::-1]`, an f-string
  of constants), folded and read as the constant it is: a folded name is judged like a written one.

The lists in autod.act.reach say which names reach the runner; this module says how a name may be
spelt. Still a tripwire on forms, not a proof: SECURITY.md says what it misses.
"""

from __future__ import annotations

import ast
import builtins
import types
from collections import Counter
from collections.abc import Callable

from autod import pyast

__all__ = ["names_a_test_module", "world_features"]

_TEST_PACKAGES = frozenset({"tests", "test", "testing"})
_MAX_FOLD = 10_000  # characters a folded string may reach (a constant built by repetition is not folded)
# builtin functions: each one's `__self__` is the builtins module (the namespace calls of their own
# functions), so a change reached from one is a change to every module's builtins
_BUILTIN_FUNCTIONS = frozenset(
    n for n, v in vars(builtins).items() if isinstance(v, types.BuiltinFunctionType)
) - {"globals", "locals", "vars", "getattr", "setattr", "delattr"}  # own namespace, or followed as views
_BUILTIN_CLASSES = frozenset(n for n, v in vars(builtins).items() if isinstance(v, type))
# calls that hand back their first argument's own state: followed into that argument
_VIEWS = frozenset({"vars", "getattr", "type"})
# calls that hand back a module by its name
_MODULE_BY_NAME = frozenset({"import_module", "__import__"})
# methods that change the object they are called on (or, called on a builtin class, their first argument)
_CHANGING = frozenset({
    "update", "setdefault", "pop", "popitem", "clear", "append", "extend", "insert", "remove", "add",
    "discard", "sort", "reverse", "__setitem__", "__delitem__", "__setattr__", "__delattr__", "__set__",
    "__delete__", "__iadd__", "__ior__", "difference_update", "intersection_update",
    "symmetric_difference_update", "appendleft", "extendleft", "move_to_end",
})
_BUILTINS_KEY = "__builtins__"


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
    def __init__(self, judging: Callable[[str], bool], reaching: Callable[[str], bool],
                 bound: frozenset[str] = frozenset(), ever: _World | None = None) -> None:
        self.found: Counter[str] = Counter()
        self.modules: set[str] = set()  # module-level names bound to outside state (imports, aliases)
        # what a first pass over the whole module found (names bound to outside state at its top at any
        # point; attribute names assigned outside state, `self.m = math`): a function may run after any
        # of it, so in a function these count wherever they appear
        self.ever_modules: set[str] = set(ever.ever_modules) if ever else set()
        self.stashed: set[str] = set(ever.stashed) if ever else set()
        # names given a container that holds outside state (`ms = [math]`): its items are outside, the
        # container itself is not (`ms.append(x)` changes a list of the fix's own)
        self.holders: set[str] = set(ever.holders) if ever else set()
        self.imports: set[str] = set()  # names bound by `import m`: `m.f()` calls a function, changes nothing
        self.scopes: list[tuple[frozenset[str], set[str]]] = []  # functions': (their names, outside ones)
        self.judging, self.reaching = judging, reaching
        self.bound = bound  # the names the module binds at its top: a builtin's name it binds is its own

    def _imported(self, name: str) -> None:
        if names_a_test_module(name) or self.judging(name):
            self.found[f"import of the tests' module {name}"] += 1

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self._imported(a.name)
            local = a.asname or a.name.split(".")[0]
            self._alias(local, True)
            self.imports.add(local)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = node.module or ""
        if node.level == 0:
            self._imported(mod)
            for a in node.names:
                if names_a_test_module(a.name):
                    self._imported(f"{mod}.{a.name}")
        for a in node.names:
            self._alias(a.asname or a.name, True)

    def _alias(self, name: str, outside: bool) -> None:
        """Bind `name` in the scope it lives in: to outside state, or (rebound) to something else."""
        held = next((al for loc, al in reversed(self.scopes) if name in loc), self.modules)
        if outside:
            held.add(name)
            if held is self.modules:
                self.ever_modules.add(name)
        else:
            held.discard(name)

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        self.scopes.append((_scope_names(node.body if isinstance(node.body, list) else [node.body],
                                         node.args), set()))
        self.generic_visit(node)
        self.scopes.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _scoped

    def _world(self, name: str) -> bool:
        for loc, al in reversed(self.scopes):
            if name in loc:  # a function's own name: outside only if it was bound to outside state
                return name in al
        if name in self.modules or name == _BUILTINS_KEY or (self.scopes and name in self.ever_modules):
            return True
        return name in _BUILTIN_FUNCTIONS and name not in self.bound

    def _rooted(self, node: ast.expr, calls: bool = True) -> str | None:
        """The outside state an object is reached from (`math` of `math.__dict__['isclose']`, `len` of
        `vars(len.__self__)`), or None: its chain is followed through attributes, items, the views and,
        with `calls`, what a call without arguments returns (a getter's: the called function's root; a
        call with arguments makes something of them, `cast(T, x)`). Bounded by the tree's depth."""
        while True:
            if isinstance(node, ast.Attribute):
                if node.attr == _BUILTINS_KEY or node.attr in self.stashed:
                    return node.attr
                node = node.value
            elif isinstance(node, ast.Starred):
                node = node.value
            elif isinstance(node, ast.Subscript):
                if fold(node.slice) == _BUILTINS_KEY:
                    return _BUILTINS_KEY
                if self._holds(node.value):
                    return "an item of outside state"
                node = node.value
            elif isinstance(node, ast.Call):
                name = _called(node)
                if name in _MODULE_BY_NAME:
                    return name
                if name in _VIEWS and node.args and name not in self.bound:
                    node = node.args[0]
                elif calls and not node.args and not node.keywords:
                    node = node.func
                else:
                    return None
            elif isinstance(node, ast.Name):
                return node.id if self._world(node.id) else None
            else:
                return None

    def _holds(self, node: ast.expr) -> bool:
        """Whether `node` is a container holding outside state: a literal with such an item, or a name
        given one."""
        if isinstance(node, ast.Name):
            return node.id in self.holders
        if isinstance(node, ast.List | ast.Tuple | ast.Set | ast.Dict):
            items = node.values if isinstance(node, ast.Dict) else node.elts
            return any(self._rooted(e, calls=False) is not None or self._holds(e) for e in items)
        return False

    def _target(self, target: ast.expr) -> None:
        if isinstance(target, ast.Attribute | ast.Subscript):
            root = self._rooted(target.value)
            if root is not None:
                what = f".{target.attr}" if isinstance(target, ast.Attribute) else "[...]"
                self.found[f"assigns {root}...{what}: another module's state"] += 1
        elif isinstance(target, ast.Tuple | ast.List | ast.Starred):
            for t in target.elts if not isinstance(target, ast.Starred) else [target.value]:
                self._target(t)

    def _assigning(self, node: ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete) -> None:
        targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
        for t in targets:
            self._target(t)
        value = getattr(node, "value", None)
        if isinstance(node, ast.Delete) or (value is not None and not isinstance(node, ast.AugAssign)):
            outside = value is not None and self._rooted(value, calls=False) is not None
            for t in targets:  # an alias of outside state (`m = math`, `b = len.__self__`), or rebound
                self._bind(t, outside)
                if isinstance(t, ast.Name) and value is not None and self._holds(value):
                    self.holders.add(t.id)
        self.generic_visit(node)

    def _bind(self, target: ast.expr, outside: bool) -> None:
        """A name (or names) bound to outside state or to something else; an attribute that is given
        outside state is remembered by its name (`self.m = math`: `self.m.isclose = f` is outside)."""
        if isinstance(target, ast.Name):
            self._alias(target.id, outside)
        elif isinstance(target, ast.Attribute) and outside:
            self.stashed.add(target.attr)
        elif isinstance(target, ast.Tuple | ast.List):
            for t in target.elts:
                self._bind(t, outside)
        elif isinstance(target, ast.Starred):
            self._bind(target.value, outside)

    def _looped(self, node: ast.For | ast.AsyncFor | ast.comprehension) -> None:
        held = self._rooted(node.iter, calls=False) is not None or self._holds(node.iter)
        self._bind(node.target, held)  # `for m in (math,)`
        self.generic_visit(node)

    visit_For = visit_AsyncFor = visit_comprehension = _looped

    def _comprehended(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> None:
        for g in node.generators:  # its loops bind before its element runs
            self.visit(g)
        for part in (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,):
            self.visit(part)

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehended

    visit_Assign = visit_AugAssign = visit_AnnAssign = visit_Delete = _assigning

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._alias(node.target.id, self._rooted(node.value, calls=False) is not None)
        self.generic_visit(node)

    def _changing(self, node: ast.Call) -> None:
        """A call that changes an object reached from outside state: `setattr`/`delattr` of it, one of
        its changing methods, or such a method of a builtin class called on it (`object.__setattr__`)."""
        f, name = node.func, _called(node)
        if name in ("setattr", "delattr") and isinstance(f, ast.Name) and name not in self.bound:
            changed = node.args[0] if node.args else None
        elif name in _CHANGING and isinstance(f, ast.Attribute):
            on = f.value.id if isinstance(f.value, ast.Name) else None
            if on is not None and on in self.imports and name not in ("__setattr__", "__delattr__"):
                return  # a module's function (`os.remove(p)`, `operator.add(a, b)`)
            on_class = on in _BUILTIN_CLASSES and on not in self.bound
            changed = (node.args[0] if node.args else None) if on_class else f.value
        else:
            return
        root = self._rooted(changed) if changed is not None else None
        if root is not None:
            self.found[f"{name}() on {root}...: another module's state"] += 1

    def visit_Call(self, node: ast.Call) -> None:
        value = fold(node)  # `''.join([...])` of constants
        if value is not None and self.reaching(value):
            self.found[f"a name spelt in pieces: {value[:60]!r}"] += 1
        self._changing(node)
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


def _called(node: ast.Call) -> str:
    """The name a call calls by (`f` of `f()` and of `m.f()`), or ''."""
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _scope_names(body: list[ast.stmt] | list[ast.expr], args: ast.arguments | None) -> frozenset[str]:
    """The names a scope binds: its arguments and what its own statements bind (assigned, defined,
    imported, caught, matched), not what nested functions' bodies bind; less those it declares global
    or nonlocal."""
    out: set[str] = set()
    declared: set[str] = set()
    if args is not None:
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        out.update(a.arg for a in every if a is not None)
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Global | ast.Nonlocal):
            declared.update(node.names)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            out.add(node.id)
        elif isinstance(node, ast.alias):
            out.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            out.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            out.add(node.rest)
        stack.extend(ast.iter_child_nodes(node))
    return frozenset(out - declared)


def world_features(source: str, reaching: Callable[[str], bool],
                   judging: Callable[[str], bool] | None = None) -> Counter[str] | None:
    """What the source does that reaches outside its module, counted; None if it does not parse.
    `reaching`: whether a string names something that reaches the runner (autod.act.reach's lists);
    `judging`: whether a module name is one a judged file of the workspace provides."""
    try:
        tree = pyast.parse(source)
    except (SyntaxError, ValueError):
        return None
    judge, bound = judging or (lambda name: False), _scope_names(tree.body, None)
    first = _World(judge, reaching, bound)
    first.visit(tree)  # what the whole module binds to outside state, wherever it does it
    finder = _World(judge, reaching, bound, ever=first)
    finder.visit(tree)
    return finder.found
