"""Fingerprints recognise the same failure across runs and tell different ones apart."""

from autod.events import Event, EventKind, fingerprint, normalise


def test_fingerprint_ignores_line_numbers_addresses_timestamps_and_temp_paths():
    a = 'File "/tmp/pytest-12/x.py", line 12, in f\n<obj at 0x7f3a2b> 2026-11-22T03:10:00Z took 0.52s'
    b = 'File "/tmp/pytest-99/x.py", line 40, in f\n<obj at 0x7ffff1> 2026-01-01T00:00:00Z took 12s'
    assert fingerprint(a) == fingerprint(b)
    assert fingerprint("src/calc.py:12:5: F401 unused") == fingerprint("src/calc.py:80:1: F401 unused")


def test_different_errors_have_different_fingerprints():
    assert fingerprint("NameError: name 'x' is not defined") != fingerprint(
        "NameError: name 'y' is not defined"
    )


def test_normalise_collapses_whitespace():
    assert normalise("a   b\n\tc") == "a b c"


def test_event_priority_puts_failures_first():
    fail = Event(source="check:t", kind=EventKind.CHECK_FAILED, summary="x", fingerprint="f")
    sched = Event(source="cron:x", kind=EventKind.SCHEDULE, summary="x", fingerprint="g")
    assert fail.priority < sched.priority
    assert Event.model_validate_json(fail.model_dump_json()) == fail


PYTEST_ONE_FAILURE = """\
============================= test session starts ==============================
collected 2 items

tests/test_{mod}.py F.                                                   [100%]

=================================== FAILURES ===================================
___________________________________ {test} ___________________________________

    def {test}():
>       assert {expr}
E       assert {got}

tests/test_{mod}.py:7: AssertionError
=========================== short test summary info ============================
FAILED tests/test_{mod}.py::{test} - assert {got}
============================== 1 failed, 1 passed in 0.02s =====================
"""


def _one_failure_run(mod: str, test: str, expr: str, got: str):
    from autod.checks.run import CheckResult

    out = PYTEST_ONE_FAILURE.format(mod=mod, test=test, expr=expr, got=got)
    return CheckResult("tests", 1, out, 20)


def test_two_different_single_failures_of_one_check_have_different_fingerprints():
    # each run's identity is the fingerprint of its one failure (16 hex digits): never normalised away
    from autod.checks.source import failure_event

    add = failure_event(_one_failure_run("calc", "test_add", "add(2, 3) == 5", "-1 == 5"))
    mul = failure_event(_one_failure_run("geo", "test_mul", "mul(2, 3) == 6", "5 == 6"))
    assert add.fingerprint != mul.fingerprint
    again = failure_event(_one_failure_run("calc", "test_add", "add(2, 3) == 5", "-1 == 5"))
    assert again.fingerprint == add.fingerprint  # the same failure is still recognised run after run


def test_exact_parts_are_hashed_as_they_are_and_no_exact_parts_keep_the_old_value():
    assert fingerprint("check", "tests", exact=["f65ff56364ff8f1e"]) != fingerprint(
        "check", "tests", exact=["c585a921046a5cd7"]
    )
    assert fingerprint("a", "b", exact=[]) == fingerprint("a", "b")  # queue_paths relies on it


def test_each_manual_trigger_is_its_own_event():
    from autod.control.commands import manual_event

    one, two = manual_event("auto-debug", None, "again"), manual_event("auto-debug", None, "again")
    assert one.fingerprint != two.fingerprint
