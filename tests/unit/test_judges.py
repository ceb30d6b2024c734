"""The judges of a fix (tests, their config, the checks' scripts) are not the fix's to change."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from autod.act import FileChange
from autod.act.judges import Judges, editable_paths, requires_approval
from autod.act.reach import introduced
from autod.config.settings import Settings, load_config
from autod.cycle.phases import Cycle
from autod.errors import PlanRejected
from autod.modes.debug import DebugMode
from autod.plan import Edit, Plan
from autod.safety.boundary import Boundary


def settings(ws: Path, checks: dict[str, str] | None = None, **debug: Any) -> Settings:
    doc = {
        "workspace": str(ws),
        "checks": {n: {"run": r} for n, r in (checks or {"tests": "python -m pytest -q tests"}).items()},
        "modes": {"auto-debug": {"enabled": True, **debug}},
    }
    path = ws.parent / "autod.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_config(path)


def change(ws: Path, rel: str, old: str | None, new: str) -> FileChange:
    return FileChange(rel, ws / rel, None if old is None else old.encode(), new.encode(), None, 1, 1)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    for d in ("src", "tests", "scripts", "spec/unit", "pkg/tests"):
        (ws / d).mkdir(parents=True)
    (ws / "scripts" / "check.sh").write_text("#!/bin/sh\nexit 0\n")
    (ws / "ci.py").write_text("print('ok')\n")
    (ws / "mypy-strict.ini").write_text("[mypy]\n")
    return ws


def verdict(ws: Path, rel: str, old: str | None = "x = 1\n", new: str = "x = 2\n", **kw: Any) -> str | None:
    judges = Judges.for_settings(settings(ws, **kw), "auto-debug")
    assert judges is not None
    return judges.judged(change(ws, rel, old, new))


@pytest.mark.parametrize(
    "rel",
    [
        "tests/test_calc.py",
        "tests/data/expected.json",
        "pkg/tests/helpers.py",
        "src/test_util.py",
        "src/calc_test.py",
    ],
)
def test_tests_are_judges_and_the_reason_teaches_the_replan(ws: Path, rel: str) -> None:
    why = verdict(ws, rel)
    assert why == (
        f"{rel} is a test that judges this fix; auto-debug may not edit it"
        " - change the code under test so the test passes"
    )


@pytest.mark.parametrize(
    "rel", ["conftest.py", "src/conftest.py", "pytest.ini", "tox.ini", "setup.cfg", ".coveragerc"]
)
def test_files_that_configure_the_tests_are_judges(ws: Path, rel: str) -> None:
    assert "configures the checks that judge this fix" in (verdict(ws, rel) or "")


def test_ordinary_code_is_not_a_judge(ws: Path) -> None:
    assert verdict(ws, "src/calc.py") is None
    assert verdict(ws, "README.md") is None


def test_the_checks_own_scripts_and_test_runner_targets_are_judges(ws: Path) -> None:
    checks = {
        "lint": "./scripts/check.sh --strict",
        "ci": f"{sys.executable} ci.py",
        "types": "mypy --config-file=mypy-strict.ini src",
        "spec": "python -m pytest -q spec/unit tests/test_calc.py::test_add",
    }
    assert "run by check 'lint'" in (verdict(ws, "scripts/check.sh", checks=checks) or "")
    assert "run by check 'ci'" in (verdict(ws, "ci.py", checks=checks) or "")
    assert "run by check 'types'" in (verdict(ws, "mypy-strict.ini", checks=checks) or "")
    assert "run by check 'spec'" in (verdict(ws, "spec/unit/helpers.py", checks=checks) or "")
    # mypy's targets are the code under check, not a judge; nor is the workspace as a whole (`ruff .`)
    assert verdict(ws, "src/calc.py", checks={**checks, "ruff": "ruff check ."}) is None
    assert "configures the checks" in (verdict(ws, "ruff.toml", checks={"ruff": "ruff check ."}) or "")


LINT = {"lint": "./scripts/check.sh --strict"}
LINT_RULE = (
    "scripts/check.sh is run by check 'lint' to judge this fix; auto-debug may not edit it"
    " - change the code so the check passes as it is"
)


@pytest.mark.parametrize(
    "rel", ["src/../scripts/check.sh", "./scripts//check.sh", "scripts/./check.sh", "/scripts/check.sh"]
)
def test_a_check_script_is_judged_however_its_path_is_spelled(ws: Path, rel: str) -> None:
    # judges compare normalised paths: whatever rule upstream let this spelling through, the script is
    # named as it is (the reason's path is the normalised one, not the input repeated)
    assert verdict(ws, rel, checks=LINT) == LINT_RULE


def test_on_a_case_insensitive_filesystem_a_path_is_judged_as_the_filesystem_spells_it(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.path.lexists

    def folding(path: str | os.PathLike[str]) -> bool:  # a filesystem that folds case (macOS, Windows)
        p = Path(path)
        return real(p) or any(n.casefold() == p.name.casefold() for n in os.listdir(p.parent))

    assert verdict(ws, "Scripts/CHECK.sh", checks=LINT) is None  # case-sensitive: another file
    monkeypatch.setattr(os.path, "lexists", folding)
    assert verdict(ws, "Scripts/CHECK.sh", checks=LINT) == LINT_RULE


PYPROJECT = """[project]
name = "calc"
version = "1.0"
dependencies = ["attrs"]

