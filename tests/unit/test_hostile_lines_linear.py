"""The shapes a hostile probe used to stall the daemon, through the paths that read them: a failing
test's output (the digest, the failure parsers, the excerpt), an LLM reply (its fences, its search/
replace sections, a definition's fence) and an error body. Each once cost time growing with the
square of a line's length (or the cube), and `re` holds the GIL for a whole match: a worker thread
did not keep the event loop answering. Here the CPU time grows 16-fold with 16 times the input, not
256-fold (tests/cputime.py); tests/unit/test_regex_linear.py holds every module-level pattern to it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from cputime import BOUND, climb

from autod.act.definition import replace_definition
from autod.checks.digest import digest
from autod.errors import PlanInvalid, PlanRejected
from autod.events import normalise
from autod.localize.excerpt import strip_progress
from autod.modes.doc import documented_params
from autod.planner.codeform import parse_code_reply
from autod.planner.fences import blocks
from autod.planner.parse import extract_json
from autod.planner.wire import context_numbers
from autod.sources.parsers import parse_failures


def grows(read: Callable[[str], object], head: str, unit: str, tail: str = "") -> float:
    def work_at(size: int) -> Callable[[], object]:
        text = head + unit * (size // len(unit)) + tail
        return lambda: read(text)

    return climb(work_at)


def _quietly(read: Callable[[str], object]) -> Callable[[str], object]:
    """`read`, with a refusal of the text as its answer (a reply with no plan in it is refused)."""

    def run(text: str) -> object:
        try:
            return read(text)
        except (PlanInvalid, PlanRejected, SyntaxError, ValueError) as e:
            return e

    return run


def _replace(code: str) -> object:
    return replace_definition("a.py", "def f():\n    return 1\n", "f", code)


CHECK_OUTPUT = [
    # a test prints a banner-shaped line: the digest reads every line for a banner (4 s at 20K)
    pytest.param(lambda t: digest(t, 12_000), "=== FAILURES ===\n=== x", "=", "x\n", id="digest-banner"),
    pytest.param(lambda t: digest(t, 12_000), "", "=", "x\n", id="digest-equals-run"),
    # eslint's stylish message line with a long run of blanks before its end (13.6 s at 20K)
    pytest.param(parse_failures, "src/app.js\n  1:1  error  x", " ", "x!\n", id="eslint-message"),
    pytest.param(parse_failures, "a.py:1: error: x", " ", "x\n", id="mypy-message"),
    pytest.param(strip_progress, "a.py .", " ", "!\n", id="progress-line"),
    pytest.param(normalise, "", "A:\\a", "", id="windows-drives"),
]

REPLIES = [
    # 8,000 search lines and no divider: 19 s, and the cycle recorded as the server's deadline
    pytest.param(_quietly(parse_code_reply), "### src/calc.py\n```python\n", "<<<<<<< SEARCH\n", "```\n",
                 id="search-lines"),
    pytest.param(_quietly(parse_code_reply), "### src/calc.py\n```python\n<<<<<<< SEARCH\nx\n",
                 "=======\n", "```\n", id="divider-lines"),
    pytest.param(_quietly(extract_json), "```", " ", "x", id="json-fence-blanks"),
    pytest.param(blocks, "~~~ a", " ", "!", id="fence-info-blanks"),
    pytest.param(_quietly(_replace), "```\n", " ", "x", id="definition-fence-blanks"),
    pytest.param(lambda t: context_numbers(t.encode()), "n_ctx", " ", "x", id="error-body-blanks"),
    pytest.param(lambda t: context_numbers(t.encode()), "", "1", "x", id="error-body-digits"),
    pytest.param(documented_params, ":param", " ", "!", id="docstring-param-blanks"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("read", "head", "unit", "tail"), CHECK_OUTPUT + REPLIES)
def test_a_hostile_line_costs_linear_work(
    read: Callable[[str], object], head: str, unit: str, tail: str
) -> None:
    assert grows(read, head, unit, tail) < BOUND


def test_the_probe_shapes_still_read_as_before() -> None:
    # the shapes are not refused on the way: the same lines, short, are read as they always were
    assert parse_failures("src/app.js\n  1:1  error  x   no-undef\n")[0].summary == (
        "eslint: src/app.js:1:1 x (no-undef)"
    )
    assert parse_failures("a.py:1: error: x  [misc]\n")[0].summary == "mypy: a.py:1: error: x [misc]"
    report = "=== FAILURES ===\n___ test_x ___\nE   assert 0\n=== 1 failed in 0.1s ===\n"
    assert digest(report, 12_000) == "___ test_x ___\nE   assert 0\n=== 1 failed ==="
    assert normalise("at C:\\Users\\me\\AppData\\Local\\Temp\\tmpab12\\x.py") == "at <tmp>"
