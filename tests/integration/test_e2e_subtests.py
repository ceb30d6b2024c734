"""A suite written with unittest's `subTest`, fixed through `autod run` and a loopback LLM.

pytest 9 reports a failed subtest as `SUBFAILED(k=v) path::test - reason` and gives the test itself no
`FAILED` line. Localization reads the failing tests' ids from those lines (autod.localize.frames), so
the coverage re-run ranks the definition the failing subtests ran and the first prompt is about it;
before, such a report named no failing test and no suspect was asked about.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from daemon import base_config, git, start_autod

pytestmark = pytest.mark.slow

SHAPES = '''def _positive(v):
    if v < 0:
        raise ValueError("negative size")
    return v


def area(w, h):
    return _positive(w) * _positive(w)


def perimeter(w, h):
    return 2 * (_positive(w) + _positive(h))


def describe(w, h):
    return f"{w}x{h}"
'''

TESTS = '''import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "src"))
from shapes import area, describe, perimeter  # noqa: E402


class ShapeTests(unittest.TestCase):
    def test_area(self):
        for w, h, want in [(2, 3, 6), (1, 1, 1), (4, 5, 20)]:
            with self.subTest(w=w, h=h):
                self.assertEqual(area(w, h), want)

    def test_perimeter(self):
        for w, h, want in [(2, 3, 10), (1, 1, 4)]:
            with self.subTest(w=w, h=h):
                self.assertEqual(perimeter(w, h), want)

    def test_describe(self):
        self.assertEqual(describe(2, 3), "2x3")
'''


def reply(fixed: str) -> str:
    definition = fixed.split("\n\n\n")[1]
    return f"area multiplies the width by itself.\n\n### src/shapes.py · area\n```python\n{definition}\n```\n"


def test_a_failure_only_subtests_report_is_asked_about_first_and_fixed(
    tmp_path: Path, calc_repo: Path, scripted_llm, real_bwrap
) -> None:
    (calc_repo / "src" / "shapes.py").write_text(SHAPES)
    (calc_repo / "tests" / "test_shapes.py").write_text(TESTS)
    git(calc_repo, "rm", "-q", "src/calc.py", "tests/test_calc.py")
    git(calc_repo, "add", "-A")
    git(calc_repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "subtests")
    fixed = SHAPES.replace("_positive(w) * _positive(w)", "_positive(w) * _positive(h)")
    scripted_llm.push_text(reply(fixed))
    cfg = base_config(calc_repo, ranked=True, candidates={"n": 1, "focused": 1},
                      modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}})
    d = start_autod(tmp_path, cfg, scripted_llm.base_url)
    try:
        (r,) = d.wait_reflections(1)
        prompt = scripted_llm.requests[0]["messages"][-1]["content"]
        assert "SUBFAILED" in prompt  # the report the prompt shows is the subtests' own
        assert "The bug is most likely in this definition, `area`" in prompt
        assert r["status"] == "fixed", r
        assert (calc_repo / "src" / "shapes.py").read_text() == fixed
    finally:
        assert d.stop() == 0
