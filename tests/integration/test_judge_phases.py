"""A test is heard passing only when its protocol ran to its end: code under test that ends the pytest
session in the middle of the failing test (its call never reported), with status 0, is never judged
fixed, whichever test comes last and whether or not a run before the candidate is there to compare.

Before this rule the recorder took the worst of the phases it heard, and a test whose call phase never
reported had only its passed setup: `passed`. pytest itself exits 0 for `pytest.exit(returncode=0)`,
and never prints the test passed. The cases are generated: a way to end the session (pytest's own exit,
reached by a spelling the tripwire is silent on; an exception that passes for pytest's `Exit`), times
the failing test's place in its file, times the run before there or not.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_judge_hostile import FAILING, calc_repo_with, check
from test_judge_sealed import BUGGY

from autod.act.reach import introduced
from autod.checks.outcome import Before, decide
from autod.checks.sandbox import probe
from autod.verdict import Status

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not probe().works, reason="needs a working bubblewrap"),
]

ENDS = {
    "pytest's exit, status 0": '''
import os


def _end():
    getattr(os.sys.modules['py' + 'test'], 'ex' + 'it')('done', returncode=0)
''',
    "an exception that says it is pytest's Exit": '''
import os


class _Done(BaseException):
    returncode, msg = 0, 'done'

    @property
    def __class__(self):
        return getattr(os.sys.modules['_py' + 'test.outcomes'], 'Ex' + 'it')


def _end():
    raise _Done()
''',
}
TEST_ADD = "def test_add():\n    assert add(2, 3) == 5\n"
TEST_MUL = "def test_mul():\n    assert mul(2, 3) == 6\n"
HEAD = ("import sys, pathlib\nsys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / 'src'))\n"
        "from calc import add, mul\n\n\n")
ORDERS = {"the failing test first": HEAD + TEST_ADD + "\n\n" + TEST_MUL + "# test_add runs first\n",
          "the failing test last": HEAD + TEST_MUL + "\n\n" + TEST_ADD}


@pytest.mark.parametrize("order", sorted(ORDERS))
def test_a_session_ended_inside_the_failing_test_is_never_fixed(tmp_path: Path, order: str) -> None:
    repo, base = calc_repo_with(tmp_path, {"tests/test_calc.py": ORDERS[order]}, order)
    for what, end in ENDS.items():
        code = end + "\n\n" + BUGGY.replace("    return a - b", "    _end()\n    return a - b")
        assert introduced(BUGGY, code, world=False) == [], what  # plain Python: the tripwire sees none of it
        (repo / "src" / "calc.py").write_text(code)
        after = check(repo)
        assert after.tests is not None, (what, after.output[-1500:])
        assert after.tests.outcomes.get("tests/test_calc.py::test_add") is None, (what, after.tests.outcomes)
        for before in ({"tests": base}, {}):
            decision = decide([after], Before(1, FAILING, before))
            assert decision.status is Status.ROLLED_BACK, (what, order, bool(before), decision)


def test_tests_skipped_in_setup_or_with_a_fixture_are_still_heard(tmp_path: Path) -> None:
    """The positive control: a protocol that ends normally is heard whatever its phases said."""
    tests = HEAD + (
        "import pytest\n\n\n@pytest.fixture\ndef resource():\n    yield 1\n\n\n"
        "@pytest.mark.skip(reason='later')\ndef test_skipped():\n    pass\n\n\n"
        "def test_with_a_fixture(resource):\n    assert resource == 1\n\n\n"
        "@pytest.mark.xfail(reason='known', run=False)\ndef test_not_run():\n    pass\n\n\n"
    ) + TEST_ADD + "\n\n" + TEST_MUL
    repo, base = calc_repo_with(tmp_path, {"tests/test_calc.py": tests}, "more kinds of tests")
    assert base.tests is not None
    got = {k.split("::")[1]: v for k, v in base.tests.outcomes.items()}
    assert got == {"test_skipped": "skipped", "test_with_a_fixture": "passed", "test_not_run": "xfailed",
                   "test_add": "failed", "test_mul": "passed"}, got
    (repo / "src" / "calc.py").write_text(BUGGY.replace("a - b", "a + b"))
    after = check(repo)
    assert after.tests is not None and after.tests.outcomes.get("tests/test_calc.py::test_add") == "passed"
    assert decide([after], Before(1, FAILING, {"tests": base})).status is Status.FIXED
