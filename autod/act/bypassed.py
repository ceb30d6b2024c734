"""A fix that stops calling the code the failure ran, and writes that code's work inline, is a symptom
patch.

A small model shown a wrapper `def finalize_version(v): return str(Version.parse(v).finalize_version())`
whose test fails, because `Version.finalize_version` is wrong, may rewrite the wrapper to build the
string itself: the test passes, the method keeps its bug and every other caller of it stays broken.
When a candidate's function no longer calls a definition of the workspace (one defined in its module,
or in a workspace module it imports from) that the candidate leaves unchanged, and calls no other
workspace definition in its place, the candidate is a `suspect` fix, as with a constant replaced by a
literal (autod.act.inlined): it does not end the search, wins only when nothing else fixes the
failure, and is then held for a person. Calling another workspace definition instead (`_parse_a` ->
`_parse_b`) is an ordinary change. Pure: file texts in, findings out.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from autod import pyast
from autod.act.inlined import functions, workspace_imports

_Func = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Bypassed:
    name: str  # the definition no longer called
    function: str  # the qualname of the function that stopped calling it
    defined_in: str  # the workspace file that defines it

    def reason(self) -> str:
        return (f"{self.function} no longer calls {self.name} ({self.defined_in}) and does its work "
                f"itself: if {self.name} is wrong, fix it there, so every caller of it is fixed, not "
                "only the one the test calls")


def _calls(fn: _Func) -> Counter[str]:
    """The names a function calls: `f()` -> f, `x.m()` -> m."""
    out: Counter[str] = Counter()
    for n in ast.walk(fn):
        if isinstance(n, ast.Call):
            if isinstance(n.func, ast.Name):
                out[n.func.id] += 1
            elif isinstance(n.func, ast.Attribute):
                out[n.func.attr] += 1
    return out


def _defined(tree: ast.Module) -> set[str]:
    """The last names of the functions and methods a module defines."""
    return {q.rsplit(".", 1)[-1] for q in functions(tree)}


def _workspace_definitions(rel: str, tree: ast.Module, read: Callable[[str], str | None]
                           ) -> dict[str, list[str]]:
    """Definition name -> the workspace files that define one by that name: this module, and the
    workspace modules it imports from (`from .version import Version`)."""
    out: dict[str, list[str]] = {name: [rel] for name in _defined(tree)}
    for _node, cand, module in workspace_imports(rel, tree, read):
        for name in _defined(module):
            if cand not in out.setdefault(name, []):
                out[name].append(cand)
    return out


def bypassed_calls(rel: str, old: str, new: str, read: Callable[[str], str | None],
                   changed: Callable[[str, str], bool] = lambda _path, _name: False) -> list[Bypassed]:
    """Functions of `rel` that, in `new`, no longer call a workspace definition they called in `old`
    and call no workspace definition they did not call before. `changed(path, name)`: whether the
    candidate also rewrites a definition of that name there (then it is fixed, not bypassed)."""
    if not rel.endswith(".py"):
        return []
    try:
        before, after = pyast.parse(old), pyast.parse(new)
    except (SyntaxError, ValueError):
        return []
    defs = _workspace_definitions(rel, before, read)
    found: list[Bypassed] = []
    new_funcs = functions(after)
    for qualname, fn in functions(before).items():
        other = new_funcs.get(qualname)
        if other is None:
            continue
        was, now = _calls(fn), _calls(other)
        if any(n in defs and not was[n] for n in now):
            continue  # another workspace definition called instead: a change of which code runs
        own = qualname.rsplit(".", 1)[-1]
        for name in was:
            if name not in defs or now[name]:
                continue
            # a call of the function's own name is recursion, unless another file defines one by
            # that name (a wrapper `finalize_version` calling `Version.finalize_version`)
            where = [f for f in defs[name] if name != own or f != rel]
            if where and not any(changed(f, name) for f in where):
                found.append(Bypassed(name, qualname, where[0]))
    return found
