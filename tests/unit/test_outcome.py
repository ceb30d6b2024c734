"""One pure function decides what a verification's check runs mean: fixed, improved, or rolled back."""

from __future__ import annotations

import pytest

from autod.checks.outcome import (
    Before,
    Decision,
    broken,
    count_failures,
    counted_failures,
    decide,
    failing_tests,
)
from autod.checks.run import CheckResult


def run(output: str, exit_code: int = 1, **kw: object) -> CheckResult:
    return CheckResult("tests", exit_code, output, 100, **kw)  # type: ignore[arg-type]


def pytest_out(*failed: str, passed: int = 3) -> str:
    lines = [f"FAILED {t} - AssertionError" for t in failed]
    return "\n".join(["=== short test summary info ===", *lines,
                      f"==== {len(failed)} failed, {passed} passed in 0.12s ===="])


BEFORE = Before(3, frozenset({"tests/t.py::test_a", "tests/t.py::test_b", "tests/t.py::test_c"}))


def test_every_check_passing_is_fixed():
    assert decide([run("5 passed", 0)], BEFORE).status == "fixed"


def test_fewer_failures_and_no_new_one_is_improved():
    d = decide([run(pytest_out("tests/t.py::test_a"))], BEFORE)
    assert (d.status, d.reason) == ("improved", "failures 3 -> 1")


def test_fewer_failures_but_a_new_one_is_no_improvement():
    d = decide([run(pytest_out("tests/t.py::test_a", "tests/t.py::test_new"))], BEFORE)
    assert d.status == "rolled_back" and d.reason == "new failures: tests/t.py::test_new"


def test_the_same_failures_are_no_progress():
    d = decide([run(pytest_out("tests/t.py::test_a", "tests/t.py::test_b", "tests/t.py::test_c"))], BEFORE)
    assert d.status == "rolled_back" and d.reason.startswith("checks still fail (3 failures, before 3)")


def test_a_check_that_cannot_start_proves_nothing_even_with_fewer_failures():
    d = decide([run("", 127, error="pytest: not found")], BEFORE)
    assert d.status == "rolled_back" and d.reason == "check tests cannot start: pytest: not found"


def test_an_import_the_edit_broke_is_no_improvement():
    """Found by bench_reallib: pytest exits 4 on a conftest import error, runs no test, and the old
    count fell back to 1 failure: '9 -> 1' kept an edit that broke the library's import."""
    out = "ImportError while loading conftest '/w/tests/conftest.py'.\ntests/conftest.py:1: in <module>\n"
    d = decide([run(out, 4)], Before(9))
    assert d.status == "rolled_back" and "broke before its tests ran (exit 4)" in d.reason
    collection = "ERROR collecting tests/test_x.py\n=== 1 error in 0.10s ===\n"
    assert decide([run(collection, 2)], Before(9)).status == "rolled_back"
    nothing = "=== no tests ran in 0.01s ===\n"
    assert broken(run(nothing, 5)) is not None


def test_counts_without_names_must_come_from_a_summary_never_a_guess():
    assert decide([run("=== 1 failed, 4 passed in 0.2s ===")], Before(3)).status == "improved"
    assert counted_failures(run("something went wrong")) is None
    assert decide([run("something went wrong")], Before(3)).status == "rolled_back"
    assert count_failures(run("something went wrong")) == 1  # an event still counts its failure


def test_a_check_that_changed_sources_fails_the_verification_whatever_it_says():
    d = decide([run("5 passed", 0, changed=["src/x.py"])], BEFORE)
    assert d.status == "rolled_back"
    assert "the checks passed but check tests changed source files during verification (src/x.py)" in d.reason


def test_a_failing_focus_settles_it():
    d = decide([], BEFORE, focus=CheckResult("tests:focus", 1, "1 failed", 5))
    assert d.status == "rolled_back" and d.reason == "focus of check tests failed; full check not run"


def test_failing_tests_reads_pytests_summary_with_parameters():
    out = pytest_out("tests/t.py::test_a[1]", "tests/t.py::TestX::test_b")
    assert failing_tests(out) == frozenset({"tests/t.py::test_a[1]", "tests/t.py::TestX::test_b"})
    assert failing_tests("no summary here") is None


