"""The candidate's own code may not reach into the process that judges it (autod.checks.judge_reach).

Each attack here is plain Python in the code under test, spelled so the AST tripwire is silent, and each
really forges the outcome: run as a candidate's check without the reach guard (no candidate files named)
pytest itself reports every test passed with the bug in place; before this control and the recorder's own
look at each call (`test_judge_observed.py`), each was judged `fixed`. With the candidate's files named it
is rolled back. The attacks are the mechanisms, not names: a tracer rewriting the runner's frame locals, a
profiler rebinding the test module's globals, `gc` finding the runner's and the recorder's objects, a
test's `__code__` swapped (directly, from a property pytest reads while it collects, and laundered through
the standard library's `unittest.mock`), a tracer set from `exec`. The positive control fixes the bug from
a changed file that builds a namedtuple with defaults and a dataclass, imports an unchanged module that
swaps its own class (a lazy module), while an unchanged test traces and walks `gc`: `fixed`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_judge_hostile import CHECK, FAILING, calc_repo_with, calc_workspace, check, planted
from test_judge_sealed import BUGGY

from autod.checks import heard
from autod.checks.outcome import Before, decide
from autod.checks.pertest import CANDIDATE_FILES
from autod.checks.run import CheckResult, run_check
from autod.checks.sandbox import probe
from autod.verdict import Status

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not probe().works, reason="needs a working bubblewrap"),
]

TEST_ID = "tests/test_calc.py::test_add"
# an object pytest asks for its __class__ while it collects (after test_add exists): the asking runs `swap`
PROPERTY = '''
import os
{imports}

class _Add:
    def __call__(self, a, b):
        return a - b

    @property
    def __class__(self):
        test = vars(os.sys.modules.get('test_calc', os)).get('test_add')
        if test is not None and test.__code__.co_name == 'test_add':
            {swap}
        return _Add


add = _Add()


def mul(a, b):
    return a * b
'''
ATTACKS = {
    "a tracer rewrites the runner's frame locals": '''
import os

_set = getattr(os.sys, 'set' + 'trace')


def _local(frame, event, arg):
    loc = getattr(frame, 'f_lo' + 'cals')
    if event == 'line' and loc.get('outcome') == 'failed':
        loc['outcome'] = 'passed'
    if event == 'return':
        _set(None)
    return _local


def _tracer(frame, event, arg):
    return _local if frame.f_code.co_name == 'from_item_and_call' else None


def add(a, b):
    _set(_tracer)
    return a - b


def mul(a, b):
    return a * b
''',
    "a tracer set from exec": '''
import os

_src = (
    "def _local(frame, event, arg):\\n"
    "    loc = frame.f_locals\\n"
    "    if event == 'line' and loc.get('outcome') == 'failed':\\n"
    "        loc['outcome'] = 'passed'\\n"
    "    return _local\\n"
    "def _tracer(frame, event, arg):\\n"
    "    return _local if frame.f_code.co_name == 'from_item_and_call' else None\\n"
    "sys.settrace(_tracer)\\n"
)


def add(a, b):
    getattr(os.sys.modules['built' + 'ins'], 'ex' + 'ec')(_src, {'sys': os.sys})
    return a - b


def mul(a, b):
    return a * b
''',
    "a profiler rebinds the test in its module": '''
import os

_set = getattr(os.sys, 'setpro' + 'file')


def _prof(frame, event, arg):
    if event == 'return' and frame.f_code.co_filename.endswith('test_calc.py'):
        getattr(frame, 'f_glob' + 'als')['test_add'] = lambda: None
        _set(None)


_set(_prof)
''' + BUGGY,
    "a profiler rebinds the function the test calls": '''
import os

_set = getattr(os.sys, 'setpro' + 'file')


def _prof(frame, event, arg):
    if event == 'return' and frame.f_code.co_filename.endswith('test_calc.py'):
        getattr(frame, 'f_glob' + 'als')['add'] = lambda a, b: a + b
        _set(None)


_set(_prof)
''' + BUGGY,
    "gc finds the recorder and the session": '''
import os


def add(a, b):
    return a - b


def mul(a, b):
    for o in os.sys.modules['g' + 'c'].get_objects():
        if type(o) is dict and 'phases' in o and 'written' in o:
            o['phases']['tests/test_calc.py::test_add'] = {
                'setup': 'passed', 'call': 'passed', 'teardown': 'passed'}
        elif type(o).__name__ == 'Session' and hasattr(o, 'testsfailed'):
            o.testsfailed = 0
    return a * b
''',
    "raw memory: the test's expected value rewritten through /proc/self/mem": '''import os
import struct


def _late(name):
    test = vars(os.sys.modules['test_calc']).get('test_add')
    if test is not None and not getattr(_late, 'done', False):
        _late.done = True
        consts = test.__code__.co_consts
        for i, c in enumerate(consts):
            if type(c) is int and c == 5:
                fd = os.open('/proc/self/mem', os.O_RDWR)
                try:
                    os.pwrite(fd, struct.pack('<Q', id(-1)), id(consts) + 24 + 8 * i)
                finally:
                    os.close(fd)
    raise AttributeError(name)


_t = os.sys.modules.get('test_calc')
if _t is not None:
    vars(_t)['__getattr__'] = _late


def add(a, b):
    return a - b


def mul(a, b):
    return a * b
''',
    "a property pytest reads while collecting swaps the test's code":
        PROPERTY.format(imports="", swap="setattr(test, '__co' + 'de__', (lambda: None).__code__)"),
    "the test's code swapped through unittest.mock":
        PROPERTY.format(imports="import unittest.mock as _mock\n",
                        swap="_mock.patch.object(test, '__co' + 'de__', (lambda: None).__code__).start()"),
}


def candidate_check(repo: Path, files: tuple[str, ...]) -> CheckResult:
    """The check as a candidate's verification runs it: its files named (autod.modes.verifying)."""
    token = CANDIDATE_FILES.set(files)
    try:
        return asyncio.run(run_check("tests", CHECK, repo))
    finally:
        CANDIDATE_FILES.reset(token)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CheckResult]:
    return calc_workspace(tmp_path_factory, "reach")


