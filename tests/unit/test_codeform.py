"""The code reply form (autod.planner.codeform): what a small model writes, read back into a Plan."""

from __future__ import annotations

import pytest

from autod.errors import PlanInvalid
from autod.planner.codeform import parse_code_reply, quoted_code

SHOWN = {"src/calc.py": ("Calc.add", "Calc.sub", "helper", "LIMIT"), "src/other.py": ("Other.add",)}
PATHS = ["src/calc.py", "src/other.py"]


def parse(text: str):
    return parse_code_reply(text, SHOWN, PATHS)


def edits(text: str) -> list[tuple[str, str | None, str, str]]:
    return [(e.path, e.symbol, e.search, e.replace) for e in parse(text).edits]


def test_the_asked_form_is_a_whole_definition_edit_with_the_prose_as_summary():
    plan = parse(
        "The add method subtracts; it must add.\n\n"
        "### src/calc.py · Calc.add\n```python\ndef add(self, a, b):\n    return a + b\n```\n"
    )
    assert plan.summary == "The add method subtracts; it must add."
    assert [(e.path, e.symbol, e.replace) for e in plan.edits] == [
        ("src/calc.py", "Calc.add", "def add(self, a, b):\n    return a + b\n")
    ]
    assert plan.need == [] and plan.edits[0].whole_definition


@pytest.mark.parametrize("header", [
    "### src/calc.py · Calc.add (lines 3-5; named in the traceback)",  # the prompt's header, copied
    "**src/calc.py · Calc.add**",
    "File: `src/calc.py` · `Calc.add()`",
    "## src/calc.py::Calc.add",
    "### calc.py · Calc.add",  # a shown path, shortened
    "### src/calc.py · add",  # the one shown definition of the file with that name
])
def test_header_variants_a_small_model_writes_name_the_same_definition(header: str):
    assert edits(f"Fix.\n{header}\n```python\ndef add(self, a, b):\n    return a + b\n```") == [
        ("src/calc.py", "Calc.add", "", "def add(self, a, b):\n    return a + b\n")
    ]


def test_a_block_without_a_header_is_placed_by_the_name_it_defines_when_only_one_shown_has_it():
    assert edits("Fix helper.\n```python\ndef helper(x):\n    return x\n```") == [
        ("src/calc.py", "helper", "", "def helper(x):\n    return x\n")
    ]


def test_a_class_attributes_assignment_alone_is_placed_on_the_attribute_it_assigns():
    """A value suspect's prompt shows `Checker._in_fstring` as `_in_fstring = True`; the reply is the
    bare assignment."""
    shown = {"pkg/checker.py": ("Checker._in_fstring",)}
    plan = parse_code_reply("```python\n_in_fstring = False\n```", shown, ["pkg/checker.py"])
    assert [(e.path, e.symbol, e.replace) for e in plan.edits] == [
        ("pkg/checker.py", "Checker._in_fstring", "_in_fstring = False\n")]
    # written by the name the prompt gave it: the same edit, the class's own spelling
    for reply in ("```python\nChecker._in_fstring = False\n```",
                  "### pkg/checker.py · Checker._in_fstring\n```python\nChecker._in_fstring = False\n```"):
        plan = parse_code_reply(reply, shown, ["pkg/checker.py"])
        assert [(e.path, e.symbol, e.replace) for e in plan.edits] == [
            ("pkg/checker.py", "Checker._in_fstring", "_in_fstring = False\n")]
    # an attribute of something else is not taken for a shown one
    with pytest.raises(PlanInvalid):
        parse_code_reply("```python\nOther._in_fstring = False\n```", shown, ["pkg/checker.py"])


def test_a_block_without_a_header_whose_name_two_classes_share_is_refused_naming_the_form():
    with pytest.raises(PlanInvalid, match=r"2 shown places.*### path · symbol"):
        parse("```python\ndef add(self, a, b):\n    return a + b\n```")


