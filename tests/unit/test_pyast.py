"""Every AST autod builds goes through autod.pyast (one parse at a time: python/cpython#106905)."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from autod import pyast

AUTOD = Path(__file__).resolve().parents[2] / "autod"
_BARE = re.compile(r"(?<![\w.])ast\.parse\(|\bcompile\([^)]*PyCF_ONLY_AST|ast\.literal_eval\(")


def test_no_module_of_autod_builds_an_ast_but_through_pyast():
    """A second thread building an AST unguarded can end a parse with SystemError (the kill-mid-apply
    test did once, preparing plans in a thread pool), so the guard holds only if nothing bypasses it."""
    bare = [
        f"{p.relative_to(AUTOD.parent)}:{n}"
        for p in sorted(AUTOD.rglob("*.py")) if p.name != "pyast.py"
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if _BARE.search(line)
    ]
    assert bare == []


@pytest.mark.slow
def test_parses_are_serialised_and_a_parse_may_nest_in_the_same_thread():
    inside = threading.Event()
    release = threading.Event()
    order: list[str] = []

    def first() -> None:
        with pyast._LOCK:
            inside.set()
            release.wait(5)
            order.append("first")

    t = threading.Thread(target=first)
    t.start()
    inside.wait(5)
    second = threading.Thread(target=lambda: (pyast.parse("x = 1"), order.append("second")))
    second.start()
    second.join(0.2)
    assert second.is_alive() and order == []  # waiting for the lock the first holds
    release.set()
    t.join(5)
    second.join(5)
    assert order == ["first", "second"]
    with pyast._LOCK:  # re-entrant: a finalizer that parses during a parse does not deadlock
        assert pyast.parse("y = 2").body[0].targets[0].id == "y"


def test_a_nul_byte_is_a_syntax_error_that_names_its_line_and_the_plan_is_refused_not_crashed():
    """A model's reply may hold a NUL byte: CPython's SyntaxError for it has no line, so a refusal's
    reason said "line None". Now it names the line, on every path that parses."""
    import pytest

    from autod.act.definition import replace_definition
    from autod.act.edits import FileChange
    from autod.errors import PlanRejected
    from autod.modes import python_syntax_scope

    with pytest.raises(SyntaxError) as info:
        pyast.parse("x = 1\ny = '\x00'\n")
    assert (info.value.lineno, info.value.offset) == (2, 6)
    with pytest.raises(SyntaxError) as info:
        pyast.parse(b"\x00")
    assert info.value.lineno == 1
    with pytest.raises(PlanRejected, match=r"does not parse \(line 2\)"):
        replace_definition("a.py", "def f():\n    return 1\n", "f", "def f():\n    return \x00 2\n")
    change = FileChange("a.py", Path("/nowhere/a.py"), b"x = 1\n", b"x = 1\n\x00\n", None, 1, 0)
    with pytest.raises(PlanRejected, match=r"line 2"):
        python_syntax_scope(change)
