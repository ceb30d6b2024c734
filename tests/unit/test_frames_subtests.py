"""A failed subtest's summary line names its test, whatever the subtest's description holds.

pytest 9 reports a failed subtest (unittest's `subTest`, the `subtests` fixture) on its own line,
`SUBFAILED[msg] (k=v, ...) path::Class::test[param] - reason`, and a unittest test whose only
failures are subtests gets no FAILED line at all: its own report says passed. The description is the
test's own text (a message and the parameters' reprs: spaces, brackets, quotes, ` - `), so the id is
found after it, not by a list of shapes it may take.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from autod.checks.digest import digest
from autod.checks.outcome import failing_tests
from autod.localize.frames import parse_test_ids

NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
# what a repr or a message may hold, ".py" aside (a parameter shaped like a test id is read first)
TEXT = st.text(alphabet="ab Z09_-:,.'\"()[]{}=<>/\\é\t", max_size=40).filter(lambda t: ".py" not in t)


@st.composite
def node_ids(draw: st.DrawFn) -> str:
    dirs = draw(st.lists(st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True), max_size=3))
    path = "/".join([*dirs, "test_" + draw(st.from_regex(r"[a-z0-9_]{1,10}", fullmatch=True)) + ".py"])
    names = draw(st.lists(NAME, min_size=1, max_size=3))
    param = draw(st.none() | st.text(alphabet="ab09-_.", min_size=1, max_size=12))
    return f"{path}::{'::'.join(names)}" + (f"[{param}]" if param else "")


@st.composite
def descriptions(draw: st.DrawFn) -> str:
    msg = draw(st.none() | TEXT.map(lambda t: t.replace("]", "")))
    kwargs = draw(st.lists(st.tuples(NAME, TEXT), max_size=4))
    out = f"[{msg}]" if msg is not None else ""
    if kwargs:
        out += (" " if out else "") + "(" + ", ".join(f"{k}={v!r}" for k, v in kwargs) + ")"
    return out


@given(node=node_ids(), desc=descriptions(), reason=st.none() | TEXT,
       word=st.sampled_from(["SUBFAILED", "SUBFAIL"]))
def test_the_test_a_failed_subtest_belongs_to_is_named(node: str, desc: str, reason: str | None,
                                                        word: str) -> None:
    line = f"{word}{desc} {node}" + (f" - {reason}" if reason is not None else "")
    assert [t.nodeid for t in parse_test_ids(line)] == [node], line


def test_pytest_9_s_own_lines_are_read() -> None:
    # as more-itertools' suite prints them (distinct_permutations with `0 < r` made `1 < r`)
    out = (
        "=========================== short test summary info ============================\n"
        "SUBFAILED(iterable='mississippi', r=1) tests/test_more.py::DistinctPermutationsTests::test_r\n"
        "SUBFAILED(iterable=[0, 1, 1, 0], r=1) tests/test_more.py::DistinctPermutationsTests::test_r\n"
        "SUBFAILED(iterable=['1', 2, 2, 3, 3, 3], r=1) tests/test_more.py::DistinctPermutationsTests::"
        "test_unsortable_r\n"
        "SUBFAILED[m] (i=1) tests/test_fx.py::test_fx - assert 1 == 0\n"
        "FAILED tests/test_fx.py::test_fx - contains 1 failed subtest\n"
        "6 failed, 765 passed, 21188 subtests passed in 19.63s\n"
    )
    assert [t.nodeid for t in parse_test_ids(out)] == [
        "tests/test_more.py::DistinctPermutationsTests::test_r",
        "tests/test_more.py::DistinctPermutationsTests::test_unsortable_r",
        "tests/test_fx.py::test_fx",
    ]


def test_a_description_longer_than_the_scan_names_nothing() -> None:
    # the read is bounded: an id past the description's first 600 characters is not looked for
    line = "SUBFAILED(x='" + "a " * 400 + "') tests/test_a.py::test_a - boom"
    assert parse_test_ids(line) == []
    assert [t.nodeid for t in parse_test_ids(line.replace("a " * 400, "a "))] == ["tests/test_a.py::test_a"]


PYTEST_9_RUN = """\
..                                                                     [100%]
=================================== FAILURES ===================================
____________________________ T.test_add (a=2, b=3) _____________________________

self = <test_calc.T testMethod=test_add>

    def test_add(self):
        for a, b in [(0, 0), (2, 3)]:
            with self.subTest(a=a, b=b):
>               self.assertEqual(add(a, b), a + b)
E               AssertionError: -1 != 5

tests/test_calc.py:8: AssertionError
=========================== short test summary info ============================
SUBFAILED(a=2, b=3) tests/test_calc.py::T::test_add - AssertionError: -1 != 5
1 failed, 2 passed, 1 subtests passed in 0.54s
"""


def test_the_prompt_s_digest_keeps_the_subtest_s_summary_line() -> None:
    # what a prompt shows of the run, and what the readers of a digest find the failing test in
    shown = digest(PYTEST_9_RUN, 4000)
    assert "SUBFAILED(a=2, b=3) tests/test_calc.py::T::test_add - AssertionError: -1 != 5" in shown
    assert [t.nodeid for t in parse_test_ids(shown)] == ["tests/test_calc.py::T::test_add"]
    assert failing_tests(shown) == {"tests/test_calc.py::T::test_add"}
