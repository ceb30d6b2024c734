"""The world tripwire's walk in detail (autod.act.worldreach): what it counts and how often, which names
a scope binds (so a name a function binds is its own), and the bounds of folding. The generated classes
are tests/unit/test_worldreach.py's; these pin each rule the classes rely on."""

from __future__ import annotations

from collections import Counter

import pytest

from autod.act.reach import reaching
from autod.act.worldreach import fold, world_features

BOX = "class Box:\n    pass\n\n\n"
SPELT = "a name spelt in pieces: 'f_locals'"


def refused(code: str) -> bool:
    found = world_features(code, reaching) or Counter()
    return any("another module's state" in k for k in found)


@pytest.mark.parametrize(("code", "counted"), [
    ("import test_x\n", {"import of the tests' module test_x": 1}),
    ("from pkg import test_h, other\n", {"import of the tests' module pkg.test_h": 1}),
    ("import math\nmath.x = 1\n", {"assigns math....x: another module's state": 1}),
    ("import math\nsetattr(math, 'x', 1)\n", {"setattr() on math...: another module's state": 1}),
    ("import operator\noperator.attrgetter(''.join(['f_', 'locals']))\n", {SPELT: 1}),
    ("import operator\noperator.attrgetter('f_' + 'locals')\n", {SPELT: 1}),
])
def test_each_form_is_counted_once_where_it_is(code: str, counted: dict[str, int]) -> None:
    assert world_features(code, reaching) == Counter(counted)


# a function's own name, however it binds it, where the module imports the same name: never outside
OWN_BY_BINDING = {
    "nested def": "    def copy():\n        pass\n",
    "nested async def": "    async def copy():\n        pass\n",
    "nested class": "    class copy:\n        pass\n",
    "except as": "    try:\n        pass\n    except Exception as copy:\n        pass\n",
    "match as": "    match a:\n        case [copy]:\n            pass\n",
    "match star": "    match a:\n        case [*copy]:\n            pass\n",
    "match rest": "    match a:\n        case {**copy}:\n            pass\n",
    "assigned before a nested def": "    copy = Box()\n    def inner():\n        pass\n",
    "assigned before a lambda": "    copy = Box()\n    g = lambda: 0\n",
}


@pytest.mark.parametrize("how", sorted(OWN_BY_BINDING))
def test_a_name_a_function_binds_is_its_own(how: str) -> None:
    code = f"import copy\n\n\n{BOX}def add(a, b):\n{OWN_BY_BINDING[how]}    copy.x = 1\n    return a + b\n"
    assert not refused(code), how
    assert refused(code.replace("    copy.x = 1\n", "    len.__self__.x = 1\n"))  # the walk still runs


def test_a_module_imported_in_one_function_is_that_function_s_alone() -> None:
    code = (f"{BOX}math = Box()\n\n\ndef f():\n    import math\n    import os.path\n    return math, os\n\n\n"
            "def add(a, b):\n    math.x = 1\n    os = Box()\n    os.x = 1\n    return a + b\n")
    assert not refused(code)


@pytest.mark.parametrize("code", [
    "import math\nm = math\nm: object\nm.isclose = max\n",  # an annotation alone rebinds nothing
    "import math\nms = {math}\nfor m in ms:\n    setattr(m, 'isclose', max)\n",
    "import pkgmod\n\n\ndef add(a, b):\n    for m in pkgmod.REGISTRY:\n        m.x = 1\n    return a\n",
])
def test_outside_state_through_annotations_sets_and_loops(code: str) -> None:
    assert refused(code)


@pytest.mark.parametrize("code", [
    "import collections\nfresh = [collections.OrderedDict()]\nfresh[0]['k'] = 1\n",  # a new object's item
    "def add(a, b, obj=None):\n    for it in [obj]:\n        it.x = 1\n    return a\n",
    "import collections\nfor got in collections.OrderedDict():\n    got.x = 1\n",
    "import collections\n(w := collections.OrderedDict())\nw.x = 1\n",
    "import math\nn = 0\nn += math.pi\nn.x = 1\n",
    "def add(a, b):\n    pop = list\n    pop()\n    update = dict\n    update(a=1)\n    return a\n",
    "vals = [1, 'a']\nvals[0].x = 1\n",
])
def test_a_fix_s_own_objects_made_from_outside_values_are_its_own(code: str) -> None:
    assert not refused(code), code


def test_folding_reads_to_its_bound_and_steps_as_python_does() -> None:
    import ast

    def f(src: str) -> str | None:
        return fold(ast.parse(src, mode="eval").body)

    half = "a" * 5_000
    assert f(f"'{half}' + '{half}'") == half * 2  # exactly the bound: folded
    assert f(f"'{half}' + '{half}' + 'b'") is None
    assert f(f"''.join(['{half}', '{half}'])") == half * 2 and f(f"''.join(['{half}', '{half}b'])") is None
    assert f("'abc'[::1]") == "abc" and f("'abc'[::-1]") == "cba" and f("'abc'[::0]") is None
