"""auto-doc: the docstring-only scope guarantee, stale-docstring findings and doc mentions."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from autod.act.edits import FileChange
from autod.checks.run import CheckResult
from autod.config.settings import Settings
from autod.errors import PlanRejected
from autod.events import Event, EventKind
from autod.modes import ModeEnv
from autod.modes.doc import DocMode, doc_mentions, documented_params, findings, only_docstrings_changed
from autod.plan import Plan

BASE = '''"""Module."""
import functools


@functools.cache
def area(width, height=1):
    """Area of a rectangle.

    Args:
        width: the width
        depth: gone since the last release
    """
    return width * height  # noqa: E501
'''


def test_a_docstring_only_change_is_accepted():
    assert only_docstrings_changed(BASE, BASE.replace("depth: gone since the last release", "height: h"))
    assert only_docstrings_changed(BASE, BASE.replace('"""Module."""', '"""Geometry helpers."""'))


def test_adding_a_docstring_where_none_existed_is_accepted():
    old = "def f(x):\n    return x\n\n\nclass C:\n    pass\n"
    new = 'def f(x):\n    """Return x."""\n    return x\n\n\nclass C:\n    """A C."""\n'
    assert only_docstrings_changed(old, new)


@pytest.mark.parametrize(
    ("what", "old", "new"),
    [
        ("code", "return width * height", "return width + height"),
        ("decorator", "@functools.cache\n", ""),
        ("default value", "height=1", "height=2"),
        ("new statement", '    """\n    return', '    """\n    width = 0\n    return'),
        ("comment directive", "# noqa: E501", "# changed"),
        ("import", "import functools", "import functools, os"),
    ],
)
def test_any_change_outside_docstrings_is_refused(what, old, new):
    assert old in BASE
    assert not only_docstrings_changed(BASE, BASE.replace(old, new)), what


def test_a_plan_that_breaks_syntax_is_refused():
    assert not only_docstrings_changed(BASE, BASE.replace("def area(", "def area(("))


def test_google_style_stale_and_missing_params_are_found():
    (f,) = findings(BASE, "geo.py")
    assert f["name"] == "area" and f["line"] == 6
    assert "documents unknown depth" in f["problem"] and "misses height" in f["problem"]


def test_numpy_style_params_are_read_after_the_dashes():
    src = '''def h(x, *args, y=0):
    """H.

    Parameters
    ----------
    x : int
        The x. Note: a colon in a description is not a parameter.
    *args
        Extra values.
    z : int
        Gone.

    Returns
    -------
    int
    """
'''
    (f,) = findings(src, "n.py")
    assert f["problem"].endswith("documents unknown z; misses y")
    assert documented_params(src.split('"""')[1]) == {"x", "args", "z"}


def test_sphinx_style_params_with_types_are_read():
    src = '''def s(p, q):
    """S.

    :param p: the p
    :param int old: gone
    :returns: nothing
    """
'''
    (f,) = findings(src, "s.py")
    assert "documents unknown old" in f["problem"] and "misses q" in f["problem"]


def test_a_docstring_that_lists_no_params_is_not_judged():
    src = 'def f(a, b):\n    """Add a and b: the sum."""\n    return a + b\n'
    assert findings(src, "f.py") == []


def test_google_continuation_lines_with_colons_are_not_params():
    src = '''def g(a):
    """G.

    Args:
        a: the value, one of:
            red: a colour
    """
'''
    assert findings(src, "g.py") == []


def test_missing_docstrings_are_found_for_public_names_only():
    src = (
        "def public(x):\n    def inner():\n        pass\n    return x\n\n\n"
        "def _private():\n    pass\n\n\n"
        'class Thing:\n    """A thing."""\n\n    def method(self):\n        pass\n\n    def _hidden(self):\n'
        "        pass\n"
    )
    got = {(f["name"], f["problem"]) for f in findings(src, "m.py")}
    assert got == {("public", "missing docstring"), ("method", "missing docstring")}


