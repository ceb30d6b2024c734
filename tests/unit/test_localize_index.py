"""The AST index and name resolution: real spans, imports, receivers; frames and test ids."""

from __future__ import annotations

import textwrap
from pathlib import Path

from autod.localize.frames import parse_frames, parse_test_ids
from autod.localize.index import build_index
from autod.localize.resolve import Resolver
from autod.safety.boundary import Boundary

PKG_INIT = "from .core import *\nfrom .util import helper as _helper\n"
CORE = '''\
import functools

from . import util
from .util import LIMIT, helper as h

DEFAULT = 3


@functools.lru_cache(maxsize=None)
@staticmethod
def decorated(
    a,
    b=DEFAULT,
):
    """Add with a cache."""
    return h(a) + b


class Outer:
    size = LIMIT

    class Inner:
        flag = True

        def method(self):
            return self.flag

    def __init__(self, n):
        self.n = n

    def grow(self):
        return self.bigger() + self.size

    def bigger(self):
        return util.scale(self.n)

    def __and__(self, other):
        return self.n & other.n


def use():
    o = Outer(2)
    alias = util.scale
    return o.grow() + alias(3) + Outer(1).bigger()
'''
UTIL = "LIMIT = 10\n\n\ndef helper(x):\n    return x * 2\n\n\ndef scale(x):\n    return x * LIMIT\n"


def make(tmp_path: Path) -> Boundary:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(PKG_INIT)
    (tmp_path / "pkg" / "core.py").write_text(CORE)
    (tmp_path / "pkg" / "util.py").write_text(UTIL)
    (tmp_path / ".env").write_text("SECRET = 'x'\ndef leaked():\n    pass\n")
    (tmp_path / "state").mkdir()
    return Boundary(tmp_path, tmp_path / "state", [".env", "**/secrets/**"])


def test_definitions_span_decorators_and_multiline_signatures(tmp_path):
    index = build_index(make(tmp_path))
    d = index.get("pkg/core.py", "decorated")
    lines = CORE.splitlines()
    assert lines[d.start - 1] == "@functools.lru_cache(maxsize=None)"
    assert lines[d.header_end - 1] == "):" and lines[d.end - 1].strip() == "return h(a) + b"
    assert d.doc == "Add with a cache."
    assert index.get("pkg/core.py", "DEFAULT").kind == "constant"


def test_nested_classes_methods_and_class_attributes_are_indexed(tmp_path):
    index = build_index(make(tmp_path))
    mod = index.modules["pkg/core.py"]
    assert mod.defs["Outer.Inner.method"].kind == "function"
    assert mod.defs["Outer.Inner.flag"].kind == "attribute"
    assert mod.defs["Outer.size"].kind == "attribute"
    line = CORE.splitlines().index("            return self.flag") + 1
    assert mod.enclosing(line).qualname == "Outer.Inner.method"
    assert mod.names[0] == "pkg.core" and mod.imports["h"] == "pkg.util.helper"


def test_names_resolve_through_import_aliases_receivers_and_locals(tmp_path):
    index = build_index(make(tmp_path))
    r = Resolver(index)

    def uses(path: str, qual: str) -> set[str]:
        return {f"{d.path}::{d.qualname}" for d in r.uses(index.get(path, qual))}

    assert {"pkg/util.py::helper", "pkg/core.py::DEFAULT"} <= uses("pkg/core.py", "decorated")
    # self.x: the class's own members, including its class attributes
    assert {"pkg/core.py::Outer.bigger", "pkg/core.py::Outer.size"} <= uses("pkg/core.py", "Outer.grow")
    # a module alias (`from . import util`) and a constant read in the other module
    assert "pkg/util.py::scale" in uses("pkg/core.py", "Outer.bigger")
    assert "pkg/util.py::LIMIT" in uses("pkg/util.py", "scale")
    # `o = Outer(2); o.grow()`, an alias local (`alias = util.scale`), a call on a call (`Outer(1).bigger()`)
    used = uses("pkg/core.py", "use")
    assert {"pkg/core.py::Outer.grow", "pkg/util.py::scale", "pkg/core.py::Outer.bigger"} <= used
    assert "pkg/core.py::Outer.__init__" in used  # constructing a class reaches its __init__
    # a re-export through the package (`from .core import *`)
    pkg = index.modules["pkg/__init__.py"]
    assert [d.qualname for d in r.resolve(pkg, None, "decorated")] == ["decorated"]


