"""A test is heard passing only if its call, seen from around it, raised nothing: a report made after
the call that says otherwise was made to say so (autod.checks.judge_plugin, `pytest_runtest_call`).

The attacks reach pytest's plugin manager, which pytest itself hands out (`pytestPDB._config`), by
spellings the tripwire is silent on, and forge the report after the call: a plugin registered at import
or from inside the buggy function with a hook wrapper around `pytest_runtest_makereport`, or a
`pytest_runtest_logreport` hook, that says passed; the runner's own `HookImpl.function` swapped; a
patch of `TestReport.from_item_and_call` that forges one report and puts itself back. Each is first
shown to forge the verdict without this control (the code before it), with and without the run before.
The positive control: a project conftest with a report wrapper that only reads, an xfail test whose
call raises, and the real fix: `fixed`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_judge_hostile import FAILING, calc_repo_with, calc_workspace, check, planted
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
CONFIG = "import os\n_m = os.sys.modules\n_cfg = _m['_py' + 'test.debugging'].pytestPDB._config\n"
WRAPPER = '''

def _wrap(item, call):
    rep = yield
    rep.outcome = 'passed'
    return rep


class _Plug:
    pass


setattr(_Plug, 'py' + 'test_runtest_makereport',
        staticmethod(_m['plug' + 'gy'].HookimplMarker('py' + 'test')(wrapper=True)(_wrap)))
'''
ATTACKS = {
    "a plugin's report wrapper, registered at import": CONFIG + WRAPPER
    + "getattr(_cfg, 'plugin' + 'manager').register(_Plug())\n\n\n" + BUGGY,
    "a plugin's report wrapper, registered from the buggy function": CONFIG + WRAPPER + '''

def add(a, b):
    pm = getattr(_cfg, 'plugin' + 'manager')
    if pm.get_plugin('calc-plug') is None:
        pm.register(_Plug(), 'calc-plug')
    return a - b


def mul(a, b):
    return a * b
''',
    "a plugin's logreport hook that says passed": CONFIG + '''

def _log(report):
    report.outcome = 'passed'


class _Plug:
    pass


setattr(_Plug, 'py' + 'test_runtest_logreport',
        staticmethod(_m['plug' + 'gy'].HookimplMarker('py' + 'test')(tryfirst=True)(_log)))
getattr(_cfg, 'plugin' + 'manager').register(_Plug())


''' + BUGGY,
    "the runner's own report hook swapped": CONFIG + '''
_caller = getattr(getattr(_cfg, 'plugin' + 'manager').hook, 'py' + 'test_runtest_makereport')
for _impl in _caller.get_hookimpls():
    if _impl.plugin_name == 'runner':
        _orig = _impl.function

        def _forged(item, call, _orig=_orig):
            rep = _orig(item, call)
            rep.outcome = 'passed'
            return rep
        _impl.function = _forged


''' + BUGGY,
    "a report factory that forges once and puts itself back": '''import os

_cls = getattr(os.sys.modules['_py' + 'test.reports'], 'Test' + 'Report')
_orig = _cls.__dict__['from_item_and_call']


def _forged(klass, item, call):
    _cls.from_item_and_call = _orig
    rep = _orig.__func__(klass, item, call)
    rep.outcome = 'passed'
    return rep


def add(a, b):
    if _cls.__dict__['from_item_and_call'] is _orig:
        _cls.from_item_and_call = classmethod(_forged)
    return a - b


def mul(a, b):
    return a * b
''',
}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CheckResult]:
    return calc_workspace(tmp_path_factory, "observed")


@pytest.mark.parametrize("what", sorted(ATTACKS))
def test_a_report_forged_after_the_call_is_never_fixed(workspace, what: str) -> None:
    repo, base = workspace
    with planted(repo, ATTACKS[what]):
        after = check(repo)
    assert after.tests is not None, after.output[-1500:]
    assert after.tests.outcomes.get(TEST_ID) == "failed", (what, after.tests.outcomes)
    for before in ({"tests": base}, {}):
        assert decide([after], Before(1, FAILING, before)).status is Status.ROLLED_BACK, (what, before)


def test_a_project_that_reads_its_reports_and_expects_failures_is_still_fixed(tmp_path: Path) -> None:
    repo, base = calc_repo_with(tmp_path, {
        "tests/conftest.py": "import pytest\n\nSEEN = []\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
                             "def pytest_runtest_makereport(item, call):\n    out = yield\n"
                             "    SEEN.append(out.get_result().outcome)\n",
        "tests/test_known.py": "import pytest\n\n\n@pytest.mark.xfail(reason='known', strict=False)\n"
                               "def test_known():\n    assert 1 == 2\n",
    }, "a conftest that reads reports, an expected failure")
    assert base.tests is not None and base.tests.outcomes["tests/test_known.py::test_known"] == "xfailed"
    (repo / "src" / "calc.py").write_text(BUGGY.replace("a - b", "a + b"))
    after = check(repo)
    assert after.tests is not None and after.tests.outcomes.get(TEST_ID) == "passed", after.output[-1500:]
    assert decide([after], Before(1, FAILING, {"tests": base})).status is Status.FIXED