def test_a_quoted_original_before_the_fix_loses_to_the_fix():
    text = (
        "Original:\n### src/calc.py · helper\n```python\ndef helper(x):\n    return x + 1\n```\n"
        "Fixed:\n### src/calc.py · helper\n```python\ndef helper(x):\n    return x\n```\n"
    )
    assert edits(text) == [("src/calc.py", "helper", "", "def helper(x):\n    return x\n")]


def test_two_definitions_are_two_edits_and_a_constant_is_a_definition():
    text = (
        "### src/calc.py · LIMIT\n```python\nLIMIT = 10\n```\n"
        "### src/other.py · Other.add\n```python\ndef add(self):\n    pass\n```\n"
    )
    assert [(p, s) for p, s, _, _ in edits(text)] == [("src/calc.py", "LIMIT"), ("src/other.py", "Other.add")]


def test_search_replace_sections_under_a_file_header_are_search_edits():
    text = (
        "### src/calc.py\n```python\n<<<<<<< SEARCH\nimport os\n=======\nimport os\nimport sys\n"
        ">>>>>>> REPLACE\n<<<<<<< SEARCH\nX = 1\n=======\nX = 2\n>>>>>>> REPLACE\n```\n"
    )
    assert edits(text) == [
        ("src/calc.py", None, "import os", "import os\nimport sys"),
        ("src/calc.py", None, "X = 1", "X = 2"),
    ]


def test_a_new_file_is_created_with_the_block_and_a_known_file_without_a_symbol_is_asked_again():
    new = edits("### src/util.py (new file)\n```python\nA = 1\n```")
    assert new == [("src/util.py", None, "", "A = 1\n")]
    with pytest.raises(PlanInvalid, match=r"name the definition"):
        parse("### src/calc.py\n```python\nprint('hi')\n```")


def test_need_asks_for_definitions_and_no_block_is_no_fix():
    plan = parse("I must see the multiplier first.\nNEED: src/calc.py::Calc.mul, `scale`")
    assert plan.need == ["src/calc.py::Calc.mul", "scale"] and plan.edits == []
    assert plan.summary == "I must see the multiplier first."
    none = parse("I cannot find a safe fix: the test expects two different values.")
    assert none.edits == [] and none.need == [] and none.summary.startswith("I cannot find")


def test_blocks_in_other_languages_are_quoted_output_not_edits():
    text = "Run:\n```bash\npytest -q\n```\nThen:\n### src/calc.py · LIMIT\n```python\nLIMIT = 3\n```"
    plan = parse(text)
    assert [(e.path, e.symbol) for e in plan.edits] == [("src/calc.py", "LIMIT")]
    assert "pytest" not in plan.summary


def test_a_reply_that_is_a_json_plan_after_all_is_read_as_one():
    plan = parse('{"summary": "s", "edits": [{"path": "src/calc.py", "symbol": "helper", "replace": "x"}]}')
    assert plan.summary == "s" and plan.edits[0].symbol == "helper"


def test_a_block_never_closed_still_counts_and_an_empty_reply_is_invalid():
    assert edits("### src/calc.py · helper\n```python\ndef helper(x):\n    return x\n") == [
        ("src/calc.py", "helper", "", "def helper(x):\n    return x\n")
    ]
    with pytest.raises(PlanInvalid, match="empty"):
        parse("  \n")


def test_think_blocks_of_reasoning_models_are_not_read():
    plan = parse("<think>maybe ```python\ndef helper(): pass\n``` no</think>\nNo safe fix.")
    assert plan.edits == [] and plan.summary == "No safe fix."


def test_a_header_copied_from_elsewhere_yields_to_the_definition_the_block_writes():
    # the model copied a header (the prompt's example, the wrong section) but wrote `helper` whole
    text = "### src/calc.py · Calc.add (lines 1-3)\n```python\ndef helper(x):\n    return x\n```"
    assert edits(text) == [("src/calc.py", "helper", "", "def helper(x):\n    return x\n")]
    # a block name shown nowhere (or twice) leaves the header in charge; the act rules judge it
    assert edits("### src/calc.py · helper\n```python\ndef parse(x):\n    return x\n```")[0][1] == "helper"