[project.optional-dependencies]
test = ["pytest"]

[tool.pytest.ini_options]
addopts = "-q"

[tool.ruff]
line-length = 100

[tool.black]
line-length = 100
"""


@pytest.mark.parametrize(
    ("old", "new", "table"),
    [
        ('addopts = "-q"', 'addopts = "-q --deselect tests/test_calc.py::test_add"', "[tool.pytest]"),
        ('test = ["pytest"]', 'test = ["pytest<2"]', "[project.optional-dependencies] test"),
        ("[tool.ruff]\nline-length = 100", "[tool.ruff]\nline-length = 300", "[tool.ruff]"),
        ("[project]", "[project", "the file's TOML"),
    ],
)
def test_pyproject_edits_that_change_test_or_lint_settings_are_judged(
    ws: Path, old: str, new: str, table: str
) -> None:
    checks = {"tests": "python -m pytest", "lint": "ruff check src"}
    why = verdict(ws, "pyproject.toml", PYPROJECT, PYPROJECT.replace(old, new), checks=checks) or ""
    assert f"pyproject.toml: the edit changes {table}" in why


def test_other_pyproject_edits_pass(ws: Path) -> None:
    checks = {"tests": "python -m pytest"}
    for old, new in (('version = "1.0"', 'version = "1.1"'), ('["attrs"]', '["attrs", "idna"]')):
        assert verdict(ws, "pyproject.toml", PYPROJECT, PYPROJECT.replace(old, new), checks=checks) is None
    # ruff is no check here, so its table is not a judge; black's never is
    wider = PYPROJECT.replace("= 100", "= 120")
    assert verdict(ws, "pyproject.toml", PYPROJECT, wider, checks=checks) is None


def test_editable_paths_are_the_shown_files_the_act_rules_would_let_a_plan_write(ws: Path) -> None:
    """What a plan's schema may name: no judge, no denied or own file, nothing outside, no directory."""
    for rel in ("src/calc.py", "src/util.py", "tests/test_calc.py", ".env", "pyproject.toml"):
        (ws / rel).write_text("x = 1\n")
    (ws / "autod.yaml").write_text("workspace: .\n")
    s = settings(ws)
    boundary = Boundary(s.workspace, s.state_path, s.limits.deny_globs, own=[ws / "autod.yaml"])
    shown = ["src/calc.py", "./src/calc.py", "tests/test_calc.py", ".env", "autod.yaml", "../x.py",
             "src", "src/missing.py", "scripts/check.sh", None, "src/util.py", "pyproject.toml"]
    judges = Judges.for_settings(settings(ws, checks={"lint": "sh scripts/check.sh"}), "auto-debug")
    assert editable_paths(shown, boundary, judges) == ("pyproject.toml", "src/calc.py", "src/util.py")
    allowed = Judges.for_settings(settings(ws, allow_judge_edits=True), "auto-debug")
    assert editable_paths(shown, boundary, allowed) == (
        "pyproject.toml", "scripts/check.sh", "src/calc.py", "src/util.py", "tests/test_calc.py"
    )
    assert editable_paths(shown, boundary, None)[-1] == "tests/test_calc.py"


def test_the_scope_refuses_a_judge_edit_unless_allowed_and_then_it_needs_approval(ws: Path) -> None:
    test_edit = change(ws, "tests/test_calc.py", "assert add(2, 3) == 5\n", "assert add(2, 3) == -1\n")
    strict = Judges.for_settings(settings(ws), "auto-debug")
    assert strict is not None
    with pytest.raises(PlanRejected, match=r"tests/test_calc\.py is a test that judges this fix"):
        strict.scope()(test_edit)
    assert requires_approval(settings(ws), "auto-debug", [test_edit]) == []

    relaxed = settings(ws, allow_judge_edits=True)
    judges = Judges.for_settings(relaxed, "auto-debug")
    assert judges is not None
    judges.scope()(test_edit)  # not refused ...
    assert requires_approval(relaxed, "auto-debug", [test_edit]) == ["tests/test_calc.py"]  # ... approval
    assert requires_approval(relaxed, "auto-debug", [change(ws, "src/calc.py", "a", "b")]) == []


