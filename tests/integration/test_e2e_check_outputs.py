"""Through `autod run`: a project whose own tests generate a module into a git-ignored directory on
every run. Python loads that file later, so it counts as a changed source wherever it lies, and every
candidate, the right fix too, was rolled back ("check tests changed source files"); `.gitignore` cannot
say otherwise. The check's `outputs` globs declare it: the right fix is kept."""

from __future__ import annotations

import asyncio
import subprocess

import pytest
from daemon import CALC_BUGGY, CALC_TEST, PYTHON, base_config, make_repo, start_autod

from autod.checks.run import run_check
from autod.config.models import CheckConfig

pytestmark = pytest.mark.slow

FIXED_ADD = "def add(a, b):\n    return a + b\n"
# the project's tests write a table module the code then imports, as a parser generator's would
GENERATES = (
    "import pathlib\n"
    "_gen = pathlib.Path(__file__).resolve().parents[1] / 'src' / '_gen'\n"
    "_gen.mkdir(exist_ok=True)\n"
    "(_gen / 'tables.py').write_text('TABLE = (1, 2, 3)\\n')\n"
)


def _repo(tmp_path):
    repo = make_repo(tmp_path / "repo", {"src/calc.py": CALC_BUGGY, "src/.gitignore": "_gen/\n",
                                         "tests/test_calc.py": GENERATES + CALC_TEST})
    subprocess.run(["git", "-C", str(repo), "check-ignore", "-q", "src/_gen/tables.py"], check=True)
    return repo


def test_undeclared_the_generated_module_is_a_change_of_the_source(tmp_path, real_bwrap):
    """The rule the declaration is for: what Python loads later is source, ignored or not (through
    `autod run` every candidate, the right fix too, was rolled back for it)."""
    repo = _repo(tmp_path)
    run = f"{PYTHON} -m pytest -q -p no:cacheprovider tests"
    plain = asyncio.run(run_check("tests", CheckConfig(run=run, sandbox="bwrap"), repo))
    assert plain.changed == ["src/_gen/tables.py"]
    declared = asyncio.run(run_check("tests", CheckConfig(run=run, sandbox="bwrap", outputs=["src/_gen/**"]),
                                     repo))
    assert declared.changed == [] and declared.outputs == ["src/_gen/tables.py"]


def test_a_check_that_generates_python_keeps_the_right_fix_once_its_output_is_declared(
        tmp_path, scripted_llm, real_bwrap):
    repo = _repo(tmp_path)
    scripted_llm.push_text(f"add subtracts.\n\n### src/calc.py · add\n```python\n{FIXED_ADD}```\n")
    cfg = base_config(repo, llm={"reply_form": "code", "base_url": scripted_llm.base_url, "prefill": "none"},
                      modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}})
    cfg["checks"]["tests"]["outputs"] = ["src/_gen/**"]
    d = start_autod(tmp_path, cfg)
    try:
        (r,) = d.wait_reflections(1)
    finally:
        assert d.stop() == 0
    assert r["status"] == "fixed", r
    assert "return a + b" in (repo / "src" / "calc.py").read_text()
