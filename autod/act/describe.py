"""What a fix did, read from its diff, not from the planner's prose.

Commit messages, webhooks and the reflection record lead with this line: the definitions the change
rewrote (Python: by qualified name; other files: the file) and the failing tests it made pass. The
model's summary, when shown, is marked as its own words.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence

from autod import pyast
from autod.act.edits import FileChange

_MAX_NAMES = 8


def _definitions(source: str) -> dict[str, str] | None:
    """Qualified name -> source of every function and class (nested ones too); None: not Python."""
    try:
        tree = pyast.parse(source)
    except (SyntaxError, ValueError):
        return None
    out: dict[str, str] = {}

    def walk(nodes: Iterable[ast.stmt], prefix: str) -> None:
        for node in nodes:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{node.name}"
                out[name] = ast.get_source_segment(source, node) or ""
                walk(node.body, f"{name}.")

    walk(tree.body, "")
    return out


def changed_definitions(old: str | None, new: str) -> list[str]:
    """The innermost definitions whose text differs (added ones too); [] when only module code changed."""
    before, after = _definitions(old or ""), _definitions(new)
    if before is None or after is None:
        return []
    changed = [n for n, src in after.items() if before.get(n) != src]
    changed += [n for n in before if n not in after]
    # a method changed: name the method, not also its class
    return [n for n in changed if not any(o.startswith(n + ".") for o in changed)]


def made_pass(payload: dict[str, object], status: str) -> list[str]:
    """The tests a kept fix made pass: every test the failure named, when its checks all pass."""
    tests = payload.get("failing_tests")
    return [str(t) for t in tests] if status == "fixed" and isinstance(tests, list) else []


def describe_fix(changes: Sequence[FileChange], made_pass: Sequence[str] = ()) -> str:
    """One line: `rewrites add() in src/calc.py; makes tests/test_calc.py::test_add pass`."""
    parts = []
    for c in changes:
        try:
            old = c.old.decode("utf-8") if c.old is not None else None
            new = c.new.decode("utf-8")
        except UnicodeDecodeError:
            parts.append(c.rel)
            continue
        names = changed_definitions(old, new) if c.rel.endswith(".py") else []
        verb = "creates " if c.old is None else ""
        if names:
            more = " ..." if len(names) > _MAX_NAMES else ""
            shown = ", ".join(f"{n}()" for n in names[:_MAX_NAMES]) + more
            parts.append(f"{verb}{shown} in {c.rel}")
        else:
            parts.append(f"{verb}{c.rel}")
    line = "rewrites " + "; ".join(parts) if parts else "changes nothing"
    if made_pass:
        tests = ", ".join(made_pass[:_MAX_NAMES]) + (" ..." if len(made_pass) > _MAX_NAMES else "")
        line += f"; makes {tests} pass"
    return line