def test_a_permitted_judge_edit_waits_for_approval_even_without_require_confirmation(tmp_path: Path) -> None:
    from test_cycle import BUGGY, ScriptedPlanner, failing_event, make

    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "tests").mkdir()
    (ws / "src" / "calc.py").write_text(BUGGY)
    (ws / "tests" / "test_calc.py").write_text("assert True\n")
    weaken = Plan(
        summary="weaken", edits=[Edit(path="tests/test_calc.py", search="assert True", replace="pass")]
    )
    deps, state = make(
        ws,
        ScriptedPlanner(weaken),
        modes={"auto-debug": {"allow_judge_edits": True}},
        limits={"require_confirmation": False},
    )
    r = asyncio.run(Cycle(deps, DebugMode(), failing_event()).run())
    assert r.status == "pending_approval" and r.proposal_id
    assert "tests/test_calc.py" in (r.reason or "") and "allow_judge_edits" in (r.reason or "")
    assert (ws / "tests" / "test_calc.py").read_text() == "assert True\n"
    (p,) = state.proposals("pending")
    approved = asyncio.run(
        Cycle(deps, DebugMode(), failing_event(), approved=Plan.model_validate_json(p["plan"])).run()
    )
    # approved, the judge edit is applied (not refused); the still-failing check then rolls it back
    assert approved.planner == "operator-approved" and approved.status == "rolled_back"
    assert [e["path"] for e in approved.edits] == ["tests/test_calc.py"]


# -- pytest's whole configuration surface, and edits that reach into the runner ---------------

RUNNER_RULE = "configures or loads the test runner"
REACH_RULE = "which reach into the test runner that judges this fix"


@pytest.mark.parametrize(
    "rel",
    [
        "pytest.toml",
        ".pytest.toml",
        ".pytest.ini",
        "tests/pytest.ini",
        "src/pkg/conftest.py",
        "pytest.py",
        "src/pytest.py",
        "pytest/__init__.py",
        "pytest/__main__.py",
        "_pytest/reports.py",
        "src/_pytest.py",
        "pluggy/__init__.py",
        "py.py",
        "src/pytest_autopass.py",
        "src/x.pth",
        "sitecustomize.py",
        "lib/usercustomize.py",
    ],
)
def test_every_file_pytest_reads_or_imports_first_is_a_judge_whatever_the_globs(
    ws: Path, rel: str
) -> None:
    why = verdict(ws, rel, judge_globs=["never-matches/**"])  # the operator's list does not cover it
    assert RUNNER_RULE in (why or "")
    assert "change the code under test" in (why or "")


CALC = "def add(a, b):\n    return a - b\n"
REACHES = {
    "a plugin that rewrites reports": CALC
    + "import pytest\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
    "    out = yield\n    out.get_result().outcome = 'passed'\n",
    "a plugin registered through pytest_plugins": CALC + "pytest_plugins = ['calc_plugin']\n",
    "sys.modules of the runner": CALC + "import sys\nsys.modules['_pytest.reports'].TestReport.x = 1\n",
    "an aliased import of the runner": CALC + "import _pytest.runner as r\n",
    "pluggy": CALC + "from pluggy import HookimplMarker\n",
    "the process ends with 0": CALC + "import os\nos._exit(0)\n",
    "an aliased exit": CALC + "from os import _exit as done\ndone(0)\n",
    "the process is replaced": CALC + "import os\nos.execv('/bin/true', ['true'])\n",
    "the runner's frames": CALC + "import inspect\ninspect.currentframe().f_back.f_globals['x'] = 1\n",
    "builtins": CALC + "import builtins\nbuiltins.AssertionError = Exception\n",
    "code hidden in exec": CALC + "exec('import py' + 'test')\n",
    "a computed attribute": CALC + "import sys\ngetattr(sys, 'mod' + 'ules')\n",
    "the import machinery": CALC + "import sys\nsys.meta_path.insert(0, object())\n",
    "the garbage collector's object graph": CALC + "import gc\n",
}
# The feature each case is about: its own rule must find it (another rule finding something else in the
# same code would keep the verdict, and hide that the rule under test was gone).
FEATURE = {
    "a plugin that rewrites reports": "def pytest_runtest_makereport (a pytest hook)",
    "a plugin registered through pytest_plugins": "pytest_plugins",
    "sys.modules of the runner": "sys.modules",
    "an aliased import of the runner": "import _pytest.runner",
    "pluggy": "from pluggy import ...",
    "the process ends with 0": "os._exit()",
    "an aliased exit": "os._exit()",
    "the process is replaced": "os.execv()",
    "the runner's frames": ".f_back",
    "builtins": "import builtins",
    "code hidden in exec": "exec()",
    "a computed attribute": "getattr() with a computed name",
    "the import machinery": "sys.meta_path",
    "the garbage collector's object graph": "import gc",
}


