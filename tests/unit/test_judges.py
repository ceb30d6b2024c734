"""The judges of a fix (tests, their config, the checks' scripts) are not the fix's to change."""

from __future__ import annotations

import asyncio
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from autod.act import FileChange
from autod.act.judges import Judges, editable_paths, requires_approval
from autod.act.reach import introduced, runner_features
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


@pytest.mark.slow
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
    "sys.modules spelled as a dict lookup": CALC + "import sys\nsys.__dict__['modules'].clear()\n",
    "a module's namespace through a function": CALC + "def f():\n    pass\n\nf.__globals__['os']._exit(0)\n",
    "os._exit fetched through vars()": CALC + "import os\nvars(os)['_ex' + 'it'](0)\n",
    "the runner's entry point group": CALC + "from importlib.metadata import entry_points\n"
    "[e.load() for e in entry_points(group='pytest11')]\n",
    "the callers' frames walked": CALC + "import traceback as tb, inspect\n"
    "cfg = [inspect.getargvalues(f).locals.get('config') for f, _ in tb.walk_stack(None)]\n",
    "the callers' frames as a list": CALC + "from inspect import stack\nstack()[3]\n",
    "a frame from logging": CALC + "import logging\nlogging.currentframe()\n",
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
    "sys.modules spelled as a dict lookup": "sys.__dict__",
    "a module's namespace through a function": ".__globals__",
    "os._exit fetched through vars()": "vars() of the interpreter's or the runner's modules",
    "the runner's entry point group": "a string naming the test runner",
    "the callers' frames walked": "traceback.walk_stack()",
    "the callers' frames as a list": "from inspect import (the callers' frames)",
    "a frame from logging": "logging.currentframe()",
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


# -- the reach finder, form by form: each rule finds its own feature, and ordinary code nothing ----

# Module roots whose import is a reach (the runner and its plugins; the interpreter's machinery).
REACH_MODULES = ["pytest", "_pytest", "pluggy", "py", "iniconfig", "xdist"]
REACH_MODULES += ["builtins", "__builtin__", "ctypes", "_ctypes", "cffi", "gc", "posix"]
REACH_SYS_ATTRS = ["modules", "meta_path", "path_hooks", "path_importer_cache", "settrace", "setprofile"]
REACH_SYS_ATTRS += ["_getframe", "_current_frames", "addaudithook", "monitoring", "excepthook"]
REACH_OS_CALLS = ["_exit", "abort", "kill", "killpg", "execv", "execvpe", "execlp"]
REACH_TELLTALES = ["f_back", "f_globals", "f_locals", "f_builtins", "tb_frame", "gi_frame", "cr_frame"]
REACH_TELLTALES += ["ag_frame", "TestReport", "CollectReport", "BaseReport", "longrepr", "longreprtext"]
REACH_TELLTALES += ["pluginmanager", "hookimpl", "hookspec", "__globals__", "__subclasses__"]
EXIT_FROM = "from os import (process exit/exec)"
COMPUTED = "getattr() with a computed name"
RUNNER_STRING = "a string naming the test runner"
VARS = "vars() of the interpreter's or the runner's modules"

