"""Through `autod run` and real pytest: a whole-definition fix in a module that holds characters
`str.splitlines` breaks at and Python does not (GNU `^L` page breaks, U+2028 in a comment, NEL in a
string) lands on the definition Python reads. On the old code it deleted the comment above `add`,
left the old body as dead code after the new one, and the candidate was kept `fixed`."""

from __future__ import annotations

import pytest
from daemon import CALC_TEST, make_repo, one_fix

pytestmark = pytest.mark.slow

PAGED = ('"""Calculator."""\n\x0c\n# --- section: subtraction\u2028(pages)\ndef sub(a, b):\n'
         '    return a - b\n\x0c\n# --- section: addition\ndef add(a, b):\n    note = "a\x85b"\n'
         '    total = a - b\n    return total\n\n\ndef mul(a, b):\n    return a * b\n')
FIXED_ADD = "def add(a, b):\n    return a + b\n"


@pytest.mark.parametrize("ending", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_a_fix_in_a_module_with_page_breaks_replaces_the_definition_and_nothing_else(
        tmp_path, scripted_llm, real_bwrap, ending):
    buggy = PAGED.replace("\n", ending)
    repo = make_repo(tmp_path / "repo", {"tests/test_calc.py": CALC_TEST})
    (repo / "src").mkdir()
    (repo / "src" / "calc.py").write_bytes(buggy.encode())
    reply = f"add subtracts.\n\n### src/calc.py · add\n```python\n{FIXED_ADD}```\n"
    r = one_fix(tmp_path, repo, scripted_llm, reply)
    start = buggy.index("def add")
    end = buggy.index(f"{ending}{ending}{ending}def mul") + len(ending)
    expected = buggy[:start] + FIXED_ADD.replace("\n", ending) + buggy[end:]
    assert (repo / "src" / "calc.py").read_bytes() == expected.encode()  # the comment and sub kept
    assert r["status"] == "fixed", r
    prompt = scripted_llm.requests[0]["messages"][-1]["content"]
    shown = buggy[start:end].replace(ending, "\n").rstrip("\n")
    assert shown in prompt  # the definition the prompt showed is the one Python reads
