"""What a check wrote: the workspace's source (fails a verification) or only its output (harmless).

Real git repositories, real checks (autod.checks.run.run_check, sandbox off so the tests need no bwrap)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autod.checks.run import CheckResult, run_check
from autod.checks.sourcefiles import by_rule, classify, fallback
from autod.config.settings import CheckConfig
from autod.modes import Verification
from autod.modes.verifying import unjournaled
from autod.safety.boundary import glob_match
from autod.safety.protected import RUNNER_GLOBS


def repo(root: Path) -> Path:
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "tests" / "data").mkdir(parents=True)
    (root / "src" / "pkg" / "calc.py").write_text("x = 1\n")
    (root / "tests" / "data" / "case1.json").write_text("{}\n")
    (root / "README.md").write_text("hi\n")
    (root / "LICENSE").write_text("MIT\n")
    (root / ".gitignore").write_text("htmlcov/\n.coverage\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    return root


def test_tracked_files_are_source_and_ignored_ones_output(tmp_path):
    ws = repo(tmp_path)
    split = classify(ws, ["src/pkg/calc.py", "htmlcov/index.html", ".coverage", "README.md"])
    assert split.sources == ["src/pkg/calc.py", "README.md"] and split.how == "git"
    assert split.outputs == ["htmlcov/index.html", ".coverage"]


def test_an_untracked_file_is_source_only_where_it_looks_like_the_source_beside_it(tmp_path):
    ws = repo(tmp_path)
    split = classify(ws, [
        "conftest.py",  # Python loads it on the next run: source, even where no .py is tracked
        "src/pkg/extra.pth",
        "tests/data/case2.json",  # a new fixture beside the tracked ones
        "coverage.xml",  # no .xml is tracked at the root: a report
        "junit",  # no suffix (LICENSE has none either): output
        "reports/run.txt",  # a directory with no tracked file is not a source directory
        "src/pkg/notes.log",
    ])
    assert split.sources == ["conftest.py", "src/pkg/extra.pth", "tests/data/case2.json"]
    assert split.outputs == ["coverage.xml", "junit", "reports/run.txt", "src/pkg/notes.log"]


def test_what_python_or_pytest_loads_later_is_source_wherever_it_lies_and_whatever_git_says(tmp_path):
    """A probe's check planted each of these as output: ignored, in a new directory, or beside a
    `.gitignore` it wrote; every later run of the bug passed. Build output directories stay git's."""
    ws = repo(tmp_path)
    planted = ["htmlcov/conftest.py", "tests/test_zz/conftest.py", "src/pkg/calc/__init__.py",
               "reports/run.py", "tests/.gitignore", "tests/sub/pytest.ini", "lib/hook.pth", "a/b/c.so"]
    built = ["build/lib/pkg/calc.py", "dist/pkg/conftest.py", ".eggs/x/setup.py"]
    split = classify(ws, planted + built)
    assert split.sources == planted and split.outputs == built
    assert fallback(planted + built, "no git").sources == planted


def test_a_deleted_tracked_file_is_a_source_change(tmp_path):
    ws = repo(tmp_path)
    (ws / "README.md").unlink()
    assert classify(ws, ["README.md"]).sources == ["README.md"]


def test_without_git_what_python_loads_is_source_and_the_rest_output(tmp_path):
    split = classify(tmp_path, ["src/a.py", "htmlcov/index.html", "notes.md"])
    assert split.sources == ["src/a.py"] and split.outputs == ["htmlcov/index.html", "notes.md"]
    assert split.how.startswith("no git: ")


@pytest.mark.slow
def test_a_check_writing_ignored_coverage_output_changes_no_source(tmp_path):
    ws = repo(tmp_path)
    script = (
        "import pathlib; p = pathlib.Path('htmlcov'); p.mkdir(exist_ok=True);"
        " (p / 'index.html').write_text('report'); pathlib.Path('.coverage').write_text('data')"
    )
    check = CheckConfig(run=f"{sys.executable} -c \"{script}\"", sandbox="off")
    r = asyncio.run(run_check("tests", check, ws))
    assert r.ok and r.changed == [] and r.outputs == [".coverage", "htmlcov/index.html"]