# (source, the features runner_features counts in it, exactly). Exact, so a rule that stops firing,
# fires on ordinary code, counts wrong or renames its feature fails; never text the source contains.
FORMS = [
    # imports of the runner's plugins by prefix, and of ordinary modules
    pytest.param("import pytest_asyncio\n", {"import pytest_asyncio": 1}, id="import pytest_*"),
    pytest.param("from pytest_mock import mocker\n", {"from pytest_mock import ...": 1}, id="from pytest_*"),
    pytest.param("import os, sys, json\nimport os.path\nfrom json import loads\n", {}, id="ordinary imports"),
    pytest.param("from ctypes import CDLL\n", {"from ctypes import ...": 1}, id="from machinery"),
    # from sys / os / importlib: only the names that reach
    pytest.param(
        "from sys import argv, modules, settrace\n", {"from sys import modules, settrace": 1}, id="from sys"
    ),
    pytest.param("from sys import argv, version_info\nargv\n", {}, id="from sys, ordinary names"),
    pytest.param("from os import _exit\n", {EXIT_FROM: 1}, id="from os import _exit"),
    pytest.param("from os import getcwd, execv\n", {EXIT_FROM: 1}, id="from os import exec*"),
    pytest.param("from os import path, getcwd\ngetcwd()\n", {}, id="from os, ordinary names"),
    pytest.param(
        "from importlib import import_module\n",
        {"from importlib import import_module": 1},
        id="from importlib",
    ),
    pytest.param("from importlib import resources, reload\n", {}, id="from importlib, other names"),
    pytest.param(
        "from app import modules, import_module\nfrom db import kill, execute\n"
        "modules.clear()\nkill()\nexecute('select 1')\nimport_module('x')\n",
        {},
        id="the same names from other modules",
    ),
    # a from-import used under its own name or an alias
    pytest.param(
        "from sys import modules as m\nm['x'] = 1\n",
        {"from sys import modules": 1, "sys.modules": 1},
        id="sys alias",
    ),
    pytest.param(
        "from sys import _getframe\n_getframe(1)\n",
        {"from sys import _getframe": 1, "sys._getframe": 1},
        id="sys name",
    ),
    pytest.param("from os import _exit as done\ndone(0)\n", {EXIT_FROM: 1, "os._exit()": 1}, id="os alias"),
    pytest.param(
        "from os import execv\nexecv('/bin/true', [])\n", {EXIT_FROM: 1, "os.execv()": 1}, id="os exec name"
    ),
    # an alias bound after its use, in a function that runs later ("aliases first, wherever the import sits")
    pytest.param(
        "def f():\n    return s.modules\n\nimport sys as s\n", {"sys.modules": 1}, id="import as, bound later"
    ),
    pytest.param(
        "def stop():\n    done(0)\n\nfrom os import _exit as done\n",
        {EXIT_FROM: 1, "os._exit()": 1},
        id="from-import as, bound later",
    ),
    pytest.param(
        "def stop():\n    os._exit(0)\n\nimport os.path\n", {"os._exit()": 1}, id="os after import os.path"
    ),
    pytest.param("import os.path\nos._exit(0)\n", {"os._exit()": 1}, id="import os.path, then os"),
    # a name means what it is bound to where it is used: rebinding it later does not hide the use
    pytest.param(
        "from sys import modules\nmodules.clear()\nfrom app import modules\nmodules.clear()\n",
        {"from sys import modules": 1, "sys.modules": 1},
        id="from-import rebound after its use",
    ),
    pytest.param(
        "import sys as s\ns.modules.clear()\nimport json as s\ns.modules\n",
        {"sys.modules": 1},
        id="import as, rebound after its use",
    ),
    # names that are not the module they look like
    pytest.param("import json as sys\nimport sys as real\nsys.modules\n", {}, id="another module named sys"),
    pytest.param(
        "from . import sys\nfrom x import y as os\nsys.modules\nos._exit(0)\n", {}, id="local sys and os"
    ),
    # sys / os / importlib attributes, imported or not, and under an alias
    pytest.param("sys.modules['x'] = 1\nsys.argv\n", {"sys.modules": 1}, id="sys.modules, no import"),
    pytest.param("import sys as s\ns.settrace(None)\n", {"sys.settrace": 1}, id="sys as s"),
    pytest.param(
        "os._exit(0)\nos.getcwd()\nos.path.join('a')\n", {"os._exit()": 1}, id="os._exit, no import"
    ),
    pytest.param("import os as o\no.kill(1, 9)\n", {"os.kill()": 1}, id="os as o"),
    pytest.param(
        "importlib.import_module('x')\n", {"importlib.import_module()": 1}, id="importlib.import_module"
    ),
    pytest.param("importlib.__import__('x')\n", {"importlib.__import__()": 1}, id="importlib.__import__"),
    pytest.param(
        "import importlib as il\nil.reload(m)\nil.resources\n",
        {"importlib.reload()": 1},
        id="importlib.reload",
    ),
    pytest.param(
        "self.modules = []\nproc.kill()\ncursor.execute('select 1')\nself.reload()\nx.import_module\n",
        {},
        id="the same attribute names on ordinary objects",
    ),
    pytest.param("inspect.currentframe().f_back.f_locals\n", {".f_back": 1, ".f_locals": 1}, id="frames"),
    # hooks, plugins, builtins
    pytest.param(
        "def pytest_configure(config):\n    pass\n", {"def pytest_configure (a pytest hook)": 1}, id="hook"
    ),
    pytest.param(
        "class P:\n    async def pytest_runtest_call(self, item):\n        sys.modules\n",
        {"def pytest_runtest_call (a pytest hook)": 1, "sys.modules": 1},
        id="async hook method, and its body",
    ),
    pytest.param("pytest_plugins = ['calc_plugin']\n", {"pytest_plugins": 1}, id="pytest_plugins"),
    pytest.param("__builtins__['len'] = None\n", {"__builtins__": 1}, id="__builtins__"),
    # decorators that register hooks, however spelled
    pytest.param(
        "@pytest.hookimpl(tryfirst=True)\ndef f():\n    pass\n",
        {"@hookimpl": 1, ".hookimpl": 1},
        id="@pytest.hookimpl()",
    ),
    pytest.param("@hookimpl\ndef f():\n    pass\n", {"@hookimpl": 1}, id="@hookimpl"),
    pytest.param(
        "@hookspec(firstresult=True)\nasync def f():\n    pass\n", {"@hookspec": 1}, id="@hookspec()"
    ),
    pytest.param("@hookimpl\nclass Plugin:\n    pass\n", {"@hookimpl": 1}, id="a class decorator"),
    pytest.param(
        "@functools.cache\n@handlers[0]\n@route('/x')\ndef f():\n    pass\n", {}, id="ordinary decorators"
    ),
    # exec and friends, and attribute access by name
    pytest.param("exec('x = 1')\n", {"exec()": 1}, id="exec"),
    pytest.param("eval('1')\n", {"eval()": 1}, id="eval"),
    pytest.param("compile('1', 'f', 'eval')\n", {"compile()": 1}, id="compile"),
    pytest.param("__import__('os')\n", {"__import__()": 1}, id="__import__"),
    pytest.param("setattr(sys, 'excepthook', h)\n", {"setattr(..., 'excepthook')": 1}, id="setattr"),
    pytest.param("delattr(os, '_exit')\n", {"delattr(..., '_exit')": 1}, id="delattr"),
    pytest.param("getattr(frame, 'f_back')\n", {"getattr(..., 'f_back')": 1}, id="getattr telltale"),
    pytest.param("getattr(os, 'execv')\n", {"getattr(..., 'execv')": 1}, id="getattr exec"),
    pytest.param("getattr(obj, 'name')\ngetattr(sys, 'argv')\ngetattr(sys)\n", {}, id="ordinary getattr"),
    pytest.param(
        "getattr(__import__('sys'), n)\n", {"__import__()": 1, COMPUTED: 1}, id="computed on a call"
    ),
    pytest.param("getattr(vars(m), n)\n", {COMPUTED: 1}, id="computed on vars()"),
    pytest.param(
        "import ctypes as c\ngetattr(c, n)\n", {"import ctypes": 1, COMPUTED: 1}, id="computed on an alias"
    ),
    pytest.param("getattr(pytest, n)\n", {COMPUTED: 1}, id="computed on the runner"),
    pytest.param("getattr(os, n)\n", {COMPUTED: 1}, id="computed on os"),
    pytest.param(
        "setattr(importlib, n, v)\n", {"setattr() with a computed name": 1}, id="computed on importlib"
    ),
    pytest.param("delattr(inspect, n)\n", {"delattr() with a computed name": 1}, id="computed on inspect"),
    pytest.param("getattr(self.handler, n)\ngetattr(obj, n)\nprint(sys, n)\n", {}, id="computed, ordinary"),
    # the module's namespace as a dict: the same reach spelled as a lookup
    pytest.param("import sys as s\ns.__dict__['modules']\n", {"sys.__dict__": 1}, id="sys.__dict__ aliased"),
    pytest.param("builtins.__dict__['len'] = f\n", {"builtins.__dict__": 1}, id="builtins.__dict__"),
    pytest.param("vars(os)['_exit'](0)\n", {VARS: 1}, id="vars(os)"),
    pytest.param(
        "obj.__dict__.update(d)\nself.__dict__\nvars(self)\nvars(obj)['x']\nvars()\n",
        {},
        id="ordinary __dict__",
    ),
    # strings that name the runner, and docstrings that are prose
    pytest.param("x = 'pytest'\n", {RUNNER_STRING: 1}, id="string"),
    pytest.param("os.environ['PYTEST_CURRENT_TEST']\n", {RUNNER_STRING: 1}, id="string env"),
    pytest.param("entry_points(group='pytest11')\n", {RUNNER_STRING: 1}, id="the plugin entry point group"),
    pytest.param("x = 'pytestify'\n", {}, id="a word that only contains pytest"),
    pytest.param("x = f'{a} pytest_runtest_call'\n", {RUNNER_STRING: 1}, id="f-string"),
    pytest.param(
        '"""Checked by pytest."""\n\ndef f():\n    """pytest and pluggy."""\n    return b"pytest"\n',
        {},
        id="prose",
    ),
]