MEDIAN = "def median(xs):\n    s = sorted(xs)\n    return s[len(s) // 2]\n"
TEST = "def test_median():\n    assert median([4, 1, 3, 2]) == 2.5\n"
PROMPT = [
    {"role": "system",
     "content": "```python\ndef example():\n    pass\n```\nNEED: path/to/file.py::Class.method, fn"},
    {"role": "user", "content": f"## Source\n### stats.py · median (lines 1-3)\n```python\n{MEDIAN}```\n"
                                f"### tests/test_stats.py · test_median (lines 4-5)\n```python\n{TEST}```\n"},
]
STATS = {"stats.py": ("median",), "tests/test_stats.py": ("test_median",)}


def code_plan(text: str):
    return parse_code_reply(text, STATS, ["stats.py"], quoted=quoted_code(PROMPT))


def test_the_prompts_code_copied_back_is_a_quote_and_a_fix_beside_it_stands():
    """What the 1.5B model did on median_even: the fix without a header, then the prompt's source and
    the failing test (edited to agree with the fix) copied back under their own headers."""
    fixed = "def median(xs):\n    s = sorted(xs)\n    return (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2\n"
    reply = (
        f"The median of an even list is the mean of the middle two.\n```python\n{fixed}```\n"
        f"### stats.py · median (lines 1-3; run by the failing tests)\n```python\n{MEDIAN}```\n"
        f"### tests/test_stats.py · test_median\n```python\n{TEST.replace('2.5', '1.5')}```\n"
    )
    plan = code_plan(reply)
    assert [(e.path, e.symbol, e.replace) for e in plan.edits] == [("stats.py", "median", fixed)]


def test_a_reply_that_only_copies_the_prompt_back_changes_nothing_and_is_not_an_error():
    reply = f"### stats.py · median\n```python\n    {MEDIAN.replace(chr(10), chr(10) + '    ')}```\n"
    plan = code_plan(reply)
    assert plan.edits == []
    assert quoted_code(PROMPT) == {MEDIAN.strip(), TEST.strip(), "def example():\n    pass",
                                   "NEED:path/to/file.py::Class.method, fn"}


def test_without_the_editable_paths_a_shown_tests_block_is_left_to_the_act_rules():
    reply = f"### tests/test_stats.py · test_median\n```python\n{TEST.replace('2.5', '1.5')}```\n"
    assert code_plan(reply).edits == []  # shown to read, not in the paths: a quote
    (edit,) = parse_code_reply(reply, STATS, None).edits  # no paths known: the act rules refuse it
    assert edit.path == "tests/test_stats.py"


def test_a_shown_test_named_by_a_shortened_path_is_still_a_quote():
    reply = f"### test_stats.py · test_median\n```python\n{TEST.replace('2.5', '1.5')}```\n"
    assert code_plan(reply).edits == []


def test_an_example_call_beside_the_fix_does_not_cost_the_fix():
    fixed = "def median(xs):\n    return 2.5\n"
    example = "For example:\n```python\nprint(median([1, 2]))\n```\n"
    reply = f"### stats.py · median\n```python\n{fixed}```\n{example}"
    assert [(e.path, e.symbol) for e in code_plan(reply).edits] == [("stats.py", "median")]
    with pytest.raises(PlanInvalid, match="no header"):  # alone, it is a slip worth a repair round
        code_plan(example)


def test_a_header_written_inside_the_block_is_taken_out_of_the_code():
    """What the 1.5B model wrote on a real library: the header, and a second fence, inside the block."""
    fixed = "def median(xs):\n    return 2.5\n"
    header = "### stats.py · median (lines 1-3; run by the failing tests)"
    nested = f"The fix:\n```python\n{header}\n```python\n{fixed}```\n"
    commented = f"```python\n# stats.py · median (lines 1-3)\n{fixed}```\n"
    for reply in (nested, commented):
        (edit,) = code_plan(reply).edits
        assert (edit.path, edit.symbol, edit.replace) == ("stats.py", "median", fixed)
    kept = "```python\n# stats.py holds the statistics\ndef median(xs):\n    return 2.5\n```\n"
    assert code_plan(kept).edits[0].replace.startswith("# stats.py holds")  # a comment, not a header


