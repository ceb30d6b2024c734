"""The whole-definition edit: a plan names a definition and gives its new source; autod finds its lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from autod.act.definition import normalise_symbol, replace_definition
from autod.act.edits import Caps, prepare
from autod.errors import PlanRejected
from autod.plan import Plan, plan_schema
from autod.safety.boundary import Boundary

SHAPES = '''import functools


class Shape:
    sides = 0

    @functools.lru_cache(maxsize=None)
    @staticmethod
    def area(w, h):
        """Area."""
        return w + h

    def describe(self):
        return "shape"


class Label:
    def describe(self):
        return "label"


def outer(x):
    def inner(y):
        return y - 1

    return inner(x)


LIMIT = 10
'''


def replaced(symbol: str, new: str, search: str = "") -> str:
    out = replace_definition("shapes.py", SHAPES, symbol, new, search)
    ast.parse(out)
    return out


def test_a_decorated_method_is_replaced_whole_keeping_its_decorators_when_the_new_source_has_none():
    out = replaced("Shape.area", "def area(w, h):\n    return w * h\n")
    assert (
        "    @functools.lru_cache(maxsize=None)\n    @staticmethod\n    def area(w, h):\n"
        '        """Area."""\n        return w * h\n' in out
    )
    assert "return w + h" not in out
    assert out.count("@staticmethod") == 1


def test_new_decorators_replace_the_old_ones():
    out = replaced("Shape.area", "@staticmethod\ndef area(w, h):\n    return w * h")
    assert "lru_cache(" not in out and "    @staticmethod\n    def area(w, h):\n" in out


def test_a_nested_function_is_found_by_its_qualname():
    out = replaced("outer.inner", "def inner(y):\n    return y + 1")
    assert "    def inner(y):\n        return y + 1\n\n    return inner(x)\n" in out


def test_a_method_name_in_two_classes_needs_its_class_and_each_is_replaced_alone():
    with pytest.raises(PlanRejected, match=r"ambiguous \(Shape.describe and Label.describe\)"):
        replaced("describe", "def describe(self):\n    return 'x'")
    out = replaced("Label.describe", "def describe(self):\n    return 'LABEL'")
    assert 'return "shape"' in out and "return 'LABEL'" in out and 'return "label"' not in out


def test_the_new_source_may_come_indented_as_in_the_class_or_fenced():
    indented = replaced("Shape.describe", "    def describe(self):\n        return 'indented'\n")
    fenced = replaced("Shape.describe", "```python\ndef describe(self):\n    return 'fenced'\n```")
    assert "    def describe(self):\n        return 'indented'\n" in indented
    assert "    def describe(self):\n        return 'fenced'\n" in fenced
    doc = 'def describe(self):\n    """E.g.\n\n    ```pycon\n    >>> x\n    ```\n    """\n    return \'long\''
    long = replaced("Shape.describe", f"````python\n{doc}\n````")  # the prompt's fence, copied
    assert "    def describe(self):\n" in long and "        ```pycon\n" in long and "return 'long'" in long


def test_a_def_at_column_zero_with_its_body_indented_for_the_class_is_accepted():
    out = replaced("Shape.describe", "def describe(self):\n        return 'mixed'")
    assert "    def describe(self):\n        return 'mixed'\n" in out


def test_a_class_given_back_around_the_method_is_unwrapped_to_the_method():
    out = replaced("Label.describe", "class Label:\n    def describe(self):\n        return 'only this'\n")
    assert out.count("class Label:") == 1 and "return 'only this'" in out


def test_the_class_given_back_with_only_the_method_it_fixed_keeps_the_rest_of_the_class():
    # the plan names the class; its "new source" is the class line and one method: replacing the class
    # with it would delete `sides`, `area` and its decorators
    out = replaced("Shape", "class Shape:\n    def describe(self):\n        return 'a shape'\n")
    assert "return 'a shape'" in out and "sides = 0" in out
    assert "    @functools.lru_cache(maxsize=None)\n    @staticmethod\n    def area(w, h):" in out


@pytest.mark.parametrize("new", [
    "class Shape(Base):\n    def describe(self):\n        return 'a shape'\n",  # new bases
    "class Shape:\n    def describe(self):\n        return 'a shape'\n    def new(self):\n        return 1\n",
    "class Shape:\n    sides = 4\n\n    def describe(self):\n        return 'a shape'\n",  # an attribute
])
def test_a_class_given_back_with_more_than_its_own_methods_is_a_rewrite_of_the_class(new: str):
    out = replaced("Shape", new)
    assert "def area" not in out and "return 'a shape'" in out


def test_a_body_alone_replaces_the_body_and_keeps_the_signature():
    out = replaced("outer", "def inner(y):\n    return y\nreturn inner(x) * 2")
    assert "def outer(x):\n    def inner(y):\n        return y\n    return inner(x) * 2\n" in out


def test_a_search_inside_the_definition_need_not_be_unique_in_the_file():
    # `return` occurs in every function, but only once in Shape.area
    out = replaced("Shape.area", "return w * h", search="return w + h")
    assert "return w * h" in out


def test_a_new_definition_without_a_docstring_keeps_the_old_one():
    out = replaced("Shape.area", "def area(w, h):\n    return w * h")
    assert '    def area(w, h):\n        """Area."""\n        return w * h\n' in out


def test_a_constant_is_a_definition_too():
    assert "LIMIT = 20\n" in replaced("LIMIT", "LIMIT = 20")


def test_a_class_attribute_is_replaced_in_its_class_from_its_assignment_alone():
    """A value suspect's reply (autod.localize.focus.value_suspects): the attribute's new assignment,
    unindented, replaces it at the class's indentation, and nothing else moves."""
    out = replaced("Shape.sides", "sides = 4")
    assert "class Shape:\n    sides = 4\n\n    @functools" in out
    assert out.replace("sides = 4", "sides = 0") == SHAPES


