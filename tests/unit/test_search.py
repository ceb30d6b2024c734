"""Finding a plan's search text: exact first, then tolerant of the ways a weak model miscopies it."""

from __future__ import annotations

import pytest

from autod.act.search import apply_edit
from autod.errors import PlanRejected

CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
TEST = (
    "import calc\n\n\ndef test_add():\n    total = calc.add(2, 3)\n    assert total == 5\n\n\n"
    "def test_mul():\n    assert calc.mul(2, 3) == 6\n"
)


def test_exact_text_is_replaced_once() -> None:
    assert apply_edit("calc.py", CALC, "return a - b", "return a + b") == CALC.replace("a - b", "a + b")


def test_trailing_whitespace_and_a_missing_final_newline_do_not_matter() -> None:
    search, replace = "def add(a, b):   \n    return a - b  ", "def add(a, b):\n    return a + b"
    out = apply_edit("calc.py", CALC, search, replace)
    assert out == CALC.replace("a - b", "a + b")


def test_a_block_copied_without_its_indentation_is_found_and_the_replace_reindented() -> None:
    src = "class Calc:\n    def add(self, a, b):\n        total = a - b\n        return total\n"
    search = "def add(self, a, b):\n    total = a - b\n    return total\n"
    replace = "def add(self, a, b):\n    total = a + b\n    return total\n"
    out = apply_edit("calc.py", src, search, replace)
    assert out == src.replace("a - b", "a + b")


def test_a_block_copied_with_too_much_indentation_is_dedented_the_same_way() -> None:
    search = "        def add(a, b):\n            return a - b"
    replace = "        def add(a, b):\n            # fixed\n            return a + b"
    out = apply_edit("calc.py", CALC, search, replace)
    assert out.startswith("def add(a, b):\n    # fixed\n    return a + b\n\n")


def test_indentation_that_is_not_one_uniform_shift_is_refused() -> None:
    search = "def add(a, b):\n        return a - b"  # the body shifted, the def not
    with pytest.raises(PlanRejected, match=r"not found in calc\.py, even ignoring whitespace"):
        apply_edit("calc.py", CALC, search, "x")


def test_lf_search_in_a_crlf_file_keeps_crlf() -> None:
    src = CALC.replace("\n", "\r\n")
    search, replace = "def add(a, b):\n    return a - b  \n", "def add(a, b):\n    return a + b\n"
    out = apply_edit("calc.py", src, search, replace)
    assert out == src.replace("a - b", "a + b")
    assert out.count("\r\n") == out.count("\n")


def test_a_numbered_listing_as_autod_shows_source_is_stripped_of_its_gutter() -> None:
    search = "    1  def add(a, b):\n    2>     return a - b\n"
    replace = "    1  def add(a, b):\n    2>     return a + b\n"
    assert apply_edit("calc.py", CALC, search, replace) == CALC.replace("a - b", "a + b")


@pytest.mark.parametrize(
    "search",
    [
        "1: def add(a, b):\n2:     return a - b",  # grep -n
        "     1\tdef add(a, b):\n     2\t    return a - b",  # cat -n
        "  1 | def add(a, b):\n  2 |     return a - b".replace(" | ", "| "),  # a table-like gutter
    ],
)
def test_other_line_number_gutters_are_stripped(search: str) -> None:
    out = apply_edit("calc.py", CALC, search, "def add(a, b):\n    return a + b")
    assert out == CALC.replace("a - b", "a + b")


def test_numbers_that_do_not_run_consecutively_are_not_a_gutter() -> None:
    with pytest.raises(PlanRejected, match="not found"):
        apply_edit("calc.py", CALC, "7: def add(a, b):\n3:     return a - b", "x")


def test_a_line_copied_from_pytest_output_with_its_marker_and_margin_is_found() -> None:
    search = "    def test_add():\n        total = calc.add(2, 3)\n>       assert total == 5\n"
    replace = "    def test_add():\n        total = calc.add(2, 3)\n        assert total == 5, total\n"
    out = apply_edit("test_calc.py", TEST, search, replace)
    assert "def test_add():\n    total = calc.add(2, 3)\n    assert total == 5, total\n" in out
    assert out.count("\n") == TEST.count("\n")


def test_a_tolerant_match_must_still_be_unique() -> None:
    src = "if x:\n    y = 1\nif z:\n        y = 1\n"
    with pytest.raises(PlanRejected, match=r"more than once in f\.py once whitespace .* \(lines 2 and 4\)"):
        apply_edit("f.py", src, "y = 1  ", "y = 2")


def test_an_empty_replace_deletes_the_matched_lines() -> None:
    out = apply_edit("calc.py", CALC, "def mul(a, b):  \n    return a * b", "")
    assert out == "def add(a, b):\n    return a - b\n\n\n"  # the lines went with their endings


def test_refusal_names_the_closest_line_actually_in_the_file() -> None:
    with pytest.raises(PlanRejected) as exc:
        apply_edit("calc.py", CALC, "    return a - c\n", "    return a + c\n")
    assert 'the closest line in the file is 2: "    return a - b"' in exc.value.reason


def test_refusal_says_when_nothing_is_close() -> None:
    with pytest.raises(PlanRejected, match="no line of the file is close"):
        apply_edit("calc.py", CALC, "completely unrelated text", "x")


def test_a_whitespace_only_search_is_refused() -> None:
    with pytest.raises(PlanRejected, match="only whitespace"):
        apply_edit("calc.py", CALC, "  \n\t\n", "x")
