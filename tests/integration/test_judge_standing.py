"""What stands in for a test's own code is named, and no namespace is read by name while a key in it
is not a str: three ways a candidate kept the bug and was judged `fixed` (a probe of the seventh
session, the lab notebook), each in variants.

- A key of a `str` subclass put into a namespace autod reads by name runs its own `__eq__` in the middle
  of the read: put into the test module, it rebound `add` after the digest of what the test ran had
  read it (`autod.checks.judge_path.ran`).
- An attribute of the test item's own in place of its class's code (`item.runtest = noop`, set from a
  `setup_function` put into the test module that walks frames to `request.node`): the test never runs,
  with no class, hook or function of pytest's changed.
- A value that runs code when read but is not callable (a descriptor with `__get__` only) put on a
  pytest class: the runner comparison judged only callables and three descriptor types.

A fourth probe of the session added: a second, right `add` compiled in `calc.py` bound into the test
module (it reads as the same file and qualified name: now told apart by what the module binds),
`config.hook` wrapped (what `item.ihook` resolves to) and one hook caller's `_hookexec` swapped (now
the objects a test's call goes through are kept at configure time and compared around each call).

Each is first shown potent (the failing test recorded passed and the verdict `fixed` when what the
recorder names for it is left out) and then rolled back."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from test_judge_hostile import FAILING, calc_workspace, planted
from test_judge_reach_attacks import candidate_check

from autod.checks.outcome import Before, decide
from autod.checks.run import CheckResult
from autod.checks.sandbox import probe
from autod.verdict import Status

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not probe().works, reason="needs a working bubblewrap"),
]

TEST_ID = "tests/test_calc.py::test_add"
TAIL = "\n\ndef add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
POISON = '''import os

_test = os.sys.modules[{module!r}]


def _right(a, b):
    return a + b


class _Key(str):
    def __hash__(self):
        return hash({name!r})

    def __eq__(self, other):
        if other == {name!r}:
            vars(os.sys.modules['test_calc'])['add'] = _right
        return str.__eq__(self, other)


vars(_test)[_Key('_k')] = 0
'''
FRAME_WALK = '''import os

_frame = getattr(os.sys, '_get' + 'frame')


def _nothing(*args, **kwargs):
    return None


def _setup(function):
    f = _frame(1)
    while f is not None:
        req = getattr(f, 'f_' + 'locals').get('request')
        node = getattr(req, 'node', None)
        if getattr(node, 'name', None) == 'test_add':
            setattr(node, {attribute!r}, _nothing)
            return
        f = getattr(f, 'f_' + 'back')


_t = os.sys.modules.get('test_calc')
if _t is not None:
    vars(_t)['setup_function'] = _setup
'''
DESCRIPTOR = '''import os

_frame = getattr(os.sys, '_get' + 'frame')
_py = os.sys.modules['_py' + 'test.python']
_real = vars(_py.{owner})[{attribute!r}]


def _pass(*args, **kwargs):
    return None


class _Stand:
    """Not callable, none of staticmethod, classmethod or property."""

    def __get__(self, inst, owner=None):
        if inst is None:
            return self
        if inst.name == 'test_add' and _frame(1).f_code.co_name == 'py' + 'test_pyfunc_call':
            return _pass
        return _real.__get__(inst, owner)

    def __set__(self, inst, value):
        _real.__set__(inst, value)


setattr(_py.Function, {attribute!r}, _Stand())
'''
def _attack(name: str) -> str:
    return (Path(__file__).parent / "judge_attacks" / f"attack_{name}.txt").read_text()


ATTACKS = {
    "a twin add compiled in calc.py bound into the test module (a run before to compare with)":
        (_attack("twin_setup"), "ran"),
    "config.hook, what item.ihook resolves to, wrapped": (_attack("ihook_relay"), "runner"),
    "one hook caller's executor swapped": (_attack("hookexec_caller"), "runner"),
    "a str-subclass key in the test module rebinds add while the digest reads 'locals'":
        (POISON.format(module="test_calc", name="locals"), "ran"),
    "a str-subclass key in the test module rebinds add when pytest reads 'setup_function'":
        (POISON.format(module="test_calc", name="setup_function"), "ran"),
    "the test item's own runtest, set from a frame walk": (FRAME_WALK.format(attribute="runtest"), "runner"),
    "a descriptor that is not callable on Function.obj":
        (DESCRIPTOR.format(owner="PyobjMixin", attribute="obj"), "runner"),
}


def blind(run: CheckResult, what: str) -> CheckResult:
    """The run as the judge saw it before this session's controls: no digest of what each test ran, or
    nothing named of what stood in for its code."""
    assert run.tests is not None
    kept = frozenset(x for x in run.tests.runner if "has its own" not in x and "holds a name" not in x
                     and "is now a" not in x and ".obj" not in x and "goes through moved" not in x)
    tests = dataclasses.replace(run.tests, runner=kept, foreign=run.tests.foreign & kept)
    return dataclasses.replace(run, tests=dataclasses.replace(tests, ran={}) if what == "ran" else tests)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CheckResult]:
    return calc_workspace(tmp_path_factory, "standing")


@pytest.mark.parametrize("what", sorted(ATTACKS))
def test_what_stands_in_for_a_tests_code_is_never_fixed(workspace, what: str) -> None:
    repo, base = workspace
    code, control = ATTACKS[what]
    with planted(repo, code if "def add" in code else code + TAIL):
        after = candidate_check(repo, ("src/calc.py",))
    assert after.tests is not None, after.output[-1500:]
    if after.tests.outcomes.get(TEST_ID) == "passed":  # else defused where it struck: a digest that
        # reads no name in a namespace holding such a key never runs its `__eq__` (potent on the old code)
        blinded = decide([blind(after, control)], Before(1, FAILING, {"tests": blind(base, control)}))
        assert blinded.status is Status.FIXED, what
    # a twin reads like the function it stands for: only a run before tells them apart (SECURITY.md)
    for before in ({"tests": base},) if "twin" in what else ({"tests": base}, {}):
        decision = decide([after], Before(1, FAILING, before))
        assert decision.status is Status.ROLLED_BACK, (what, before.keys(), decision.reason)
