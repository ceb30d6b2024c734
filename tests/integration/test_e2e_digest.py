"""Through `autod run` and real pytest: the failure output a prompt carries is what each failure did.

The failing tests fail in a 300-line function; pytest prints that function whole in its report for
each, and a fixed-size tail of the report carried it into the prompt line by line.
The digest (autod.checks.digest) keeps the failing lines, their errors and locations instead."""

from __future__ import annotations

import re

import pytest
from daemon import make_repo, one_fix

from autod.checks.digest import CONTEXT

pytestmark = pytest.mark.slow

FILLER = "\n".join(f"    total += len(items) * {i} * 0  # filler step {i}" for i in range(300))
CALC = f'''def total_of(items):
    """Adds the items up, the long way."""
    total = 0
{FILLER}
    for item in items:
        total += item
    if total >= 0:
        raise ValueError("negative total")
    return total
'''
CALC_TEST = '''import pytest

from src.calc import total_of


@pytest.mark.parametrize("items, expected", [([1, 2], 3), ([4], 4), ([], 0)])
def test_total(items, expected):
    assert total_of(items) == expected
'''


def test_the_prompt_shows_the_failing_lines_not_the_long_function_pytest_printed(tmp_path, scripted_llm,
                                                                                 real_bwrap):
    buggy = CALC
    fixed = buggy.replace("if total >= 0:", "if total < 0:")
    repo = make_repo(tmp_path / "repo", {"src/__init__.py": "", "src/calc.py": buggy,
                                         "tests/test_calc.py": CALC_TEST})
    r = one_fix(tmp_path, repo, scripted_llm, f"### src/calc.py · total_of\n```python\n{fixed}```\n")
    prompt = scripted_llm.requests[0]["messages"][-1]["content"]
    failure = re.search(r"## Failure output\n(`{3,})\n(.*?)\n\1\n", prompt, re.S)
    assert failure is not None, prompt[:2000]
    shown = failure.group(2)
    # what the failure did: the failing line, its error, its location, the arguments
    assert ">       assert total_of(items) == expected" in shown
    assert ">           raise ValueError(\"negative total\")" in shown
    assert re.search(r"(?m)^E\s+ValueError: negative total$", shown)
    assert re.search(r"(?m)^src/calc.py:\d+: ValueError$", shown)
    assert "items = [1, 2], expected = 3" in shown
    # not the 300 lines pytest printed of `total_of` for each failure: the few before the failing one
    assert shown.count("filler step") <= CONTEXT, shown[:3000]
    assert "test_calc.py::test_total[items0-3]" in shown  # the summary's failing tests
    assert r["status"] == "fixed", r