def test_doc_mentions_finds_changed_names_and_options_in_docs_only(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("Call `area` with --fast-mode.\nNot area_total.\n")
    (tmp_path / "README.md").write_text("Nothing about it.\n")
    (tmp_path / "notes.py").write_text("area --fast-mode\n")
    (tmp_path / ".autod").mkdir()
    (tmp_path / ".autod" / "x.md").write_text("area\n")
    got = doc_mentions(tmp_path, ["docs/**", "*.md"], {"area", "--fast-mode", "volume"})
    assert got == [{"path": "docs/guide.md", "mentions": ["--fast-mode", "area"]}]


def _change(rel: str, old: str | None, new: str) -> FileChange:
    return FileChange(rel, Path(rel), None if old is None else old.encode(), new.encode(), None, 1, 1)


def _env(tmp_path: Path, results: dict[str, bool] | None = None, before: dict[str, bool] | None = None):
    checks = {n: {"run": "true"} for n in (results or {})}
    settings = Settings(workspace=tmp_path, checks=checks, modes={"auto-doc": {"enabled": True}})

    async def run_check(name: str) -> CheckResult:
        return CheckResult(name, 0 if results[name] else 1, "out", 1, False)

    env = ModeEnv(settings=settings, state=None, memory=None, run_check=run_check)  # type: ignore[arg-type]
    for name, ok in (before or {}).items():
        env.last_results[name] = CheckResult(name, 0 if ok else 1, "", 1, False)
    return env


def test_scope_refuses_code_changes_new_py_files_and_files_outside_doc_globs(tmp_path):
    scope = DocMode().scope(_env(tmp_path))
    assert scope is not None
    scope(_change("geo.py", BASE, BASE.replace("depth: gone since the last release", "height: h")))
    scope(_change("docs/guide.md", "old", "new"))
    with pytest.raises(PlanRejected, match="only docstrings"):
        scope(_change("geo.py", BASE, BASE.replace("width * height", "width")))
    with pytest.raises(PlanRejected, match="only docstrings"):
        scope(_change("new.py", None, '"""New."""\n'))
    with pytest.raises(PlanRejected, match="only docs"):
        scope(_change("Makefile", "a", "b"))
    with pytest.raises(PlanRejected, match=r"setup\.cfg configures the checks that judge this fix"):
        scope(_change("setup.cfg", "a", "b"))


def test_scope_refuses_an_edit_that_changes_only_whitespace_inside_docstrings(tmp_path):
    scope = DocMode().scope(_env(tmp_path))
    assert scope is not None
    reindented = BASE.replace("        width: the width", "            width: the width")
    assert reindented != BASE
    scope(_change("geo.py", BASE, reindented))  # a deeper indent is a change of text: accepted
    spaced = BASE.replace("Area of a rectangle.\n", "Area of a rectangle.   \n\n")
    assert spaced != BASE
    with pytest.raises(PlanRejected, match="changes no docstring's text"):
        scope(_change("geo.py", BASE, spaced))


def _verify(env: ModeEnv):
    event = Event(source="t", kind=EventKind.FILES_CHANGED, summary="s", fingerprint="f")
    return asyncio.run(DocMode().verify(event, Plan(summary="doc"), env))


def test_verify_keeps_doc_edits_when_checks_pass_and_rolls_back_when_one_breaks(tmp_path):
    assert _verify(_env(tmp_path, {"tests": True}, before={"tests": True})).status == "fixed"
    v = _verify(_env(tmp_path, {"tests": False}, before={"tests": True}))
    assert v.status == "rolled_back" and "tests" in v.reason


def test_verify_does_not_blame_doc_edits_for_a_check_that_was_already_failing(tmp_path):
    v = _verify(_env(tmp_path, {"tests": False, "lint": True}, before={"tests": False, "lint": True}))
    assert v.status == "fixed" and "already failing" in v.reason
    # a check never run before counts as passing before: failing now is blamed on the edits
    assert _verify(_env(tmp_path, {"tests": False})).status == "rolled_back"
