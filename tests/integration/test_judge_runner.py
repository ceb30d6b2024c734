"""Code under test that changes the test runner itself, so that pytest reports a failing test passed,
is never judged fixed: the recorder compares the runner with what it was before any of the project's
code ran (autod.checks.judge_plugin), and the judge reads a run whose runner changed beyond what the
run before the candidate showed as a failed run (autod.checks.outcome).

The attacks are generated: a way to reach pytest's modules that the AST tripwire does not name (a
module's own `sys`, by attribute or computed name; module and class names assembled from pieces) times
a part of pytest's reporting path to change (a report's constructor, an item's `runtest`, a hook's
code, a name the runner's module calls) times when (at import, or from inside the buggy function
the first time a test calls it). Each case must really forge the outcome (pytest itself reports every
test passed and exits 0): before this control each one was judged `fixed`.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from daemon import git
from test_judge_hostile import FAILING, calc_repo_with, calc_workspace, check
from test_judge_sealed import BUGGY

from autod.act.reach import introduced
from autod.checks.outcome import Before, decide
from autod.checks.run import CheckResult
from autod.checks.sandbox import probe
from autod.verdict import Status

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not probe().works, reason="needs a working bubblewrap"),
]

# how the code under test gets pytest's modules: every spelling the tripwire is silent on
REACH = [
    "import os\n_mods = os.sys.modules\n",
    "import logging\n_mods = logging.sys.modules\n",
    "import warnings\n_mods = getattr(warnings, 'sy' + 's').modules\n",
    "import shutil as _sh\n_mods = vars(_sh)['sy' + 's'].modules\n",
]
PY = "'_py' + 'test"  # a module name, assembled: `_mods[PY + '.reports']`

# what is changed, as a function `_forge()` run at import or at the buggy function's first call
TARGETS = {
    "a report's constructor says passed": f'''
def _forge():
    cls = getattr(_mods[{PY}.reports'], 'Test' + 'Report')
    orig = cls.__init__

    def init(self, *args, **kwargs):
        orig(self, *args, **kwargs)
        self.outcome = 'passed'
        setattr(self, 'long' + 'repr', None)
    cls.__init__ = init
''',
    "an item's runtest does nothing": f'''
def _forge():
    getattr(_mods[{PY}.python'], 'Func' + 'tion').runtest = lambda self: None
''',
    "the hook that calls a test has its code swapped": f'''
def _forge():
    hook = getattr(_mods[{PY}.python'], 'py' + 'test_pyfunc_call')
    hook.__code__ = (lambda pyfuncitem: True).__code__
''',
    "a name the runner's module calls is rebound": f'''
def _forge():
    runner = _mods[{PY}.runner']
    base = runner.CallInfo

    class Quiet:
        @staticmethod
        def from_call(func, when, reraise=None):
            info = base.from_call(func, when, reraise)
            return info if info.excinfo is None else base.from_call(lambda: None, when)
    runner.CallInfo = Quiet
''',
}
# which targets still forge the test's own outcome when changed from inside the buggy function, while
# that test runs: only what pytest does after the call
LATE = ("a report's constructor says passed",)
AT_IMPORT = "_forge()\n"
AT_FIRST_CALL = '''
_forged = []


def add(a, b):
    if not _forged:
        _forged.append(_forge())
    return a - b
'''


def candidates() -> list[tuple[str, str]]:
    """(what it does, calc.py): every target at import, the late ones at the first call, each with a
    reach spelling drawn (seeded) from REACH, and every reach spelling used."""
    rng = random.Random(7)
    cases = [(t, "at import") for t in TARGETS] + [(t, "at the first call") for t in LATE]
    reach = list(REACH) + [rng.choice(REACH) for _ in range(len(cases) - len(REACH))]
    rng.shuffle(reach)
    out = []
    for (target, when), how in zip(cases, reach, strict=True):
        late = when != "at import"
        body = BUGGY.replace("def add(a, b):\n    return a - b\n", AT_FIRST_CALL) if late else BUGGY
        code = how + TARGETS[target] + (AT_IMPORT if when == "at import" else "") + "\n\n" + body
        out.append((f"{target}, {when}, via {how.splitlines()[-1]}", code))
    return out


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CheckResult]:
    return calc_workspace(tmp_path_factory, "runner")


def test_no_change_to_the_runner_makes_a_failing_test_fixed(workspace):
    repo, base = workspace
    assert base.tests is not None and base.tests.runner  # pytest changes itself as it configures
    try:
        for what, code in candidates():
            assert introduced(BUGGY, code, world=False) == [], what  # plain Python: the tripwire is silent
            (repo / "src" / "calc.py").write_text(code)
            after = check(repo)
            assert after.tests is not None, (what, after.output[-1500:])
            # the forgery works: pytest itself reports every test passed, and says so by exit 0 (the
            # recorder may still hear test_add failed: it saw its call raise, test_judge_observed.py)
            assert " passed" in after.output and "failed" not in after.output, (what, after.output[-800:])
            assert after.exit_code == 0, what
            assert after.tests.runner - base.tests.runner, what
            decision = decide([after], Before(1, FAILING, {"tests": base}))
            assert decision.status is Status.ROLLED_BACK, (what, decision)
            assert "test runner itself changed" in decision.reason
            # without the run before to compare with, the change is still the workspace's code
            alone = decide([after], Before(1, FAILING, {}))
            assert alone.status is Status.ROLLED_BACK, (what, alone)
            git(repo, "checkout", "-q", "--", ".")
    finally:
        git(repo, "checkout", "-q", "--", ".")


def test_reading_the_runner_and_a_project_that_patches_pytest_itself_still_fix(tmp_path):
    """The positive control. The project's conftest patches pytest when it loads (as hypothesis's
    plugin does) and one of its tests monkeypatches a builtin while it runs; the candidate reaches
    pytest's modules the same ways and only reads them, and fixes the bug. The run before shows the
    conftest's change too, so the fix is `fixed`."""
    repo, base = calc_repo_with(tmp_path, {
        "tests/conftest.py": "import _pytest.fixtures as f\n\n_orig = f.FixtureFunctionMarker.__call__\n\n\n"
                             "def _call(self, function):\n    return _orig(self, function)\n\n\n"
                             "f.FixtureFunctionMarker.__call__ = _call\n",
        "tests/test_patches.py": "import builtins\n\n\ndef test_input(monkeypatch):\n"
                                 "    monkeypatch.setattr(builtins, 'input', lambda *a: 'y')\n"
                                 "    assert input() == 'y'\n",
    }, "a conftest that patches pytest, a test that patches a builtin")
    reads = "".join(REACH) + f"_seen = [_mods[{PY}.reports'], _mods[{PY}.runner'].call_and_report]\n\n\n"
    (repo / "src" / "calc.py").write_text(reads + BUGGY.replace("a - b", "a + b"))
    after = check(repo)
    assert after.tests is not None and after.tests.runner, after.output[-1500:]
    assert decide([after], Before(1, FAILING, {"tests": base})).status is Status.FIXED
