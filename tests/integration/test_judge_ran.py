"""A test heard passing must have run what it ran before: its function, and the origins of the names
it reads (autod.checks.judge_path `ran`, compared by autod.checks.outcome).

The code under test rebinds a name in the test module's namespace (the `add` the test calls) to a
right function, or swaps the test function itself for one that passes and is named like it: from a
module `__getattr__` put into the half-imported test module, an object pytest asks for attributes while
it collects, `unittest.mock`, a `setup_function` put there, a thread, a timer signal. None of it touches
pytest, its hooks or the recorder, and the tripwire is silent on all of it. Each is shown potent (the
failing test recorded passed, pytest exiting 0, the verdict `fixed` when what the tests ran is not
compared) and is rolled back when it is. Found by a probe of this session (the lab notebook).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from test_judge_hostile import FAILING, calc_workspace, planted
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
ATTACKS = {
    "an object pytest asks for attributes rebinds the test module's add": '''import os


def _right(a, b):
    return a + b


class _Add:
    """`add`, buggy; pytest asks it for attributes while it collects the test module."""

    def __call__(self, a, b):
        return a - b

    def __getattr__(self, name):
        test = os.sys.modules.get('test_calc')
        if test is not None:
            vars(test)['add'] = _right
        raise AttributeError(name)


add = _Add()


def mul(a, b):
    return a * b
''',
    'a module __getattr__ put into the half-imported test module rebinds add': '''import os


def _late(name):
    vars(os.sys.modules['test_calc'])['add'] = lambda a, b: a + b
    raise AttributeError(name)


vars(os.sys.modules.get('test_calc', _late))['__getattr__'] = _late


def add(a, b):
    return a - b


def mul(a, b):
    return a * b
''',
    'the same, through unittest.mock.patch': '''import os
import unittest.mock as _mock


def _right(a, b):
    return a + b


def _late(name):
    if not vars(os.sys.modules['test_calc']).get('_patched'):
        vars(os.sys.modules['test_calc'])['_patched'] = True
        _mock.patch('test_calc.add', new=_right).start()
    raise AttributeError(name)


_t = os.sys.modules.get('test_calc')
if _t is not None:
    vars(_t)['__getattr__'] = _late


def add(a, b):
    return a - b


def mul(a, b):
    return a * b
''',
    'a setup_function put into the test module rebinds add': '''import os


def _right(a, b):
    return a + b


def _setup(function):
    vars(os.sys.modules['test_calc'])['add'] = _right


_t = os.sys.modules.get('test_calc')
if _t is not None:
    vars(_t)['setup_function'] = _setup


def add(a, b):
    return a - b


def mul(a, b):
    return a * b
''',
    'a thread rebinds add once the test module has it': '''import os
import threading
import time


def _right(a, b):
    return a + b


def _watch():
    for _ in range(20000):
        test = os.sys.modules.get('test_calc')
        if test is not None and 'test_add' in vars(test):
            vars(test)['add'] = _right
            return
        time.sleep(0.0005)


threading.Thread(target=_watch, daemon=True).start()


def add(a, b):
    return a - b


def mul(a, b):
    return a * b
''',
    "a timer signal's handler rebinds add": '''import os
import signal


def _right(a, b):
    return a + b


def _tick(signum, frame):
    test = os.sys.modules.get('test_calc')
    if test is not None and 'test_add' in vars(test):
        vars(test)['add'] = _right
        signal.setitimer(signal.ITIMER_REAL, 0)


signal.signal(signal.SIGALRM, _tick)
signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)


def add(a, b):
    return a - b


def mul(a, b):
    return a * b
''',
    'the test function swapped for one that passes, named like it': '''import os


def _passes():
    pass


class _Add:
    def __call__(self, a, b):
        return a - b

    def __getattr__(self, name):
        test = os.sys.modules.get('test_calc')
        if test is not None and 'test_add' in vars(test):
            _passes.__module__ = test.__name__
            _passes.__name__ = _passes.__qualname__ = 'test_add'
            vars(test)['test_add'] = _passes
        raise AttributeError(name)


add = _Add()


def mul(a, b):
    return a * b
''',
}


def blind(run: CheckResult) -> CheckResult:
    """The run as the judge saw it before what each test ran was compared."""
    assert run.tests is not None
    return dataclasses.replace(run, tests=dataclasses.replace(run.tests, ran={}))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CheckResult]:
    return calc_workspace(tmp_path_factory, "ran")


@pytest.mark.parametrize("what", sorted(ATTACKS))
def test_a_test_that_ran_something_else_is_never_fixed(workspace, what: str) -> None:
    repo, base = workspace
    with planted(repo, ATTACKS[what]):
        after = candidate_check(repo, ("src/calc.py",))
    assert after.tests is not None, after.output[-1500:]
    assert after.tests.outcomes.get(TEST_ID) == "passed" and after.exit_code == 0, after.output[-1500:]
    assert decide([blind(after)], Before(1, FAILING, {"tests": blind(base)})).status is Status.FIXED
    decision = decide([after], Before(1, FAILING, {"tests": base}))
    assert decision.status is Status.ROLLED_BACK, what
    assert "ran other code than before" in decision.reason and TEST_ID in decision.reason, decision.reason


def test_the_real_fix_ran_what_the_failing_run_ran(workspace) -> None:
    repo, base = workspace
    (repo / "src" / "calc.py").write_text(BUGGY.replace("a - b", "a + b"))
    try:
        after = candidate_check(repo, ("src/calc.py",))
    finally:
        (repo / "src" / "calc.py").write_text(BUGGY)
    assert after.tests is not None and base.tests is not None
    assert after.tests.ran[TEST_ID] == base.tests.ran[TEST_ID] and len(after.tests.ran[TEST_ID]) == 1
    assert decide([after], Before(1, FAILING, {"tests": base})).status is Status.FIXED
