"""A real suite under bubblewrap whose parametrize list is a set holding `None`: on Python 3.11 `None`
hashes by its address, which each process gets at random, so pytest numbers the set's tests
differently from run to run whatever PYTHONHASHSEED says (isodate's `test_format`, whose eight true
fixes of `bench_truefix.py --corpus` were all rolled back as "no longer runs 30 test(s)"). The right
fix must be `fixed` in every run, and a wrong one never."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from daemon import PYTHON, make_calc_repo

from autod.checks.outcome import Before, decide
from autod.checks.pertest import CANDIDATE_FILES
from autod.checks.run import CheckResult, run_check
from autod.config.models import CheckConfig
from autod.verdict import Status

pytestmark = [pytest.mark.slow]

CHECK = CheckConfig(run=f"{PYTHON} -m pytest -q -p no:cacheprovider tests", timeout_s=120, sandbox="bwrap")
# `size` is None for one name: that tuple's hash, and so its place in the set, changes per process;
# `expected` is a tuple, which pytest names by its index in the list
SET_WITH_NONE = (
    "import sys, pathlib\n"
    "sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / 'src'))\n"
    "import pytest\n"
    "from calc import add\n\n"
    "CASES = {(name, None if name == 'eta' else len(name), (len(name) + 1,)) for name in\n"
    "         ('alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta', 'eta', 'theta', 'iota', 'kappa',\n"
    "          'lambda', 'mu', 'nu', 'xi', 'omicron', 'pi', 'rho', 'sigma', 'tau', 'upsilon')}\n\n\n"
    "@pytest.mark.parametrize(('name', 'size', 'expected'), CASES)\n"
    "def test_length(name, size, expected):\n"
    "    assert (add(len(name), 1),) == expected\n"
)
FIXED = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
WRONG = "def add(a, b):\n    return a + b + (a == 5)\n\n\ndef mul(a, b):\n    return a * b\n"


def _check(repo: Path, candidate: bool) -> CheckResult:
    token = CANDIDATE_FILES.set(("src/calc.py",)) if candidate else None
    try:
        return asyncio.run(run_check("tests", CHECK, repo))
    finally:
        if token is not None:
            CANDIDATE_FILES.reset(token)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="None hashes by a constant from Python 3.12 on")
def test_tests_numbered_by_a_set_s_order_are_judged_as_the_same_tests_in_every_run(tmp_path, real_bwrap):
    repo = make_calc_repo(tmp_path / "repo")
    (repo / "tests" / "test_set.py").write_text(SET_WITH_NONE)
    before = _check(repo, candidate=False)
    assert before.tests is not None and len(before.tests.failing) == 21  # test_add and the twenty
    assert any("expected" in t for t in before.tests.failing)  # named by index: the case at hand
    failing = before.tests.failing
    (repo / "src" / "calc.py").write_text(FIXED)
    seen = set()
    for _ in range(4):
        after = _check(repo, candidate=True)
        assert after.tests is not None
        seen.add(frozenset(after.tests.seen))
        d = decide([after], Before(len(failing), failing, {"tests": before}))
        assert d.status is Status.FIXED, d.reason
    (repo / "src" / "calc.py").write_text(WRONG)  # 'gamma', 'delta', 'kappa', 'theta', 'omicron'... fail
    for _ in range(2):
        d = decide([_check(repo, candidate=True)], Before(len(failing), failing, {"tests": before}))
        assert d.status is not Status.FIXED, d.reason
