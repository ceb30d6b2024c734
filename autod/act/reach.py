"""What a Python edit introduces that reaches into the test runner judging it, decided on the AST.

Code under test runs inside the test runner's process, so it can rewrite the verdict without touching
a test: import pytest and register a plugin whose hook turns every report into "passed", patch
`sys.modules`, walk up the stack frames into the runner, end the process with status 0 before the
failure is reported, or hide any of that behind exec/eval. A real fix needs none of these, so an
edit that *adds* one (compared with the file as it was: what was already there is the project's
own business) is a judge edit: refused, or with `allow_judge_edits` it waits for approval.

This is a tripwire on direct forms, not a proof: the docs (SECURITY.md, limits) say what it misses.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Callable

from autod import pyast
from autod.act.selfpassing import self_passing_features
from autod.act.worldreach import names_a_test_module, world_features

__all__ = ["introduced", "reaching", "runner_features"]

# Modules of the test runner and its plugin machinery.
RUNNER_MODULES = frozenset({"pytest", "_pytest", "pluggy", "py", "iniconfig", "xdist"})
# Modules whose only business in code under test would be the interpreter or the process around it.
MACHINERY_MODULES = frozenset({"builtins", "__builtin__", "ctypes", "_ctypes", "cffi", "gc", "posix"})
# sys attributes that reach other modules, import machinery, tracing or frames.
SYS_ATTRS = frozenset(
    {
        "modules",
        "meta_path",
        "path_hooks",
        "path_importer_cache",
        "settrace",
        "setprofile",
        "_getframe",
        "_current_frames",
        "addaudithook",
        "monitoring",
        "excepthook",
    }
)
# os calls that end or replace the process: a status the runner never chose.
OS_EXITS = frozenset({"_exit", "abort", "kill", "killpg"})
# Attribute names that only mean one thing: a frame walked into, or pytest's report machinery.
TELLTALE_ATTRS = frozenset(
    {
        "f_back",
        "f_globals",
        "f_locals",
        "f_builtins",
        "tb_frame",
        "gi_frame",
        "cr_frame",
        "ag_frame",
        "TestReport",
        "CollectReport",
        "BaseReport",
        "longrepr",
        "longreprtext",
        "pluginmanager",
        "hookimpl",
        "hookspec",
        "__globals__",  # any function's module namespace: f.__globals__["sys"].modules
        "__subclasses__",  # every class in the process: object.__subclasses__()
    }
)
# Standard-library calls that hand out the callers' frames (the runner's among them) or a tracer over
# them: code under test never needs one to be fixed, and each is a way to the runner's objects.
FRAME_GETTERS = {
    "inspect": frozenset({"currentframe", "stack", "trace", "getouterframes", "getinnerframes",
                          "getargvalues", "getframeinfo"}),
    "traceback": frozenset({"walk_stack", "walk_tb"}),
    "logging": frozenset({"currentframe"}),
    "threading": frozenset({"settrace", "setprofile", "settrace_all_threads", "setprofile_all_threads"}),
}
DYNAMIC_CALLS = frozenset({"exec", "eval", "compile", "__import__"})
_RUNNER_TEXT = re.compile(r"(?i)\b_?pytest(?:\d+)?\b|\bpytest_\w+|\bpluggy\b|PYTEST_[A-Z_]+")


def _root(name: str) -> str:
    return name.split(".")[0]


class _Finder(ast.NodeVisitor):
    def __init__(self) -> None:
        self.found: Counter[str] = Counter()
        self.aliases: dict[str, str] = {}  # local name -> module (or module.attr) it is bound to
        self.prose: set[int] = set()  # ids of string statements (docstrings): words, not code

    def _module_of(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id if node.id in ("sys", "os", "importlib") else None)
        return None

    def _machinery(self, node: ast.expr) -> bool:
        """An object that is (or is fetched from) the interpreter's or the runner's machinery."""
        if isinstance(node, ast.Call):
            return True  # __import__("sys"), importlib.import_module(...), vars(...)
        if isinstance(node, ast.Name):
            root = _root(self.aliases.get(node.id, node.id))
            return root in RUNNER_MODULES | MACHINERY_MODULES | {"sys", "os", "importlib", "inspect"}
        return False

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            root = _root(a.name)
            self.aliases[a.asname or root] = a.name if a.asname else root
            if root in RUNNER_MODULES or root in MACHINERY_MODULES or root.startswith("pytest_"):
                self.found[f"import {a.name}"] += 1

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = node.module or ""
        root = _root(mod)
        for a in node.names:
            self.aliases[a.asname or a.name] = f"{mod}.{a.name}"
        if root in RUNNER_MODULES or root in MACHINERY_MODULES or root.startswith("pytest_"):
            self.found[f"from {mod} import ..."] += 1
        elif root == "sys" and any(a.name in SYS_ATTRS for a in node.names):
            self.found[f"from sys import {', '.join(a.name for a in node.names if a.name in SYS_ATTRS)}"] += 1
        elif root == "os" and any(a.name in OS_EXITS or a.name.startswith("exec") for a in node.names):
            self.found["from os import (process exit/exec)"] += 1
        elif root == "importlib" and any(a.name == "import_module" for a in node.names):
            self.found["from importlib import import_module"] += 1
        elif mod in FRAME_GETTERS and any(a.name in FRAME_GETTERS[mod] for a in node.names):
            self.found[f"from {mod} import (the callers' frames)"] += 1
        self.generic_visit(node)

    def _def(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name.startswith("pytest_"):
            self.found[f"def {node.name} (a pytest hook)"] += 1
        self.generic_visit(node)

    visit_FunctionDef = _def
    visit_AsyncFunctionDef = _def

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "pytest_plugins":
            self.found["pytest_plugins"] += 1
        elif node.id in ("__builtins__",):
            self.found["__builtins__"] += 1
        target = self.aliases.get(node.id, "")
        if target.startswith("sys.") and target[4:] in SYS_ATTRS:
            self.found[target] += 1
        elif target.startswith("os.") and (target[3:] in OS_EXITS or target[3:].startswith("exec")):
            self.found[f"{target}()"] += 1

    def visit_Attribute(self, node: ast.Attribute) -> None:
        mod = self._module_of(node.value)
        if mod == "sys" and node.attr in SYS_ATTRS:
            self.found[f"sys.{node.attr}"] += 1
        elif mod == "os" and (node.attr in OS_EXITS or node.attr.startswith("exec")):
            self.found[f"os.{node.attr}()"] += 1
        elif mod == "importlib" and node.attr in ("import_module", "__import__", "reload"):
            self.found[f"importlib.{node.attr}()"] += 1
        elif node.attr in TELLTALE_ATTRS:
            self.found[f".{node.attr}"] += 1
        elif isinstance(node.value, ast.Name) and node.attr in FRAME_GETTERS.get(
                self.aliases.get(node.value.id, ""), ()):
            self.found[f"{self.aliases[node.value.id]}.{node.attr}()"] += 1
        elif node.attr == "__dict__" and isinstance(node.value, ast.Name) and self._machinery(node.value):
            # sys.__dict__["modules"], os.__dict__["_exit"]: the same reach, spelled as a lookup
            self.found[f"{_root(self.aliases.get(node.value.id, node.value.id))}.__dict__"] += 1
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        if isinstance(f, ast.Name) and f.id in DYNAMIC_CALLS:
            self.found[f"{f.id}()"] += 1
        elif isinstance(f, ast.Name) and f.id in ("getattr", "setattr", "delattr") and len(node.args) >= 2:
            name = node.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                if name.value in SYS_ATTRS | TELLTALE_ATTRS | OS_EXITS or name.value.startswith("exec"):
                    self.found[f"{f.id}(..., {name.value!r})"] += 1
            elif self._machinery(node.args[0]):  # a computed name on sys, os, builtins, the runner...
                self.found[f"{f.id}() with a computed name"] += 1
        elif (isinstance(f, ast.Name) and f.id == "vars" and len(node.args) == 1
              and isinstance(node.args[0], ast.Name) and self._machinery(node.args[0])):
            self.found["vars() of the interpreter's or the runner's modules"] += 1  # vars(sys)["modules"]
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if id(node) in self.prose:
            return
        if isinstance(node.value, str) and _RUNNER_TEXT.search(node.value):
            self.found["a string naming the test runner"] += 1

    def _decorators(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        for d in node.decorator_list:
            target = d.func if isinstance(d, ast.Call) else d
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if name in ("hookimpl", "hookspec"):
                self.found[f"@{name}"] += 1


def reaching(value: str) -> bool:
    """Whether a string, read as a name (dotted or not), names something that reaches the runner: a
    module of the runner, the interpreter or the tests, or one of the attributes and calls above."""
    if _RUNNER_TEXT.search(value):
        return True
    names = SYS_ATTRS | TELLTALE_ATTRS | OS_EXITS | DYNAMIC_CALLS | RUNNER_MODULES | MACHINERY_MODULES
    for part in value.split("."):
        if part in names or (part.startswith("exec") and part[4:].isalpha()) or names_a_test_module(part):
            return True
    return False


def runner_features(source: str, judging: Callable[[str], bool] | None = None,
                    world: bool = True) -> Counter[str] | None:
    """What the source does that reaches into a test runner or (`world`) outside its own module
    (autod.act.worldreach) or passes a test's check by itself (autod.act.selfpassing), counted; None
    if it does not parse. `judging`: whether a module name is
    one a judged file of the workspace provides."""
    try:
        tree = pyast.parse(source)
    except (SyntaxError, ValueError):
        return None
    finder = _Finder()
    for node in ast.walk(tree):  # aliases first, wherever the import sits
        if isinstance(node, ast.Import | ast.ImportFrom):
            for a in node.names:
                key = a.asname or (_root(a.name) if isinstance(node, ast.Import) else a.name)
                if isinstance(node, ast.Import):
                    finder.aliases[key] = a.name if a.asname else _root(a.name)
                else:
                    finder.aliases[key] = f"{node.module or ''}.{a.name}"
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            finder._decorators(node)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            finder.prose.add(id(node.value))
    finder.visit(tree)
    if not world:
        return finder.found
    return finder.found + (world_features(source, reaching, judging) or Counter()) + (
        self_passing_features(source) or Counter())


def introduced(old: str | None, new: str, judging: Callable[[str], bool] | None = None,
               world: bool = True) -> list[str]:
    """The runner-reaching features `new` has more of than `old` (None: a new file), sorted. `world`:
    with what reaches outside the module (tests of the judge itself leave it out, to show the judge
    holds where the tripwire says nothing)."""
    after = runner_features(new, judging, world)
    if after is None:
        return []  # not Python that parses: the syntax rule refuses it elsewhere
    before = runner_features(old, judging, world) if old is not None else Counter()
    added = after - (before or Counter())
    return sorted(added)