@pytest.mark.parametrize(("source", "features"), FORMS)
def test_each_form_of_reaching_into_the_runner_is_found_by_its_own_rule(source: str, features: dict) -> None:
    # the runner's lists alone: what reaches outside the module is tests/unit/test_worldreach.py's
    assert runner_features(source, world=False) == Counter(features)


@pytest.mark.parametrize(("source", "features"), FORMS)
def test_a_second_occurrence_of_a_form_counts_and_is_new(source: str, features: dict) -> None:
    twice = source + "\n" + source
    assert runner_features(twice, world=False) == Counter({k: 2 * n for k, n in features.items()})
    # what was there once is there again: new
    assert introduced(source, twice, world=False) == sorted(features)
    assert introduced(twice, source) == []


@pytest.mark.parametrize("module", REACH_MODULES)
def test_every_runner_and_machinery_module_is_found_however_imported(module: str) -> None:
    assert runner_features(f"import {module}\n") == Counter({f"import {module}": 1})
    assert runner_features(f"import {module}.sub as s\n") == Counter({f"import {module}.sub": 1})
    assert runner_features(f"from {module}.sub import x\n") == Counter({f"from {module}.sub import ...": 1})


@pytest.mark.parametrize("attr", REACH_SYS_ATTRS)
def test_every_sys_attribute_that_reaches_is_found_in_each_spelling(attr: str) -> None:
    assert runner_features(f"sys.{attr}\n") == Counter({f"sys.{attr}": 1})
    assert runner_features(f"getattr(sys, {attr!r})\n") == Counter({f"getattr(..., {attr!r})": 1})
    assert runner_features(f"from sys import {attr}\n") == Counter({f"from sys import {attr}": 1})