def test_the_instructions_example_copied_back_asks_for_nothing_and_edits_nothing():
    """A small model echoing its system prompt: the template's NEED line and code block are quotes."""
    echo = "### <path> · <name>\nNEED: path/to/file.py::Class.method,  fn\n"
    echo += "```python\ndef example():\n    pass\n```"
    plan = code_plan(echo)
    assert plan.need == [] and plan.edits == []
    assert code_plan("NEED: stats.py::mean").need == ["stats.py::mean"]  # a real request stands
    # the model's own earlier turn is no quote: a repair round may send the same code with a header
    again = [*PROMPT, {"role": "assistant", "content": "```python\ndef median(xs):\n    return 2.5\n```"}]
    fixed = "### stats.py · median\n```python\ndef median(xs):\n    return 2.5\n```"
    assert parse_code_reply(fixed, STATS, ["stats.py"], quoted=quoted_code(again)).edits


def test_dunder_paths_and_names_survive_the_header():
    """`__init__.py` and `Class.__init__`: the header's markdown is stripped, never a dunder's `__`."""
    shown = {"pkg/__init__.py": ("Stack.__init__", "Queue.__init__")}  # the name alone is ambiguous
    for header in ("### pkg/__init__.py · Stack.__init__ (lines 3-9; where the error was raised)",
                   "**pkg/__init__.py · Stack.__init__**", "### __init__.py · Stack.__init__"):
        reply = f"{header}\n```python\ndef __init__(self):\n    self.items = []\n```"
        (edit,) = parse_code_reply(reply, shown, ["pkg/__init__.py"]).edits
        assert (edit.path, edit.symbol) == ("pkg/__init__.py", "Stack.__init__"), header


# -- blocks written as a diff, a header on its own, a class line around a method ----------------------
def test_a_definition_with_diff_marks_is_read_without_them():
    # a small model marks its added line with `+` and its removed one with `-` inside the whole method
    text = ("Add, do not subtract.\n### src/calc.py · Calc.add\n```python\n"
            "    def add(self, a, b):\n"
            "-        return a - b\n"
            "+        return a + b\n```\n")
    fixed = "    def add(self, a, b):\n        return a + b\n"
    assert edits(text) == [("src/calc.py", "Calc.add", "", fixed)]


def test_code_that_parses_with_a_line_led_by_a_minus_is_left_as_it_is():
    body = "def helper(x):\n    return (x\n-1)\n"
    assert edits(f"### src/calc.py · helper\n```python\n{body}```") == [("src/calc.py", "helper", "", body)]


def test_a_unified_diff_is_read_as_search_and_replace_on_the_file_it_names():
    text = ("The fix:\n```diff\n--- a/src/calc.py\n+++ b/src/calc.py\n@@ -3,3 +3,3 @@ class Calc:\n"
            "     def add(self, a, b):\n-        return a - b\n+        return a + b\n"
            "@@ -9,2 +9,2 @@\n-LIMIT = 5\n+LIMIT = 6\n```\n")
    assert edits(text) == [
        ("src/calc.py", None, "    def add(self, a, b):\n        return a - b",
         "    def add(self, a, b):\n        return a + b"),
        ("src/calc.py", None, "LIMIT = 5", "LIMIT = 6"),
    ]


def test_a_diff_under_a_header_takes_the_headers_path_and_one_on_a_shown_test_is_a_quote():
    hunk = "@@ -1 +1 @@\n-    return a - b\n+    return a + b\n"
    assert edits(f"### calc.py\n```python\n{hunk}```") == [
        ("src/calc.py", None, "    return a - b", "    return a + b")
    ]
    shown = {**SHOWN, "tests/test_calc.py": ("test_add",)}
    plan = parse_code_reply(f"### tests/test_calc.py\n```diff\n{hunk}```", shown, PATHS)
    assert plan.edits == []