def test_a_check_that_reformats_a_tracked_file_changes_source(tmp_path):
    ws = repo(tmp_path)
    check = CheckConfig(run="sh -c 'echo y >> src/pkg/calc.py; echo log > check.log'", sandbox="off")
    r = asyncio.run(run_check("fmt", check, ws))
    assert r.changed == ["src/pkg/calc.py"] and r.outputs == ["check.log"]


def test_a_verification_fails_on_changed_source_only_and_says_what_it_means():
    clean = CheckResult("tests", 0, "ok", 5, outputs=["htmlcov/index.html"])
    assert unjournaled(Verification("fixed", [clean])).status == "fixed"
    dirty = CheckResult("tests", 0, "ok", 5, changed=["src/calc.py"])
    v = unjournaled(Verification("fixed", [dirty]))
    assert v.status == "rolled_back"
    assert "passed but check tests changed source files" in v.reason and "src/calc.py" in v.reason


def test_what_a_check_declares_as_its_output_is_output_even_python_it_loads_later(tmp_path):
    """A project whose check generates a module into a git-ignored directory: without `outputs`, every
    run changes its source (and every fix rolls back); with it, the generated files are output."""
    ws = repo(tmp_path)
    (ws / ".gitignore").write_text("htmlcov/\n.coverage\nsrc/pkg/_gen/\n")
    made = ["src/pkg/_gen/tables.py", "src/pkg/_gen/__init__.py", "src/pkg/_speedups.so"]
    assert classify(ws, made).sources == made
    split = classify(ws, made, globs=["src/pkg/_gen/**", "src/pkg/*.so"])
    assert split.sources == [] and split.outputs == made
    assert fallback(made, "no git", globs=["src/pkg/_gen/**", "src/pkg/*.so"]).sources == []
    # a candidate's run created them: output all the same (the mirror removes them after the run)
    assert classify(ws, made, frozenset(made), globs=["src/pkg/_gen/**", "*.so"]).sources == []


_PART = st.text("abcxyz_", min_size=1, max_size=6)
_NEVER = [g for g in RUNNER_GLOBS if not any(c in g for c in "*?[")] + [".gitignore"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.lists(_PART, max_size=3), _PART, st.sampled_from([".py", ".so", ".txt", ""]),
                       st.booleans()), min_size=1, max_size=12),
    st.lists(st.tuples(st.lists(_PART, max_size=3), st.sampled_from(_NEVER)), max_size=4),
    st.sampled_from([["**"], ["*"], ["**/*"], ["*.py", "*.so", "*.txt"]]),
    st.booleans(),
)
def test_no_output_glob_hides_a_tracked_file_pytest_s_configuration_or_a_gitignore(files, runner, globs,
                                                                                    with_git):
    """Whatever the operator's `outputs` globs say (here: everything), a file git tracks, pytest's
    configuration and entry points and a `.gitignore` stay source; every other file they match is
    output, with git and without."""
    paths, tracked = [], set()
    for dirs, stem, sfx, is_tracked in files:
        p = "/".join([*dirs, stem + sfx])
        if p not in paths:
            paths.append(p)
            if is_tracked:
                tracked.add(p)
    never = ["/".join([*dirs, name]) for dirs, name in runner]
    paths += [p for p in never if p not in paths]
    matched = {p for p in paths if any(glob_match(g, p) for g in globs)}
    if with_git:
        def split_by(g):
            return by_rule(paths, tracked, set(paths) - tracked, frozenset(paths), g)
        must = {p for p in paths if p in tracked or p in never}
    else:
        def split_by(g):
            return fallback(paths, "no git", frozenset(paths), g)
        must = {p for p in paths if p in never}
    undeclared = set(split_by(()).sources)
    split = split_by(globs)
    assert set(split.sources) == (must & undeclared) | (undeclared - matched)
    assert set(split.outputs) == set(paths) - set(split.sources)
