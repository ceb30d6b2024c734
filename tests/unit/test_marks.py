"""Marks in code blocks (autod.planner.marks): read as what they mean, or left alone."""

from __future__ import annotations

import pytest

from autod.act.edits import Caps, prepare
from autod.errors import PlanRejected
from autod.planner.codeform import parse_code_reply
from autod.planner.marks import diff_path, hunks, unmark
from autod.safety.boundary import Boundary


def test_a_plus_written_in_place_of_the_first_space_of_the_indentation_is_read_too():
    body = "def f(x):\n    y = x\n-    return y\n+   return y + 1\n"
    assert unmark(body) == "def f(x):\n    y = x\n    return y + 1\n"


def test_a_block_that_does_not_parse_either_way_is_returned_as_it_is():
    body = "def f(x:\n+    return x\n"
    assert unmark(body) == body


def test_hunks_keep_context_on_both_sides_and_skip_the_no_newline_marker():
    body = ("--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,3 @@\n def f(x):\n-    return x\n+    return -x\n"
            "\\ No newline at end of file\n")
    assert hunks(body) == [("def f(x):\n    return x", "def f(x):\n    return -x")]
    assert diff_path(body) == "m.py"


def test_a_diff_that_only_adds_lines_has_nothing_to_find_and_is_not_read_as_hunks():
    # a new file (`--- /dev/null`) or lines added with no context: no search text to place them
    assert hunks("--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+x = 1\n") is None
    assert diff_path("--- /dev/null\n+++ /dev/null\n") is None


def test_a_line_with_no_lead_means_it_is_not_a_diff():
    assert hunks("@@ -1 +1 @@\n-a = 1\nb = 2\n") is None
    assert hunks("def f():\n    return 1\n") is None


def test_the_outline_line_range_copied_onto_a_def_line_is_taken_off():
    body = "def get(self, key):  [135-139]  # Return the value.\n    return self.data[key]\n"
    assert unmark(body) == "def get(self, key):\n    return self.data[key]\n"
    # in code that parses (a list in a comment, a subscript) nothing is touched
    fine = "def get(self, key):  # [1-2]\n    return x[1-2]\n"
    assert unmark(fine) == fine


def test_a_diff_is_an_ordinary_edit_and_the_act_rules_refuse_one_that_leaves_the_workspace(tmp_path):
    """Hostile: the `+++` path is the model's word, like any header; confinement is the act rules'."""
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "calc.py").write_text("X = 1\n")
    (tmp_path / "outside.py").write_text("X = 1\n")
    boundary = Boundary(tmp_path / "ws", tmp_path / "ws" / ".autod", [])
    for path in ("../outside.py", str(tmp_path / "outside.py"), ".autod/state.json"):
        reply = f"```diff\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-X = 1\n+X = 2\n```\n"
        plan = parse_code_reply(reply, {"calc.py": ("X",)}, ["calc.py"])
        assert len(plan.edits) == 1 and not plan.edits[0].whole_definition
        with pytest.raises(PlanRejected):
            prepare(plan, boundary, Caps(10, 100, 100_000))
    assert (tmp_path / "outside.py").read_text() == "X = 1\n"