@pytest.mark.parametrize("call", REACH_OS_CALLS)
def test_every_os_call_that_ends_or_replaces_the_process_is_found(call: str) -> None:
    assert runner_features(f"os.{call}(0)\n") == Counter({f"os.{call}()": 1})
    assert runner_features(f"from os import {call} as f\nf(0)\n") == Counter(
        {EXIT_FROM: 1, f"os.{call}()": 1}
    )


@pytest.mark.parametrize("attr", REACH_TELLTALES)
def test_every_telltale_attribute_is_found_on_any_object(attr: str) -> None:
    assert runner_features(f"obj.{attr}\n") == Counter({f".{attr}": 1})
    assert runner_features(f"setattr(obj, {attr!r}, v)\n") == Counter({f"setattr(..., {attr!r})": 1})


def test_source_that_does_not_parse_has_no_features_and_cannot_hide_old_ones() -> None:
    assert runner_features("def (:\n") is None
    assert runner_features("x = 1\0\n") is None  # a NUL byte: ValueError on 3.11, SyntaxError later
    assert introduced("x = 1\n", "def (:\n") == []  # the syntax rule refuses it elsewhere
    # an old version that did not parse hides nothing the new one adds
    assert introduced("def (:\n", "import sys\nsys.modules\n") == ["sys.modules"]
    assert introduced(None, "import gc\nimport pytest\n") == ["import gc", "import pytest"]


