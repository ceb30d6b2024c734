"""The failure digest (autod.checks.digest): real pytest reports shortened to what each failure did.

The reports here are real: a generated suite run by pytest in a subprocess, with its default
(long) tracebacks, so the shapes are pytest's own and not a copy of them. The generated-garbage test
holds the bounds on any input.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autod.checks.digest import CONTEXT, GAP, digest
from autod.checks.outcome import failing_tests
from autod.checks.run import CheckResult
from autod.checks.source import EXCERPT_CHARS, failure_event

CAP = 12_000

LIBRARY = '''
def long_step(items, limit):
    """A long function on the failing path: pytest prints it whole."""
    total = 0
{filler}
    for item in items:
        total += item
    if total > limit:
        raise ValueError(f"total {{total}} over {{limit}}")
    return total


def scale(values, factor):
    return [v * factor + 1 for v in values]  # the slip: + 1
'''

TESTS = '''
import warnings

import pytest

from lib import long_step, scale


@pytest.mark.parametrize(
    "values, factor, expected",
    [
{rows}
    ],
)
def test_scale(values, factor, expected):
    warnings.warn("a deprecation this suite does not care about " * 4, DeprecationWarning)
    got = scale(values, factor)
    assert got == expected


def test_long_path():
    assert long_step([1, 2, 3], 5) == 6


def test_long_path_again():
    assert long_step([1, 2, 3], 5) == 6


def test_fine():
    assert scale([], 3) == []
'''


def _report(tmp_path: Path, rows: int = 30, filler: int = 150) -> str:
    """A real pytest run's output: `rows` failing parameter sets of one test, two failures through a
    function of `filler` extra lines, and a passing test."""
    fill = "\n".join(f"    total += {i} * 0" for i in range(filler))
    (tmp_path / "lib.py").write_text(LIBRARY.format(filler=fill))
    table = "\n".join(f"        ([{i}, {i + 1}], {i % 5 + 2}, [{i * (i % 5 + 2)}, {(i + 1) * (i % 5 + 2)}]),"
                      for i in range(rows))
    (tmp_path / "test_lib.py").write_text(TESTS.format(rows=table))
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_lib.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout[-2000:]
    return done.stdout


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _report(tmp_path_factory.mktemp("suite"))


def test_each_failure_keeps_its_failing_line_error_and_location(report: str) -> None:
    out = digest(report, CAP)
    assert len(out) <= CAP < len(report)
    first = out.split("___ test_scale[values1-3-expected1] ___")[0]
    assert ">       assert got == expected" in first
    assert "E       assert [1, 3] == [0, 2]" in first
    assert re.search(r"(?m)^test_lib.py:\d+: AssertionError$", first)
    assert "values = [0, 1], factor = 2, expected = [0, 2]" in first  # the frame's arguments
    # the long function: its first line, the lines before the one that raised, that line, its error
    assert "    def long_step(items, limit):" in out
    assert ">           raise ValueError(f\"total {total} over {limit}\")" in out
    assert "E           ValueError: total 6 over 5" in out
    assert "total += 100 * 0" not in out and GAP in out  # the 150 lines between are left out


def test_a_frame_shown_before_is_named_not_repeated(tmp_path: Path) -> None:
    out = digest(_report(tmp_path, rows=1), CAP)
    assert out.count("E           ValueError: total 6 over 5") == 1
    assert re.search(r"(?m)^lib.py:\d+: ValueError  \(as above\)$", out)
    assert ">       assert long_step([1, 2, 3], 5) == 6" in out.split("___ test_long_path_again ___")[1]


def test_a_failure_raised_elsewhere_is_shown_before_more_of_the_same(report: str) -> None:
    out = digest(report, CAP)  # 30 failing parameter sets first in the report, then the long path
    assert "E           ValueError: total 6 over 5" in out.split("[... ")[0]


def test_the_parameter_table_and_the_warnings_summary_are_left_out(report: str) -> None:
    out = digest(report, CAP)
    assert "([12, 13]" not in out  # a row of the parametrize table pytest printed for each failure
    assert "warnings summary" in report and "warnings summary" not in out
    assert "DeprecationWarning: a deprecation" in report and "DeprecationWarning: a deprecation" not in out


def test_the_summary_lines_keep_every_failing_test(report: str) -> None:
    out = digest(report, CAP)
    assert failing_tests(out) == failing_tests(report)
    assert out.rstrip().splitlines()[-1].startswith("=") and "32 failed" in out.splitlines()[-1]


def test_the_digest_says_how_many_failures_it_left_out(report: str) -> None:
    out = digest(report, CAP)
    shown = out.count("\n___ ") + out.startswith("___ ")
    assert shown < 32
    assert f"[... {32 - shown} more failure section(s) not shown ...]" in out


def test_the_event_carries_the_digest(report: str) -> None:
    event = failure_event(CheckResult("tests", 1, report, 1000))
    assert event.payload["digest"] == digest(report, EXCERPT_CHARS)
    assert event.payload["excerpt"] == report[-EXCERPT_CHARS:]  # what localization reads, as before
    assert event.payload["failing_tests"] == sorted(failing_tests(report) or ())


def test_a_long_report_is_much_shorter_and_holds_more_of_its_failures(tmp_path: Path) -> None:
    report = _report(tmp_path, rows=60, filler=400)
    out = digest(report, CAP)
    tail = report[-CAP:]
    # the tail a fixed cut kept holds no failing line at all (the warnings summary fills it)
    assert ">       assert got == expected" not in tail
    assert out.count(">       assert got == expected") >= 3


def test_output_that_is_not_a_pytest_report_is_its_tail() -> None:
    text = "\n".join(f"line {i}: something went wrong" for i in range(5000))
    assert digest(text, 1000) == text[-1000:]
    assert digest("", 1000) == ""


_SHAPES = [
    "=================================== FAILURES ===================================",
    "==================================== ERRORS ====================================",
    "=========================== short test summary info ============================",
    "================= 3 failed, 5 passed in 0.12s =================",
    "=============================== warnings summary ===============================",
    "____________________ test_x[{n}] ____________________",
    "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _",
    "    def f(x):",
    "        y = x + {n}",
    ">       assert f({n}) == 3",
    "E       assert {n} == 3",
    "E",
    "tests/test_x.py:{n}: AssertionError",
    "x.py:{n}: in f",
    "x = {n}, y = 'abc'",
    "---------------------------- Captured stdout call -----------------------------",
    "                   ^^^^^^^^^^",
    "FAILED tests/test_x.py::test_x[{n}] - assert {n} == 3",
    "ERROR tests/test_y.py::test_y",
    "",
    "    ",
    "\u202e\x1b[31m=== FAILURES ===\x00",
]


@pytest.mark.parametrize("seed", range(300))
def test_any_mix_of_report_lines_and_garbage_stays_within_the_cap(seed: int) -> None:
    rnd = random.Random(seed)
    lines = []
    for _ in range(rnd.randint(0, 400)):
        pick = rnd.random()
        if pick < 0.8:
            lines.append(rnd.choice(_SHAPES).format(n=rnd.randint(0, 10**6)))
        elif pick < 0.95:
            lines.append("".join(rnd.choice("_ =-E>^~:\t.x0[]") for _ in range(rnd.randint(0, 120))))
        else:
            lines.append(rnd.choice("=_ E>x") * rnd.randint(1000, 50_000))  # one very long line
    text = "\n".join(lines)
    cap = rnd.choice([0, 50, 500, 4000, CAP])
    out = digest(text, cap)
    assert len(out) <= cap
    if cap >= 500 and text.strip():
        assert out or not text[-cap:].strip() or "FAILURES" in text or "ERRORS" in text


def test_one_enormous_line_and_a_million_short_ones_are_read_once() -> None:
    # linear in its input: these would take minutes with a quadratic step (no clock asserted here)
    huge = "=== FAILURES ===\n___ t ___\n>" + "x" * 5_000_000 + "\nE   boom\n"
    out = digest(huge, CAP)
    assert len(out) <= CAP and "E   boom" in out
    many = "=== FAILURES ===\n___ t ___\n" + "    y = 1\n" * 1_000_000 + ">   assert y\nE   no\n"
    out = digest(many, CAP)
    assert ">   assert y" in out and "E   no" in out and out.count("y = 1") <= CONTEXT


def test_text_printed_by_the_code_under_test_is_kept_as_text(tmp_path: Path) -> None:
    # a test that prints pytest's own banners and summary lines can neither end the failures' part
    # early (hiding the next failure) nor pass a made-up failing test off as the report's
    (tmp_path / "test_loud.py").write_text(textwrap.dedent('''
        def test_loud():
            print("=" * 20 + " short test summary info " + "=" * 20)
            print("FAILED test_other.py::test_made_up - nothing")
            assert 1 + 1 == 3


        def test_quiet():
            assert 2 * 2 == 5
    '''))
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_loud.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    out = digest(done.stdout, CAP)
    assert ">       assert 1 + 1 == 3" in out and "E       assert (1 + 1) == 3" in out
    assert ">       assert 2 * 2 == 5" in out and "E       assert (2 * 2) == 5" in out
    assert "| FAILED test_other.py::test_made_up - nothing" in out
    assert failing_tests(out) == failing_tests(done.stdout.split("short test summary info")[-1])
    assert not any("test_made_up" in t for t in failing_tests(out) or ())


def test_a_quiet_run_keeps_its_counts_line(tmp_path: Path) -> None:
    """`pytest -q` ends with `1 failed, 1 passed in 0.01s` and no banner around it: the tail had it,
    and so does the digest."""
    suite = "def test_bad():\n    assert 1 + 1 == 3\n\n\ndef test_ok():\n    pass\n"
    (tmp_path / "test_q.py").write_text(suite)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_q.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    last = done.stdout.rstrip().splitlines()[-1]
    assert re.match(r"^1 failed, 1 passed in ", last), done.stdout[-500:]
    out = digest(done.stdout, CAP)
    assert out.rstrip().splitlines()[-1] == "1 failed, 1 passed"  # the run's duration taken out
    assert failing_tests(out) == failing_tests(done.stdout)


def test_failing_subtests_stay_in_the_summary() -> None:
    """pytest-subtests names a failing subtest `SUBFAIL path::test [msg] - error` in the summary."""
    report = "\n".join([
        "==================== FAILURES ====================",
        "____________ test_sub [case 2] ____________",
        ">       assert f(2) == 4",
        "E       assert 3 == 4",
        "test_s.py:5: AssertionError",
        "============ short test summary info =============",
        "SUBFAIL test_s.py::test_sub [case 2] - assert 3 == 4",
        "FAILED test_s.py::test_sub - contains 1 failed subtest",
        "=========== 2 failed, 1 passed in 0.02s ===========",
    ])
    out = digest(report, CAP)
    assert "SUBFAIL test_s.py::test_sub [case 2] - assert 3 == 4" in out.splitlines()
    assert out.splitlines()[-1].startswith("=") and "2 failed" in out.splitlines()[-1]


def test_two_runs_of_the_same_failure_give_the_same_digest(tmp_path: Path) -> None:
    """A run's duration and an object's address differ from run to run of the same failure; the digest
    leaves them out, so the prompt is the same (a server's cached prefix holds, a seeded draw is asked
    the same question). A hex constant in the code is not an address and stays."""
    (tmp_path / "test_same.py").write_text(textwrap.dedent("""
        import time


        class Box:
            pass


        def test_box(tmp_path):
            time.sleep(0.01)
            mask = 0xFFFF00
            assert (Box(), str(tmp_path)) == mask
    """))
    outs = []
    for flags in (["-q"], []):
        for _ in range(2):
            done = subprocess.run([sys.executable, "-m", "pytest", *flags, "-p", "no:cacheprovider",
                                   "-p", "no:randomly", "test_same.py"],
                                  cwd=tmp_path, capture_output=True, text=True, timeout=120)
            assert re.search(r"Box object at 0x[0-9a-f]{6,}>", done.stdout), done.stdout[-800:]
            assert re.search(r" in \d+\.\d+s", done.stdout)
            outs.append(digest(done.stdout, CAP))
    for out in outs:
        assert "Box object at 0x…>" in out and "0xFFFF00" in out
        assert re.search(r"pytest-of-[^/]+/pytest-N/", out), out
        assert not re.search(r"at 0x[0-9a-f]{6,}>| in \d+\.\d+s|/pytest-\d", out), out
    assert outs[0] == outs[1] and outs[2] == outs[3]


_RUN = [  # report lines holding what one run of a failure prints and the next does not
    "self = <lib.Parser object at {addr}>",
    "E       assert <lib.Node object at {addr}> == 3",
    "E       FileNotFoundError: {tmp}/test_x0/data.txt",
    "tmp_path = PosixPath('{tmp}/test_x{n}0')",
    "FAILED tests/test_x.py::test_x[{n}] - assert <lib.Node object at {addr}...",
    "================= 3 failed, 5 passed in {dur} =================",
    "3 failed, 5 passed in {dur}",
]


@pytest.mark.parametrize("seed", range(200))
def test_any_report_differing_only_in_run_values_gives_one_digest(seed: int) -> None:
    """The invariant on generated reports: two runs of one failure that differ only in addresses,
    pytest's temporary directory number and the duration give the same digest, free of all three."""
    rnd = random.Random(seed)
    user = rnd.choice(["root", "ci", "a.b"])  # the same user runs both: not a run value
    shapes = [(rnd.choice(_SHAPES + _RUN * 3), rnd.randint(0, 10**6)) for _ in range(rnd.randint(5, 300))]
    shapes = [("=" * 20 + " FAILURES " + "=" * 20, 0), ("___ test_x ___", 0), *shapes]

    def duration() -> str:
        if rnd.random() < 0.5:
            return f"{rnd.random() * 100:.2f}s"
        minutes, seconds = rnd.randint(1, 16), rnd.randint(0, 59)
        return f"{minutes * 60 + seconds}.{rnd.randint(0, 99):02d}s (0:{minutes:02d}:{seconds:02d})"

    def run() -> str:
        values = {"addr": f"0x{rnd.randrange(16**11, 16**12):012x}",
                  "tmp": f"/tmp/pytest-of-{user}/pytest-{rnd.randint(0, 10**5)}", "dur": duration()}
        return "\n".join(t.format(n=n, **values) for t, n in shapes)

    one, two = digest(run(), CAP), digest(run(), CAP)
    assert one == two
    assert not re.search(r"at 0x[0-9a-f]{6,}[>.]|/pytest-\d| in \d+\.\d+s", one), one
