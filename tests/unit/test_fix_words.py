"""A fix is described from its diff, and an undone change is recognised when a later diff makes it again."""

from __future__ import annotations

from pathlib import Path

from autod.act.describe import changed_definitions, describe_fix
from autod.act.edits import FileChange
from autod.undo.remembered import reapplies, remember, undone_hold

OLD = (
    "class Calc:\n    def add(self, a, b):\n        return a - b\n\n"
    "    def mul(self, a, b):\n        return a * b\n"
)
NEW = OLD.replace("a - b", "a + b")
UNDONE = (
    "diff --git a/src/calc.py b/src/calc.py\n--- a/src/calc.py\n+++ b/src/calc.py\n@@ -1,2 +1,2 @@\n"
    "-    return a - b\n+    return a + b\n"
)


def change(rel: str, old: str | None, new: str) -> FileChange:
    return FileChange(rel, Path(rel), None if old is None else old.encode(), new.encode(), None, 1, 1)


def test_the_changed_method_is_named_not_its_class_nor_the_untouched_one():
    assert changed_definitions(OLD, NEW) == ["Calc.add"]
    assert changed_definitions(None, "def new():\n    pass\n") == ["new"]


def test_the_description_names_definitions_files_and_the_tests_made_to_pass():
    said = describe_fix([change("src/calc.py", OLD, NEW), change("README.md", "a\n", "b\n")], ["t::test_add"])
    assert said == "rewrites Calc.add() in src/calc.py; README.md; makes t::test_add pass"


def test_a_later_diff_that_makes_the_undone_change_again_is_recognised_with_more_around_it():
    again = UNDONE.replace("+    return a + b\n", "+    return a + b\n+    # and a comment\n")
    assert reapplies(again, UNDONE)
    other = UNDONE.replace("a + b", "b + a")
    assert not reapplies(other, UNDONE)
    elsewhere = UNDONE.replace("src/calc.py", "src/other.py")
    assert not reapplies(elsewhere, UNDONE)


def test_an_undone_change_is_held_by_name_of_its_cycle(tmp_path):
    assert undone_hold(tmp_path, UNDONE) == ""
    remember(tmp_path, "cyc1", "undo1", "add must add", UNDONE, "not this way")
    assert "`autod undo` (cycle cyc1: add must add)" in undone_hold(tmp_path, UNDONE)
