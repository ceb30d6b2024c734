"""The house's shape: no import circle between autod's modules (not even one hidden behind a function-
local import), and no module past 400 lines (one that outgrows it is split along its job boundary).
Which way the imports run is the layers contract's (tests/unit/test_layers.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import autod

PKG = Path(autod.__file__).resolve().parent
MAX_LINES = 400
# Two stores stay over the limit until their shells move onto one SQLite store base, which leaves what
# is theirs well under it. Neither may grow meanwhile, and an entry whose module fits fails the test, so
# the list only ever empties.
SHRINKING: dict[str, int] = {}


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for path in PKG.rglob("*.py"):
        parts = ("autod", *path.relative_to(PKG).with_suffix("").parts)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = path
    return mods


def _resolve(name: str, mods: dict[str, Path]) -> str | None:
    parts = name.split(".")
    while parts:
        if (candidate := ".".join(parts)) in mods:
            return candidate
        parts.pop()
    return None


def _imports(module: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """Every autod module `module` imports, at the top or inside a function; `if TYPE_CHECKING:` blocks
    are not imports at run time and do not count."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for child in node.body for n in ast.walk(child))
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [_resolve(a.name, mods) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            where = ".".join(base + ([node.module] if node.module else []))
            targets = [_resolve(f"{where}.{a.name}", mods) or _resolve(where, mods) for a in node.names]
        else:
            continue
        out.update(t for t in targets if t and t != module)
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {name: _imports(name, path, mods) for name, path in mods.items()}


@pytest.mark.slow
def test_no_import_cycle() -> None:
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_a_function_local_import_is_an_edge(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from autod.plan import Plan\n"
        "def f():\n    from autod.events import Event\n"
    )
    mods = {"autod.m": src, "autod.plan": src, "autod.events": src}
    assert _imports("autod.m", src, mods) == {"autod.events"}


def test_every_module_fits_in_400_lines() -> None:
    over, stale = [], []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        lines = path.read_text(encoding="utf-8").count("\n")
        if lines > SHRINKING.get(rel, MAX_LINES):
            over.append(f"{rel}: {lines} lines")
        elif rel in SHRINKING and lines <= MAX_LINES:
            stale.append(f"{rel}: {lines} lines, it fits: take it out of SHRINKING")
    assert over == []
    assert stale == []
