"""Check output is untrusted: the parsers take linear work on any input (long lines, long word runs,
binary, mixed encodings), never a time that grows with the square of a line."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from cputime import LARGE, SMALL, cpu_cost
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autod.localize.frames import parse_frames, parse_test_ids
from autod.sources.parsers import parse_failures, parse_locations, scan_bytes

# runs of path-ish characters that once made a location pattern backtrack from every start position
UNITS = ["a", "a.", "/", "1", "x.py", "a-", "_", 'File "a', "a(", " a.py:", "E", "a:1", "::", "é"]


def growth(parse: Callable[[str], object], unit: str, prefix: str = "") -> float:
    small = prefix + unit * (SMALL // len(unit))
    large = prefix + unit * (LARGE // len(unit))
    return cpu_cost(lambda: parse(large)) / cpu_cost(lambda: parse(small))


PARSERS: list[Callable[[str], object]] = [parse_locations, parse_failures, parse_frames, parse_test_ids]


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unit=st.sampled_from(UNITS) | st.text(alphabet="aZ9_./\\-:()\",é ", min_size=1, max_size=6),
       prefix=st.sampled_from(["", "FAILED ", 'File "', "error: ", "src/x.ts", "SUBFAILED(a=1) ",
                               "SUBFAILED "]),
       parse=st.sampled_from(PARSERS))
def test_work_grows_linearly_with_one_long_line(
    unit: str, prefix: str, parse: Callable[[str], object]
) -> None:
    # 16 times the input may cost 16 times the work; the bound leaves room for a loaded machine, and
    # a quadratic parser (256 times) is far past it
    assert growth(parse, unit, prefix) < 64


@given(st.binary(max_size=20_000))
def test_any_bytes_scan_without_error(data: bytes) -> None:
    for failure, offset in scan_bytes(data):
        assert 0 <= offset <= len(data) and failure.fingerprint


LATIN1 = st.binary(max_size=300).map(lambda b: b.decode("latin-1"))


@pytest.mark.slow
@given(st.lists(st.text(max_size=300) | LATIN1, max_size=40))
def test_mixed_encodings_parse_to_well_formed_locations(lines: list[str]) -> None:
    text = "\n".join(lines)
    for loc in parse_locations(text):
        assert isinstance(loc["path"], str) and isinstance(loc["line"], int)
    for failure in parse_failures(text):
        assert len(failure.summary) <= 300


def test_a_long_word_run_costs_linear_work_in_the_location_patterns() -> None:
    assert growth(parse_locations, "a") < 64


def test_the_line_after_a_long_one_still_names_its_location() -> None:
    text = "E   " + "x" * 300_000 + "\nsrc/calc.py:12: AssertionError\n"
    assert parse_locations(text) == [{"path": "src/calc.py", "line": 12}]