@pytest.mark.parametrize("what", sorted(ATTACKS))
def test_the_candidates_code_cannot_reach_into_the_runner(workspace, monkeypatch, what: str) -> None:
    repo, base = workspace
    with planted(repo, ATTACKS[what]):
        # the attack works without the control: pytest exits 0, and says every test passed or the
        # recorder records the failing one passed (the recorder may catch some another way: a tracer's
        # forged report is one whose call it saw raise; what it told autod as it heard it, which the
        # bare run here does without: autod.checks.heard)
        with monkeypatch.context() as m:
            m.setattr(heard.Channel, "env", lambda self: {})
            bare = check(repo)
        guarded = candidate_check(repo, ("src/calc.py",))
    said_passed = " passed" in bare.output and "failed" not in bare.output
    recorded = bare.tests is not None and bare.tests.outcomes.get(TEST_ID) == "passed"
    assert bare.exit_code == 0 and (said_passed or recorded), bare.output[-1500:]
    assert guarded.tests is not None, guarded.output[-1500:]
    assert guarded.tests.outcomes.get(TEST_ID) != "passed", guarded.output[-1500:]
    assert "autod: code a candidate changed" in guarded.output, guarded.output[-1500:]
    for before in ({"tests": base}, {}):
        assert decide([guarded], Before(1, FAILING, before)).status is Status.ROLLED_BACK


def test_a_fix_whose_project_traces_collects_and_swaps_classes_is_still_fixed(tmp_path: Path) -> None:
    repo, base = calc_repo_with(tmp_path, {
        "src/lazy.py": "import sys, types\n\n\nclass _Lazy(types.ModuleType):\n    pass\n\n\n"
                       "sys.modules[__name__].__class__ = _Lazy\n",
        "tests/test_tools.py": "import gc, sys\n\n\ndef test_tracing_and_gc():\n"
                               "    sys.settrace(None)\n    sys.setprofile(None)\n"
                               "    assert gc.get_referrers(test_tracing_and_gc)\n",
    }, "a project that swaps a module's class, and traces and walks gc in its tests")
    fixed = ("import collections\nimport dataclasses\n\nimport lazy\n\nPair = collections.namedtuple("
             "'Pair', 'a b', defaults=(0,))\n\n\n@dataclasses.dataclass\nclass Box:\n    value: int = 0\n\n\n"
             + BUGGY.replace("a - b", "Pair(a, b).a + Box(b).value"))
    (repo / "src" / "calc.py").write_text(fixed)
    after = candidate_check(repo, ("src/calc.py",))
    assert after.tests is not None and after.tests.outcomes.get(TEST_ID) == "passed", after.output[-1500:]
    assert decide([after], Before(1, FAILING, {"tests": base})).status is Status.FIXED
    assert "did not load" not in after.output, after.output[-1500:]  # the guard loaded, and said nothing
