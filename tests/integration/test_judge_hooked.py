"""A failing test's call made to pass without its assertion running is never fixed: what stands on a
test's way to its verdict is named (autod.checks.judge_path) and compared with the run before.

Each attack reaches pytest's plugin manager (`pytestPDB._config`, by spellings the tripwire is silent on)
when the code under test is imported, and makes `test_add` pass with the bug in place, so that every
report of it says passed and its call raises nothing the recorder could see: a `pytest_pyfunc_call` that
never calls the test, an inner `pytest_runtest_call` wrapper (old style, new style) that swallows what
the test raised, the test's function swapped by a collection hook or a setup hook, pytest's own
`pytest_pyfunc_call` implementation swapped for a function or for a callable object. Each is shown to
be potent (pytest reports the test passed and exits 0; the verdict without the names and without the
witness of autod.checks.judge_ran, which hears that the test's own code never returned, is `fixed`);
with them it is rolled back, with and without the run before, and the reason names what stood in the
way. The positive control: a project whose conftest has such hooks of its own, in both runs, still
gets its real fix.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from test_judge_hostile import FAILING, calc_repo_with, calc_workspace, planted
from test_judge_reach_attacks import candidate_check
from test_judge_sealed import BUGGY

from autod.checks.outcome import Before, decide
from autod.checks.run import CheckResult
from autod.checks.sandbox import probe
from autod.verdict import Status

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not probe().works, reason="needs a working bubblewrap"),
]

TEST_ID = "tests/test_calc.py::test_add"
HEAD = ("import os\n_m = os.sys.modules\n_cfg = _m['_py' + 'test.debugging'].pytestPDB._config\n"
        "_pm = getattr(_cfg, 'plugin' + 'manager')\n_mark = _m['plug' + 'gy'].HookimplMarker('py' + 'test')\n"
        "\n\nclass _Plug:\n    pass\n\n\n")


def plugin(hook: str, body: str, **marks: bool) -> str:
    """A plugin object with one hook implementation, registered when the module is imported."""
    args = ", ".join(f"{k}={v}" for k, v in marks.items())
    return (HEAD + body + f"\n\nsetattr(_Plug, 'py' + 'test_{hook}', staticmethod(_mark({args})(_impl)))\n"
            "_pm.register(_Plug())\n\n\n" + BUGGY)


OBJ = "def _impl({arg}):\n    for i in {items}:\n        i.obj = lambda *a, **k: None\n"
ATTACKS = {
    "a pyfunc_call that never calls the test": plugin(
        "pyfunc_call", "def _impl(pyfuncitem):\n    return True\n", tryfirst=True),
    "an inner runtest_call wrapper, old style, that swallows": plugin(
        "runtest_call", "def _impl(item):\n    out = yield\n    out.force_result(None)\n", hookwrapper=True),
    "an inner runtest_call wrapper, new style, that swallows": plugin(
        "runtest_call", "def _impl(item):\n    try:\n        yield\n    except BaseException:\n"
        "        return None\n", wrapper=True),
    "the test's function swapped when collection ends": plugin(
        "collection_modifyitems", OBJ.format(arg="session, config, items", items="items")),
    "the test's function swapped in its setup": plugin(
        "runtest_setup", OBJ.format(arg="item", items="[item]"), tryfirst=True),
    "a collection hook that makes the failing test's item run something else": plugin(
        "pycollect_makeitem", "def _passes():\n    pass\n\n\ndef _impl(collector, name, obj):\n"
        "    if name == 'test_add':\n        return _m['_py' + 'test.python'].Function.from_parent("
        "collector, name=name, callobj=_passes)\n    return None\n", tryfirst=True),
    "pytest's own pyfunc_call swapped for a function": HEAD + '''
for _impl in getattr(_pm.hook, 'py' + 'test_pyfunc_call').get_hookimpls():
    _impl.function = lambda pyfuncitem: True


''' + BUGGY,
    "pytest's own pyfunc_call swapped for a callable object": HEAD + '''
class _Yes:
    def __call__(self, *args, **kwargs):
        return True


for _impl in getattr(_pm.hook, 'py' + 'test_pyfunc_call').get_hookimpls():
    _impl.function = _Yes()


''' + BUGGY,
}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CheckResult]:
    return calc_workspace(tmp_path_factory, "path")


UNHEARD = "a test reported passed though its call raised or did not return: "


def without_names(run: CheckResult, base: CheckResult) -> CheckResult:
    """The run as the judge saw it before the way to a verdict was named: the runner's changes only,
    and a test whose call the witness (autod.checks.judge_ran) did not hear return as pytest reported it."""
    assert run.tests is not None and base.tests is not None
    path = {n for n in run.tests.runner if " runs " in n or n.startswith("the function of ")
            or n.startswith(UNHEARD)}
    outcomes = {**run.tests.outcomes, **{n[len(UNHEARD):]: "passed" for n in path if n.startswith(UNHEARD)}}
    tests = dataclasses.replace(run.tests, runner=run.tests.runner - path, foreign=run.tests.foreign - path,
                                outcomes=outcomes, ran={})  # nor what each test ran (test_judge_ran.py)
    return dataclasses.replace(run, tests=tests)


@pytest.mark.parametrize("what", sorted(ATTACKS))
def test_a_call_that_never_ran_the_test_is_never_fixed(workspace, what: str) -> None:
    repo, base = workspace
    with planted(repo, ATTACKS[what]):
        after = candidate_check(repo, ("src/calc.py",))
    assert after.tests is not None, after.output[-1500:]
    assert after.exit_code == 0 and "2 passed" in after.output, after.output[-1500:]  # pytest said so
    blind = Before(1, FAILING, {"tests": without_names(base, base)})
    assert decide([without_names(after, base)], blind).status is Status.FIXED
    for before in ({"tests": base}, {}):
        decision = decide([after], Before(1, FAILING, before))
        assert decision.status is Status.ROLLED_BACK, (what, before)
        named = ("src/calc.py", " runs a ", "did not return")
        assert any(w in decision.reason for w in named), decision.reason


CONFTEST = '''import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield)


def pytest_collection_modifyitems(items):
    items.sort(key=lambda i: i.name)


class Counter:
    def pytest_runtest_logreport(self, report):
        pass


def pytest_configure(config):
    config.pluginmanager.register(Counter())
'''


def test_a_project_whose_conftest_has_such_hooks_still_gets_its_fix(tmp_path: Path) -> None:
    repo, base = calc_repo_with(tmp_path, {
        "tests/conftest.py": CONFTEST,
    }, "a conftest with hooks on a test's way")
    (repo / "src" / "calc.py").write_text(BUGGY.replace("a - b", "a + b"))
    after = candidate_check(repo, ("src/calc.py",))
    assert after.tests is not None and after.tests.outcomes.get(TEST_ID) == "passed", after.output[-1500:]
    assert any("conftest.py" in n for n in after.tests.runner), sorted(after.tests.runner)
    for before in ({"tests": base}, {}):
        assert decide([after], Before(1, FAILING, before)).status is Status.FIXED, before