def test_no_check_to_verify_with_is_a_rollback_with_its_own_reason():
    assert decide([], BEFORE) == Decision("rolled_back", "no configured check to verify the edits with")


def test_a_passing_check_does_not_hide_the_named_failures_of_the_next_one():
    """Counted over every failing run: a passing run first must not end the count (`continue`, not
    `break`), or the empty set left would be fewer failures than before, and the edit kept."""
    still = run(pytest_out("tests/t.py::test_a", "tests/t.py::test_b", "tests/t.py::test_c"))
    d = decide([run("5 passed", 0), still], BEFORE)
    assert d == Decision("rolled_back", "checks still fail (3 failures, before 3)")


def test_counted_failures_that_did_not_fall_say_how_many_remain():
    d = decide([run("=== 3 failed, 1 passed in 0.2s ===")], Before(3))
    assert d == Decision("rolled_back", "checks still fail (3 failures, before 3)")
    d = decide([run("=== 1 failed in 0.2s ==="), run("something went wrong")], Before(3))
    assert d == Decision("rolled_back", "checks still fail (uncounted failures, before 3)")


def test_count_failures_takes_the_summarys_count_and_a_pass_counts_zero():
    assert count_failures(run("=== 2 failed, 1 error in 0.3s ===")) == 3
    assert count_failures(run("5 passed", 0)) == 0


def test_a_long_list_of_changed_sources_shows_ten_and_counts_the_rest():
    files = [f"src/m{i:02}.py" for i in range(12)]
    d = decide([run("5 passed", 0, changed=files)], BEFORE)
    assert f"({', '.join(files[:10])} (+2 more))" in d.reason
    files = files[:11]
    d = decide([run("5 passed", 0, changed=files)], BEFORE)
    assert f"({', '.join(files[:10])} (+1 more))" in d.reason


def test_named_failures_are_the_union_over_every_failing_run():
    # the second run's names must not replace the first's, or the new failure in the first is lost
    d = decide([run(pytest_out("tests/t.py::test_new")), run(pytest_out("tests/t.py::test_a"))], BEFORE)
    assert d == Decision("rolled_back", "new failures: tests/t.py::test_new")


def test_names_after_but_none_before_compare_counts():
    d = decide([run(pytest_out("tests/t.py::test_a"))], Before(3))
    assert d == Decision("improved", "failures 3 -> 1")
    counted = decide([run("=== 1 failed, 4 passed in 0.2s ===")], Before(3))
    assert counted == Decision("improved", "failures 3 -> 1")


def test_an_interrupted_pytest_ran_no_test_and_another_tools_exit_2_is_just_a_failure():
    interrupted = run("!!!!!!!!!! KeyboardInterrupt !!!!!!!!!!\n==== 2 passed in 0.10s ====\n", 2)
    assert broken(interrupted) == "ran no test (pytest exit 2)"
    assert decide([interrupted], Before(3)).reason == (
        "check tests ran no test (pytest exit 2): that proves nothing, no improvement"
    )
    assert broken(run("error: unknown option --frobnicate\n", 2)) is None


def test_failures_without_a_summary_are_counted_from_the_lines_a_parser_knows():
    out = "src/a.py:3:1: F401 `os` imported but unused\nsrc/b.py:4:1: E501 line too long\n"
    assert counted_failures(run(out)) == 2


@pytest.mark.slow
def test_reading_a_runs_summary_grows_linearly_with_one_long_line():
    import time

    from autod.checks.outcome import _PYTEST_SUMMARY

    def cpu(n: int) -> float:
        start = time.process_time()
        for _ in range(3):
            _PYTEST_SUMMARY.search("=" * n)
            _PYTEST_SUMMARY.search("== passed in " * (n // 13))
        return max(time.process_time() - start, 1e-3)

    # quadratic matching would grow 16x from n to 4n; linear grows 4x (loose bound for a busy machine)
    assert cpu(64_000) / cpu(16_000) < 10


def test_exactly_ten_changed_sources_are_all_shown_and_more_are_counted():
    ten = [f"src/f{i}.py" for i in range(10)]
    d = decide([run("5 passed", 0, changed=ten)], BEFORE)
    assert f"({', '.join(ten)})" in d.reason and "more)" not in d.reason
    d = decide([run("5 passed", 0, changed=[*ten, "src/f10.py"])], BEFORE)
    assert "(+1 more)" in d.reason