def test_only_the_features_the_edit_adds_are_introduced() -> None:
    old = "import sys\n\ndef f():\n    return sys.modules\n"
    assert introduced(old, old) == []
    assert introduced(old, old.replace("sys.modules", "sys.argv")) == []  # one taken away
    assert introduced(old, old + "import gc\n") == ["import gc"]  # one new kind, the old one kept
    assert introduced("import gc\n", "import pytest\n") == ["import pytest"]  # swapped: the new one


def test_what_a_check_names_is_a_judge_only_when_it_is_there_and_an_option_value_only_for_a_config(
    ws: Path,
) -> None:
    (ws / "short").write_text("a file named like an option's value\n")
    (ws / "pytest").write_text("a file named like the runner\n")
    checks = {
        "mypy": "mypy --config-file=mypy-strict.ini src",  # a config option's value is a judge
        "tests": "python -m pytest --tb=short tests/missing_test.py spec/unit",
        "bare": "python -m",  # ends where a module should come: nothing to protect, no crash
        "env": "env",
        "lone": "env pytest",  # the program env runs is no script, whatever the workspace holds
        "blank": " ",
        "quote": "pytest 'unclosed",  # not a command line shlex reads: no paths, no crash
    }
    judges = Judges.for_settings(settings(ws, checks=checks), "auto-debug")
    assert judges is not None
    found = sorted((s.rel, s.check) for s in judges.scripts)
    assert found == [("mypy-strict.ini", "mypy"), ("spec/unit", "tests")]
    assert "pytest" in judges.tools and "mypy" in judges.tools


def test_a_fixing_mode_may_create_only_what_the_allowance_lets_it_and_auto_doc_writes_pages(ws: Path) -> None:
    (ws / "src" / "pkg").mkdir()
    (ws / "src" / "pkg" / "__init__.py").write_text("")
    debug = Judges.for_settings(settings(ws), "auto-debug")
    assert debug is not None and debug.fixing
    assert "a fix may not create this file" in (debug.judged(change(ws, "notes.yaml", None, "x: 1\n")) or "")
    assert debug.judged(change(ws, "src/pkg/new.py", None, "x = 1\n")) is None
    doc = {"workspace": str(ws), "modes": {"auto-doc": {"enabled": True}}}
    (ws.parent / "doc.yaml").write_text(yaml.safe_dump(doc))
    pages = Judges.for_settings(load_config(ws.parent / "doc.yaml"), "auto-doc")
    assert pages is not None and not pages.fixing
    assert pages.judged(change(ws, "docs/new-page.md", None, "# new\n")) is None


def test_a_path_above_the_workspace_is_judged_as_written(ws: Path) -> None:
    judges = Judges.for_settings(settings(ws), "auto-debug")
    assert judges is not None
    assert judges.judged_path("../tests/test_x.py") is not None  # a test file, wherever it claims to be
    assert judges.judged_path("../src/app.py") is None