def test_new_helpers_beside_the_definition_go_in_with_it():
    out = replaced("outer", "def _twice(v):\n    return 2 * v\n\n\ndef outer(x):\n    return _twice(x)\n")
    assert "def _twice(v):" in out and "    return _twice(x)" in out


def test_unknown_and_unparsable_edits_are_refused_with_a_reason_for_the_replan():
    with pytest.raises(PlanRejected, match=r"has no definition 'area2'.*Shape\.area"):
        replaced("area2", "def area2(): pass")
    with pytest.raises(PlanRejected, match="does not parse"):
        replaced("Shape.describe", "def describe(self)\n    return 1")


@pytest.mark.parametrize(
    ("written", "symbol"),
    [("shapes.py::Shape.area", "Shape.area"), ("Shape.area()", "Shape.area"), (" def outer", "outer")],
)
def test_what_a_model_writes_around_a_qualname_is_tolerated(written, symbol):
    assert normalise_symbol(written) == symbol


def test_crlf_files_keep_their_line_endings():
    text = "def f():\r\n    return 1\r\n\r\ndef g():\r\n    return 2\r\n"
    out = replace_definition("m.py", text, "f", "def f():\n    return 3\n")
    assert out == "def f():\r\n    return 3\r\n\r\ndef g():\r\n    return 2\r\n"


def test_a_plan_with_a_whole_definition_edit_goes_through_the_act_rules(tmp_path: Path):
    (tmp_path / "shapes.py").write_text(SHAPES)
    boundary = Boundary(tmp_path, tmp_path / ".autod", [".env"])
    plan = Plan.model_validate(
        {"summary": "s", "edits": [{"path": "shapes.py", "symbol": "Shape.area",
                                     "replace": "def area(w, h):\n    return w * h"}]}
    )
    (change,) = prepare(plan, boundary, Caps(10, 200, 1_000_000))
    assert b"return w * h" in change.new and (change.added, change.removed) == (1, 1)  # docstring kept
    not_python = Plan.model_validate(
        {"summary": "s", "edits": [{"path": "README", "symbol": "x", "replace": "y"}]}
    )
    (tmp_path / "README").write_text("x\n")
    with pytest.raises(PlanRejected, match="for Python files"):
        prepare(not_python, boundary, Caps(10, 200, 1_000_000))


def test_the_schema_offers_each_file_only_its_own_definitions():
    schema = plan_schema(["a.py", "b.py"], {"a.py": ["f", "C.m"], "b.py": ["g"], "tests/t.py": ["t"]})
    shapes = schema["properties"]["edits"]["items"]["anyOf"]
    whole = [s for s in shapes if "symbol" in s["properties"]]
    assert [(s["properties"]["path"]["enum"], s["properties"]["symbol"]["enum"]) for s in whole] == [
        (["a.py"], ["C.m", "f"]),
        (["b.py"], ["g"]),
    ]
    assert shapes[-1]["properties"]["path"]["enum"] == ["a.py", "b.py"]
    assert shapes[-1]["required"] == ["path", "search", "replace"]


def test_a_long_definition_given_back_cut_short_is_refused_not_truncated():
    body = "".join(f"    x{i} = {i}\n" for i in range(80))
    text = f"def long():\n{body}    return x0\n"
    with pytest.raises(PlanRejected, match="has 3 lines for a definition of 82"):
        replace_definition("m.py", text, "long", "def long():\n    x0 = 1\n    return x0\n")
    fixed = replace_definition("m.py", text, "long", f"def long():\n{body}    return x1\n")
    assert fixed.endswith("    return x1\n")


def test_a_class_given_back_around_a_method_with_a_docstring_keeps_it():
    """Found by bench_reallib: the wrapper's line numbers were used on the unwrapped method."""
    text = 'class C:\n    def f(self):\n        """Doc."""\n        return 1\n'
    out = replace_definition("m.py", text, "C.f", "class C:\n    def f(self):\n        return 2\n")
    assert out == 'class C:\n    def f(self):\n        """Doc."""\n        return 2\n'