@pytest.mark.parametrize("how", sorted(REACHES))
def test_an_edit_that_reaches_into_the_test_runner_is_refused_with_a_reason_that_teaches(
    ws: Path, how: str
) -> None:
    why = verdict(ws, "src/calc.py", CALC, REACHES[how])
    assert why is not None and REACH_RULE in why
    assert "fix the code under test itself" in why
    assert FEATURE[how] in introduced(CALC, REACHES[how])


def test_only_what_the_edit_introduces_counts(ws: Path) -> None:
    old = "import sys\n\ndef add(a, b):\n    return sys.modules and a - b\n"
    assert verdict(ws, "src/calc.py", old, old.replace("a - b", "a + b")) is None
    # a real fix, with a docstring that names the runner in words, is not a reach
    fixed = 'def add(a, b):\n    """Sum; pytest checks it."""\n    return a + b\n'
    assert verdict(ws, "src/calc.py", CALC, fixed) is None
    # a second use of what was already there is new
    assert REACH_RULE in (verdict(ws, "src/calc.py", old, old + "sys.modules.clear()\n") or "")


def test_a_new_module_that_reaches_into_the_runner_is_judged_too(ws: Path) -> None:
    assert REACH_RULE in (verdict(ws, "src/helper.py", None, "import pytest\n") or "")


def test_a_reach_needs_approval_when_judge_edits_are_allowed(ws: Path) -> None:
    s = settings(ws, allow_judge_edits=True)
    changes = [change(ws, "src/calc.py", CALC, REACHES["the process ends with 0"])]
    assert requires_approval(s, "auto-debug", changes) == ["src/calc.py"]


@pytest.mark.parametrize(
    ("table", "old", "new"),
    [
        ("[build-system]", "", '\n[build-system]\nrequires = ["evil"]\nbuild-backend = "evil"\n'),
        ("[project.entry-points]", "", '\n[project.entry-points.pytest11]\nautopass = "calc.plugin"\n'),
        ("[project.scripts]", "", '\n[project.scripts]\ncalc = "calc:main"\n'),
    ],
)
def test_pyproject_tables_the_next_install_runs_are_judged(ws: Path, table: str, old: str, new: str) -> None:
    why = verdict(ws, "pyproject.toml", PYPROJECT, PYPROJECT + new) or ""
    assert f"the edit changes {table} (what the next install runs or registers)" in why


def test_ordinary_dynamic_code_in_a_fix_is_not_a_reach(ws: Path) -> None:
    old = "def handle(obj, kind):\n    return None\n"
    new = "def handle(obj, kind):\n    setattr(obj, 'seen', kind)\n    return getattr(obj, f'on_{kind}')()\n"
    assert verdict(ws, "src/calc.py", old, new) is None


def test_every_way_a_check_names_its_script_or_target_makes_it_a_judge(ws: Path) -> None:
    (ws / "checks").mkdir()
    (ws / "checks" / "smoke.py").write_text("def test_x():\n    pass\n")
    checks = {
        "env": "env python ci.py",  # the interpreter behind env, then its script
        "unbuffered": "python -u scripts/check.sh --config=mypy-strict.ini",  # an option first, one after
        "runner": "python -m pytest spec/unit checks/smoke.py::test_x",  # -m, then the runner's targets
    }
    assert "run by check 'env'" in (verdict(ws, "ci.py", checks=checks) or "")
    assert "run by check 'unbuffered'" in (verdict(ws, "scripts/check.sh", checks=checks) or "")
    assert "run by check 'unbuffered'" in (verdict(ws, "mypy-strict.ini", checks=checks) or "")
    assert "run by check 'runner'" in (verdict(ws, "spec/unit/helpers.py", checks=checks) or "")
    assert "run by check 'runner'" in (verdict(ws, "checks/smoke.py", checks=checks) or "")


def test_a_new_pyproject_that_sets_test_options_is_judged(ws: Path) -> None:
    assert "[tool.pytest]" in (verdict(ws, "pyproject.toml", old=None, new=PYPROJECT) or "")
