"""What a check wrote: the workspace's source (fails a verification) or only its output (harmless).

Real git repositories, real checks (autod.checks.run.run_check, sandbox off so the tests need no bwrap)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from autod.checks.run import CheckResult, run_check
from autod.checks.sourcefiles import classify, fallback
from autod.config.settings import CheckConfig
from autod.modes import Verification
from autod.modes.verifying import unjournaled


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