def test_a_block_holding_only_its_header_names_the_next_block():
    # (`add` alone would be ambiguous: Other.add is shown too)
    text = ("The header line is:\n```python\n### src/calc.py · Calc.add\n```\n"
            "The complete definition:\n```python\ndef add(self, a, b):\n    return a + b\n```\n")
    assert edits(text) == [("src/calc.py", "Calc.add", "", "def add(self, a, b):\n    return a + b\n")]


def test_a_class_line_written_around_a_shown_method_places_the_block_on_the_method():
    body = "class Calc:\n    def sub(self, a, b):\n        return a - b\n"
    assert edits(f"Fix:\n```python\n{body}```") == [("src/calc.py", "Calc.sub", "", body)]


def test_the_prompts_own_diff_copied_back_is_a_quote_not_an_edit():
    diff = "--- a/src/calc.py\n+++ b/src/calc.py\n@@ -1 +1 @@\n-LIMIT = 5\n+LIMIT = 6\n"
    prompt = [{"role": "user", "content": f"### Diff since the last green run\n```diff\n{diff}```\n"}]
    plan = parse_code_reply(f"Here:\n```diff\n{diff}```", SHOWN, PATHS, quoted=quoted_code(prompt))
    assert plan.edits == []


def test_a_shown_path_with_a_space_can_be_named_in_a_header_and_no_other_spaced_text_is_a_path():
    shown = {"my dir/mod.py": ("f",), "src/calc.py": ("f", "helper")}  # `f` alone is ambiguous
    text = "Fix.\n### my dir/mod.py · f\n```python\ndef f():\n    return 1\n```\n"
    plan = parse_code_reply(text, shown, list(shown))
    assert [(e.path, e.symbol) for e in plan.edits] == [("my dir/mod.py", "f")]
    # prose above a block is not a header because it has a space: the block is placed by its name
    text = "Change the helper:\n```python\ndef helper():\n    return 1\n```\n"
    plan = parse_code_reply(text, shown, list(shown))
    assert [(e.path, e.symbol) for e in plan.edits] == [("src/calc.py", "helper")]


def test_a_block_holding_several_shown_definitions_is_one_edit_for_each():
    """A suspect's prompt shows the values it reads beside it, and a small model gives back the value
    and the function in one block: each statement rewrites its own definition. Read as one edit of the
    first, the block would put a second copy of the function beside the constant."""
    text = "```python\nLIMIT = 10\n\n\n@cached\ndef helper(x):\n    return x * LIMIT\n```"
    assert edits(text) == [
        ("src/calc.py", "LIMIT", "", "LIMIT = 10"),
        ("src/calc.py", "helper", "", "@cached\ndef helper(x):\n    return x * LIMIT"),
    ]
    # a header naming the file places them among its own definitions (Other.add is not taken)
    text = "### src/calc.py\n```python\nLIMIT = 10\n\ndef add(self, a, b):\n    return a + b\n```"
    assert [(p, s) for p, s, _, _ in edits(text)] == [("src/calc.py", "LIMIT"), ("src/calc.py", "Calc.add")]
    text = "```python\ndef helper(x):\n    return x\n\ndef sub(self, a, b):\n    return a - b\n```"
    assert [(p, s) for p, s, _, _ in edits(text)] == [("src/calc.py", "helper"), ("src/calc.py", "Calc.sub")]


def test_a_block_with_a_statement_that_defines_nothing_shown_stays_one_edit():
    # an import, a new helper or a name shown twice: not split (the act rules read the block whole)
    text = "```python\nNEW = 1\n\ndef helper(x):\n    return x * NEW\n```"
    with pytest.raises(PlanInvalid, match="not a definition shown"):
        edits(text)
    text = "```python\ndef helper(x):\n    return x * NEW\n\nNEW = 1\n```"
    assert [(p, s) for p, s, _, _ in edits(text)] == [("src/calc.py", "helper")]
