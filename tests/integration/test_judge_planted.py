"""What a candidate's check creates for later runs to load is source, and is taken away.

Probes of the seventh session planted, from the code under test while its check ran, what a later
run loads: `tests/conftest.py` beside a `tests/.gitignore` naming both, `tests/test_zz/conftest.py` in a
new directory, a package `src/calc/__init__.py` that shadows `src/calc.py`, a root `pyproject.toml`
whose `pythonpath` and `-p` load a plugin from a planted zip, a `tests/test_a.txt` pytest collects as a
doctest, and the test file itself rewritten in place. The candidate was rolled back, what it wrote
stayed, and every later run of the plain bug was `fixed`. Now what a candidate's run created is a
changed source unless git ignores it, and what Python or pytest loads is one wherever it lies
(autod.checks.planted, autod.checks.sourcefiles): such a candidate never passes, so never reaches the
operator's tree through the mirror; verified in place, what it wrote is named in an error, never
deleted.
"""

from __future__ import annotations

import subprocess
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
def _attack(name: str) -> str:
    return (Path(__file__).parent / "judge_attacks" / f"attack_{name}.txt").read_text()


ATTACKS = {
    "a pyproject.toml whose pythonpath and -p load a plugin from a planted zip":
        (_attack("persist_ini_zip"), ["pyproject.toml", "tests/helpers.zip"]),
    "tests/test_a.txt, which pytest collects as a doctest":
        (_attack("plant_doctest_txt"), ["tests/test_a.txt"]),
    "tests/test_calc.py rewritten in place, its times put back": (_attack("poison_testfile"), []),
    "tests/conftest.py beside a tests/.gitignore naming both":
        (_attack("nested_gitignore"), ["tests/conftest.py", "tests/.gitignore"]),
    "tests/test_zz/conftest.py in a new directory":
        (_attack("newdir_conftest"), ["tests/test_zz/conftest.py"]),
    "a package src/calc/ that shadows src/calc.py": (_attack("shadow_package"), ["src/calc/__init__.py"]),
}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CheckResult]:
    return calc_workspace(tmp_path_factory, "planted")


@pytest.mark.parametrize("what", sorted(ATTACKS))
def test_what_a_candidates_check_plants_for_later_runs_is_source_and_named_never_deleted(workspace, what):
    """Verified in place (as here): the candidate is rolled back, what it created is a changed source
    and left in the tree (a file that appeared during the run may be the operator's), named in an error
    (autod.checks.planted); on the mirror it is removed (tests/unit/test_planted.py)."""
    repo, base = workspace
    code, files = ATTACKS[what]
    try:
        with planted(repo, code):
            after = candidate_check(repo, ("src/calc.py",))
        assert decide([after], Before(1, FAILING, {"tests": base})).status is Status.ROLLED_BACK
        assert decide([after], Before(1, FAILING, {})).status is Status.ROLLED_BACK
        assert set(files) <= set(after.changed), (after.changed, after.output[-800:])
        assert [f for f in files if not (repo / f).exists()] == []  # never deleted in the operator's tree
    finally:
        for f in files:
            (repo / f).unlink(missing_ok=True)
        subprocess.run(["git", "-C", str(repo), "checkout", "-q", "--", "tests"], check=True)
