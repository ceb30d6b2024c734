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
