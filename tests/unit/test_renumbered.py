"""Tests pytest numbered by a set's order are the same tests in every run (autod.checks.renumbered).

The ids are made here as pytest makes them: a parameter it can print is shown as itself, any other as
its argument's name and its index in the list. Runs permute the list, as a set whose order follows
identity hashes does from process to process."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autod.checks.outcome import Before, decide
from autod.checks.pertest import PerTestReport
from autod.checks.renumbered import align, key, known_as, matched
from autod.checks.run import CheckResult
from autod.verdict import Status

FILE = "tests/test_date.py::test_format"


def test_key_reads_the_digits_of_a_name_and_digits_token_as_a_mark():
    assert key(f"{FILE}[4-1985-expected20-%Y]") == f"{FILE}[4-1985-expected#-%Y]"
    assert key(f"{FILE}[obj0]") == f"{FILE}[obj#]"
    assert key(f"{FILE}[_x12-a_b3-7-1.5]") == f"{FILE}[_x#-a_b#-7-1.5]"
    # only inside the parameters, and not a number, a value with other characters, or a non-ASCII name
    assert key("tests/a-b2-c/test_x1.py::test_y2") == "tests/a-b2-c/test_x1.py::test_y2"
    assert key("tests/a-b2/t.py::C::test[x-y]") == "tests/a-b2/t.py::C::test[x-y]"
    assert key(f"{FILE}[1985-+0019-%C2-é3-x.1]") == f"{FILE}[1985-+0019-%C2-é3-x.1]"
    assert key(f"{FILE}[no-close") == f"{FILE}[no-close"


def _ids(cases: list[tuple[str, object]], order: list[int]) -> dict[int, str]:
    """case number -> its id in a run that lists the cases in `order` (printable: shown; else
    `expected<index>`)."""
    out = {}
    for index, case in enumerate(order):
        shown, value = cases[case]
        out[case] = f"{FILE}[{shown}-{value if isinstance(value, str) else f'expected{index}'}]"
    return out


CASE = st.tuples(st.sampled_from(["4", "6", "x", "a-b", "19"]),
                 st.one_of(st.none(), st.sampled_from(["%Y", "W"])))


@settings(max_examples=300, deadline=None)
@given(st.lists(CASE, min_size=1, max_size=14), st.randoms(use_true_random=False))
def test_a_permuted_list_s_tests_are_matched_one_to_one_or_not_at_all(raw, rng: random.Random):
    cases = [(shown, None if value is None else value) for shown, value in raw]
    first = list(range(len(cases)))
    second = first[:]
    rng.shuffle(second)
    a, b = _ids(cases, first), _ids(cases, second)
    if len(set(a.values())) < len(a) or len(set(b.values())) < len(b):
        return  # pytest would have made the duplicates unique itself
    names = matched(a.values(), b.values())
    for later, earlier in names.items():  # never a wrong pair ...
        case = next(c for c, t in b.items() if t == later)
        assert a[case] == earlier
    for case in range(len(cases)):  # ... and every case whose key is its own is matched
        if a[case] != b[case] and sum(key(t) == key(a[case]) for t in a.values()) == 1:
            assert names.get(b[case]) == a[case]


def _report(outcomes: dict[str, str]) -> PerTestReport:
    return PerTestReport(outcomes=outcomes, collected=frozenset(outcomes))


def _run(outcomes: dict[str, str]) -> CheckResult:
    code = 1 if any(o == "failed" for o in outcomes.values()) else 0
    return CheckResult("tests", code, "", 5, tests=_report(outcomes))


BEFORE = {f"{FILE}[4-expected0-%Y]": "failed", f"{FILE}[6-expected1-%Y]": "passed",
          f"{FILE}[4-expected2-W]": "passed"}


def _renumbered(outcomes: dict[str, str]) -> dict[str, str]:
    """The same tests, the list's first two swapped."""
    swap = {"expected0": "expected1", "expected1": "expected0"}
    out = {}
    for t, o in outcomes.items():
        for old, new in swap.items():
            if old in t:
                t = t.replace(old, new)
                break
        out[t] = o
    return out


def test_a_right_fix_of_a_renumbered_test_is_fixed():
    was = _run(BEFORE)
    now = _run(_renumbered(dict.fromkeys(BEFORE, "passed")))
    assert set(now.tests.outcomes) != set(BEFORE)
    failing = frozenset({f"{FILE}[4-expected0-%Y]"})
    assert decide([now], Before(1, failing, {"tests": was})).status is Status.FIXED


@pytest.mark.parametrize("outcome", ["failed", "skipped"])
def test_a_renumbered_test_that_got_worse_is_still_rolled_back(outcome):
    after = dict.fromkeys(BEFORE, "passed")
    after[f"{FILE}[6-expected1-%Y]"] = outcome  # passed before, under its other number now
    now = _run(_renumbered(after))
    d = decide([now], Before(1, frozenset({f"{FILE}[4-expected0-%Y]"}), {"tests": _run(BEFORE)}))
    assert d.status is Status.ROLLED_BACK
    assert f"passed before now {FILE}[6-expected1-%Y] {outcome}" in d.reason


def test_a_key_two_tests_share_matches_nothing():
    """Two tests that differ only in their numbers: which is which cannot be told, so a run numbering
    them otherwise drops both, as before."""
    was = {f"{FILE}[obj0]": "failed", f"{FILE}[obj1]": "passed"}
    now = {f"{FILE}[obj2]": "passed", f"{FILE}[obj3]": "passed"}
    assert matched(was, now) == {}
    d = decide([_run(now)], Before(1, frozenset({f"{FILE}[obj0]"}), {"tests": _run(was)}))
    assert d.status is Status.ROLLED_BACK and "no longer runs 2 test(s)" in d.reason


def test_align_renames_outcomes_collected_and_what_each_test_ran():
    was = _report({f"{FILE}[4-expected0-%Y]": "failed"})
    after = PerTestReport(outcomes={f"{FILE}[4-expected3-%Y]": "passed"},
                          collected=frozenset({f"{FILE}[4-expected3-%Y]"}),
                          ran={f"{FILE}[4-expected3-%Y]": frozenset({"digest"})})
    read = align(was, after)
    assert read.outcomes == {f"{FILE}[4-expected0-%Y]": "passed"}
    assert read.collected == {f"{FILE}[4-expected0-%Y]"}
    assert read.ran == {f"{FILE}[4-expected0-%Y]": {"digest"}}
    assert align(was, was) is was


def test_a_failure_recorded_under_an_earlier_numbering_names_the_test_the_runs_have():
    known = [f"{FILE}[4-expected5-%Y]", f"{FILE}[6-expected1-%Y]", "tests/t.py::test_other"]
    recorded = frozenset({f"{FILE}[4-expected0-%Y]", "tests/t.py::test_other"})
    assert known_as(recorded, known) == {f"{FILE}[4-expected5-%Y]", "tests/t.py::test_other"}
    assert known_as(frozenset(known), known) == frozenset(known)
