"""Through `autod run`: a failing test whose parametrize id reads like a credential (AWS's documented
example key, common in test suites) is fixed by the right fix. The failure event stores its failing
tests as the redacted output names them (`test_parse[***]`), the runs name them whole, and the right fix
was rolled back: "tests that failed before did not pass, they are now test_parse[***] not run"."""

from __future__ import annotations

import pytest
from daemon import CALC_BUGGY, CALC_TEST, make_repo, one_fix

pytestmark = pytest.mark.slow

FIXED_ADD = "def add(a, b):\n    return a + b\n"


@pytest.mark.parametrize("ident", ["AKIAIOSFODNN7EXAMPLE", "sk-test-abcdefgh1234"])
def test_a_failing_test_named_like_a_credential_is_fixed(tmp_path, scripted_llm, real_bwrap, ident):
    test = CALC_TEST + ("\n\nimport pytest\n\n\n"
                        f"@pytest.mark.parametrize('line', [{ident!r}])\n"
                        "def test_parse(line):\n    assert add(2, 3) == 5\n")
    repo = make_repo(tmp_path / "repo", {"src/calc.py": CALC_BUGGY, "tests/test_calc.py": test})
    reply = f"add subtracts.\n\n### src/calc.py · add\n```python\n{FIXED_ADD}```\n"
    r = one_fix(tmp_path, repo, scripted_llm, reply)
    assert r["status"] == "fixed", r
    assert "return a + b" in (repo / "src" / "calc.py").read_text()