def test_a_name_is_never_matched_by_regex_across_the_repo(tmp_path):
    make(tmp_path)
    (tmp_path / "other.py").write_text("def helper(x):\n    return 0\n")
    index = build_index(Boundary(tmp_path, tmp_path / "state", [".env"]))
    r = Resolver(index)
    targets = {d.path for d in r.uses(index.get("pkg/core.py", "decorated"))}
    assert "other.py" not in targets and "pkg/util.py" in targets


def test_denied_files_are_never_indexed(tmp_path):
    index = build_index(make(tmp_path))
    assert ".env" not in index.modules and not index.find("leaked")


def test_index_stops_at_its_file_bound_and_says_so(tmp_path):
    index = build_index(make(tmp_path), max_files=1)
    assert len(index.modules) == 1 and not index.complete and "Python files" in index.why_incomplete


def test_pytest_and_python_frames_and_failing_test_ids_are_parsed():
    out = textwrap.dedent(
        """\
        ____________________ TestThing.test_add[1-2] ____________________
        pkg/tests/test_core.py:12: in test_add
            assert add(1, 2) == 3
        pkg/core.py:40: in add
            return helper(a) - b
        pkg/util.py:7: AssertionError
        Traceback (most recent call last):
          File "/abs/pkg/core.py", line 41, in use
        FAILED pkg/tests/test_core.py::TestThing::test_add[1-2] - assert 1 == 3
        ERROR pkg/tests/test_io.py::test_read - OSError: boom
        FAILED not a test id
        """
    )
    frames = parse_frames(out)
    assert [(f.path, f.line, f.func) for f in frames[:3]] == [
        ("pkg/tests/test_core.py", 12, "test_add"),
        ("pkg/core.py", 40, "add"),
        ("pkg/util.py", 7, None),
    ]
    assert frames[2].raised and frames[3].path == "/abs/pkg/core.py"
    ids = parse_test_ids(out)
    assert [(t.path, t.names) for t in ids] == [
        ("pkg/tests/test_core.py", ("TestThing", "test_add")),
        ("pkg/tests/test_io.py", ("test_read",)),
    ]


def test_a_branch_only_the_failing_tests_take_makes_its_function_the_most_suspicious(tmp_path):
    """Ochiai per line, a function scoring its worst line: `parse` runs in every test, but its error
    branch only in the failing one; per function it would tie with `helper`, which every test runs."""
    from autod.localize.index import build_index
    from autod.localize.spectrum import scores
    from autod.safety.boundary import Boundary

    src = "def parse(x):\n    if x < 0:\n        return -x\n    return helper(x)\n\n\n"
    src += "def helper(x):\n    return x\n"
    (tmp_path / "m.py").write_text(src)
    b = Boundary(tmp_path, tmp_path / ".autod", [])
    index = build_index(b)
    path = str(tmp_path / "m.py")
    doc = {"tests": {
        "t::fails": {"failed": True, "lines": {path: [2, 3, 4, 8]}},
        "t::passes1": {"failed": False, "lines": {path: [2, 4, 8]}},
        "t::passes2": {"failed": False, "lines": {path: [2, 4, 8]}},
    }}
    found = scores(index, b, doc)
    assert found[("m.py", "parse")] == 1.0  # line 3: failing tests only
    assert found[("m.py", "helper")] < 0.6
