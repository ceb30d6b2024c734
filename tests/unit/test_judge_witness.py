"""What a test's own code is and whether it ran (autod.checks.judge_ran), and what `ran` carries of it
(autod.checks.judge_path): the content of code, a test module's literals and bindings, and a witness
that hears the collected test function return with its own arguments."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import functools
import json
import os
import random
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

from autod.checks import judge_path as path
from autod.checks import judge_ran as ran

TESTS = [
    "def test_a():\n    assert add(2, 3) == 5\n",
    "def test_b(x):\n    z, y = [i * 2 for i in range(x)], 4\n"
    "    assert sum(z) == y and 'ab' in {'ab', 'cd'}\n",
    "def test_c():\n    def inner(v):\n        return v + 1.5\n"
    "    assert inner(1) != -2 and (1, 'x', b'y') > (0,)\n",
    "def test_d(a):\n    if a is None:\n        raise ValueError('no')\n    return a or 7\n",
]


def code_of(src: str, name: str = "t.py"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # a variant's `a is 1`
        tree = compile(src, name, "exec")
    return next(c for c in tree.co_consts if isinstance(c, type(tree)))


class _Swap(ast.NodeTransformer):
    """One change to one node of a test: the `at`th constant or comparison operator."""

    def __init__(self, at: int) -> None:
        self.at, self.seen = at, -1

    def visit_Constant(self, node):
        self.seen += 1
        if self.seen == self.at and not isinstance(node.value, bytes):
            new = node.value + "!" if isinstance(node.value, str) else (not node.value
                                                                          if isinstance(node.value, bool)
                                                                          else (node.value or 0) + 1)
            return ast.copy_location(ast.Constant(new), node)
        return node

    def visit_Compare(self, node):
        self.generic_visit(node)
        self.seen += 1
        if self.seen == self.at:
            flip = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Gt: ast.LtE, ast.In: ast.NotIn,
                    ast.Is: ast.IsNot}
            node.ops = [flip.get(type(o), ast.Eq)() for o in node.ops]
        return node


def variants(src: str):
    """Every one-change variant of a test's source (a constant or a comparison), as source."""
    at = 0
    while True:
        tree = ast.parse(src)
        swap = _Swap(at)
        new = ast.unparse(swap.visit(tree))
        if swap.seen < at:
            return
        if new != ast.unparse(ast.parse(src)):
            yield new
        at += 1


@pytest.mark.parametrize("src", TESTS)
def test_content_is_the_same_for_the_same_source_and_differs_for_every_one_change_variant(src):
    base = ran.content(code_of(src))
    assert base == ran.content(code_of(src)) == ran.content(code_of(src, "elsewhere.py")) and len(base) == 16
    seen = {base}
    count = 0
    for new in variants(src):
        digest = ran.content(code_of(new))
        assert digest not in seen, new
        seen.add(digest)
        count += 1
    assert count >= 3
    added = src.replace("\n    ", "\n    x1 = 0\n    ", 1)
    assert ran.content(code_of(added)) != base


def test_content_reads_nested_code_and_a_swapped_constant_in_it():
    src = "def test_n():\n    def helper():\n        return 5\n    assert helper() == 5\n"
    code = code_of(src)
    helper = next(c for c in code.co_consts if isinstance(c, type(code)))
    swapped = code.replace(co_consts=tuple(helper.replace(co_consts=tuple(-1 if c == 5 else c
                                                                          for c in helper.co_consts))
                                           if c is helper else c for c in code.co_consts))
    assert ran.content(swapped) != ran.content(code)
    named = code_of(TESTS[0])
    assert ran.content(named.replace(co_names=tuple(n + "_" for n in named.co_names))) != ran.content(named)
    for field in ("co_flags", "co_argcount"):
        assert ran.content(code.replace(**{field: getattr(code, field) + 1})) != ran.content(code)


def test_content_reads_every_nested_code_however_many():
    body = "".join(f"    def f{i}():\n        return {i}\n" for i in range(300))
    src = "def test_big():\n" + body + "    pass\n"
    whole = ran.content(code_of(src))
    for i in (0, 150, 299):
        assert ran.content(code_of(src.replace(f"return {i}\n", f"return {i + 1000}\n"))) != whole, i


def test_content_of_a_set_constant_does_not_follow_the_process_s_hashes():
    root = str(Path(__file__).resolve().parents[2])
    prog = (f"import sys; sys.path.insert(0, {root!r})\nfrom autod.checks import judge_ran as r\n"
            "c = compile('def t(x):\\n    return x in {\"alpha\", \"beta\", \"gamma\", \"delta\"}\\n',"
            " 't.py', 'exec')\nprint(r.content(c))\n")
    outs = {subprocess.run([sys.executable, "-c", prog], env={**os.environ, "PYTHONHASHSEED": str(seed)},
                           capture_output=True, text=True, check=True).stdout for seed in range(6)}
    assert len(outs) == 1


def test_a_constant_is_told_by_type_and_value_and_anything_else_by_type_alone():
    values = [1, True, 1.0, "1", b"1", None, ..., 1j, (1,), (1, (2, "x")), frozenset({1}), -1, 0, False, ""]
    texts = [ran.constant(v) for v in values]
    assert len(set(texts)) == len(texts)
    assert ran.constant(frozenset({"b", "a", "c"})) == ran.constant(frozenset(["c", "a", "b"]))
    assert ran.constant([1, 2]) == ran.constant([3]) == "<list>"
    assert ran.constant(SimpleNamespace(x=1)) == ran.constant(SimpleNamespace(x=2))


def test_literals_are_the_names_a_test_file_binds_once_to_a_literal(tmp_path):
    f = tmp_path / "test_lit.py"
    f.write_text("import os\nEXPECTED = 5\nNEG = -2.5\nCASES = ((2, 3, 5), ('a', b'b'))\nANN: int = 7\n"
                 "TWICE = 1\nTWICE = 2\nCALL = len('abc')\nLIST = [1, 2]\nA = B = 'same'\n"
                 "NOT = -'x' if 0 else 1\n"
                 "DECL: int\nNEG_STR = -(1)\nx, y = 1, 2\n\n\ndef test_x():\n    LOCAL = 3\n")
    got = ran.literals(str(f))
    assert got == {"EXPECTED": "int:5;", "NEG": "float:-2.5;", "ANN": "int:7;", "A": "str:'same';",
                   "NEG_STR": "int:-1;",
                   "B": "str:'same';", "CASES": "((int:2;int:3;int:5;)(str:'a';bytes:b'b';))"}
    f.write_text("EXPECTED = 6\n")
    assert ran.literals(str(f)) is got  # read once a run: the file is a protected one
    assert ran.literals(str(tmp_path / "missing.py")) == {}
    (tmp_path / "bad.py").write_text("EXPECTED = (\n")
    assert ran.literals(str(tmp_path / "bad.py")) == {}
    (tmp_path / "neg.py").write_text("A = -1\nB = -'s'\nC = (1, -2)\nD = (1, [2])\nE = +1\nF = not 1\n")
    assert ran.literals(str(tmp_path / "neg.py")) == {"A": "int:-1;", "C": "(int:1;int:-2;)"}


def test_bound_names_every_rebinding_addition_and_deletion_since_collection():
    ns = {"a": [1], "b": "x", "c": object(), "d": None}
    ran.keep_bindings(ns)
    assert ran.bound(ns) == []
    ran.keep_bindings(ns)  # kept once: a second look keeps the first
    ns["a"] = [1]  # an equal value, another object
    ns["new"] = 1
    del ns["d"]
    ns["b"] = "x"  # the same interned object: no change
    assert ran.bound(ns) == ["a", "d", "new"]
    assert ran.bound({"a": 1}) == [] and ran.bound(dict(ns)) == []
    ran.keep_bindings(None)
    ran.keep_bindings([("a", 1)])

    class Key(str):
        pass

    odd = {Key("k"): 1, "j": 2}
    ran.keep_bindings(odd)
    odd["j"] = 3
    assert ran.bound(odd) == []  # not kept: `ran` names such a namespace unreadable instead
    other = {"z": 1}
    ran._BOUND[id(other)] = ({}, {"z": 2})  # a namespace whose id was kept for another: not this one's
    assert ran.bound(other) == []


def test_unwrapped_follows_wrapped_functions_innermost_last():
    def inner():
        pass

    @functools.wraps(inner)
    def middle():
        return inner()

    @functools.wraps(middle)
    def outer():
        return middle()

    assert ran.unwrapped(outer) == [middle, inner] and ran.unwrapped(inner) == []

    class Holder:
        def meth(self):
            pass

    def by_method():
        pass

    by_method.__wrapped__ = Holder().meth
    assert ran.unwrapped(by_method) == [Holder.meth]
    odd = functools.wraps(len)(lambda: None)
    assert ran.unwrapped(odd) == [] and ran.unwrapped(len) == [] and ran.unwrapped(None) == []
    loop = lambda: None  # noqa: E731
    loop.__wrapped__ = loop
    assert ran.unwrapped(loop) == [loop] * 10 and len(ran.unwrapped(loop, depth=3)) == 3


def _heard(fn, funcargs, call):
    prev = sys.getprofile()
    watched = ran.witness(fn, funcargs)
    with contextlib.suppress(Exception):
        call()
    result = ran.heard(watched)
    assert sys.getprofile() is prev
    return result


def test_the_witness_hears_the_test_return_with_its_own_arguments_and_nothing_else():
    fixture, other = ["fixture value"], ["fixture value"]

    def test_x(value, n=0):
        assert value == ["fixture value"]

    def test_fails(value):
        assert value == []

    def elsewhere(value):
        return None

    args = {"value": fixture, "unused": 1}
    assert _heard(test_x, args, lambda: test_x(fixture)) is True
    assert _heard(test_x, args, lambda: test_x(value=fixture, n=3)) is True
    assert _heard(test_x, args, lambda: None) is False  # never called
    assert _heard(test_x, args, lambda: elsewhere(fixture)) is False  # something else called
    assert _heard(test_x, args, lambda: test_x(other)) is False  # equal arguments, not the item's
    assert _heard(test_fails, args, lambda: test_fails(fixture)) is False  # it raised

    def swallowed():
        with contextlib.suppress(AssertionError):
            test_fails(fixture)

    assert _heard(test_fails, args, swallowed) is False
    assert _heard(test_fails, args, lambda: (test_fails([]), test_fails(fixture))) is False
    assert _heard(test_x, {}, lambda: test_x(other)) is True  # no arguments known: any call counts

    def test_rebinds(value):
        value = None  # the arguments are the item's as the call begins, whatever the body does after
        return value

    assert _heard(test_rebinds, args, lambda: test_rebinds(fixture)) is True

    def test_kw(*, value):
        return None

    assert _heard(test_kw, args, lambda: test_kw(value=fixture)) is True
    assert _heard(test_kw, args, lambda: test_kw(value=other)) is False
    assert ran.witness(len, {}) is None and ran.heard(None) is True


def test_the_witness_hears_a_wrapped_test_only_when_its_innermost_function_returns_too():
    fixture = object()

    def inner(value):
        return None

    @functools.wraps(inner)
    def calls(value):
        return inner(value)

    @functools.wraps(inner)
    def skips(value):
        return None

    @functools.wraps(inner)
    def swallows(value):
        with contextlib.suppress(ValueError):
            raise_in(value)

    def raise_in(value):
        raise ValueError

    assert _heard(calls, {"value": fixture}, lambda: calls(fixture)) is True
    assert _heard(skips, {"value": fixture}, lambda: skips(fixture)) is False
    assert _heard(swallows, {"value": fixture}, lambda: swallows(fixture)) is False


def test_the_witness_hears_an_async_test_return():
    async def test_async():
        await asyncio.sleep(0)
        return None

    async def test_async_fails():
        await asyncio.sleep(0)
        raise AssertionError

    assert _heard(test_async, {}, lambda: asyncio.run(test_async())) is True
    assert _heard(test_async_fails, {}, lambda: asyncio.run(test_async_fails())) is False


def test_what_the_profiler_holds_decides_nothing():
    """Code that reaches the witness's profiler (`sys.getprofile()`) and calls it with frames of its own
    choosing, or with objects posing as frames, is not heard: only a frame of the test's code that
    returned counts."""
    def test_x():
        raise AssertionError

    def fake_return():
        return sys._getframe()

    watched = ran.witness(test_x, {})
    try:
        hear = sys.getprofile()
        posing = SimpleNamespace(f_code=test_x.__code__, f_lasti=0, f_locals={})
        hear(posing, "call", None)
        hear(posing, "return", None)
        frame = fake_return()
        hear(frame, "call", None)
        hear(frame, "return", None)
        with pytest.raises(AssertionError):
            test_x()
    finally:
        assert ran.heard(watched) is False


def test_what_is_put_in_the_witness_s_own_lists_decides_nothing():
    """Code that reaches into the profiler's closure and appends to the frames it kept is not heard
    either: what counts is decided from each frame kept, against the code its caller kept."""
    def test_x():
        raise AssertionError

    def other():
        return sys._getframe()

    def test_wrapped():
        return None

    try:
        test_x()
    except AssertionError as e:
        raised = e.__traceback__.tb_next.tb_frame
    posing = SimpleNamespace(f_code=test_x.__code__, f_lasti=0)
    for planted in (posing, other(), raised):
        watched = ran.witness(test_x, {})
        lists = [c.cell_contents for c in sys.getprofile().__closure__ if type(c.cell_contents) is list]
        for kept in lists:
            kept.append(planted)
        assert ran.heard(watched) is False, planted

    inner = functools.wraps(test_wrapped)(lambda: None)
    wrapper = functools.wraps(inner)(test_wrapped)  # its __wrapped__: `inner`, never called
    for planted in (posing, other(), raised):
        watched = ran.witness(wrapper, {})
        lists = [c.cell_contents for c in sys.getprofile().__closure__ if type(c.cell_contents) is list]
        wrapper()
        for kept in lists:
            kept.append(planted)
        assert ran.heard(watched) is False, planted


def test_the_witness_stops_hearing_once_it_heard_and_puts_back_the_profiler_there_was():
    calls = []

    def earlier(frame, event, arg):
        calls.append(event)

    def test_x():
        return None

    sys.setprofile(earlier)
    try:
        watched = ran.witness(test_x, {})
        assert sys.getprofile() is not earlier
        test_x()
        assert sys.getprofile() is earlier  # heard: the one there was, back at once
        assert ran.heard(watched) is True and sys.getprofile() is earlier
    finally:
        sys.setprofile(None)


def test_the_test_s_own_body_runs_with_the_profiler_there_was_and_may_set_its_own():
    seen = []

    def earlier(frame, event, arg):
        seen.append(frame.f_code.co_name)

    def helper():
        return None

    def test_profiles():
        assert sys.getprofile() is earlier
        helper()
        sys.setprofile(None)  # a test of a profiler, or one that turns profiling off
        helper()

    sys.setprofile(earlier)
    try:
        watched = ran.witness(test_profiles, {})
        test_profiles()
        assert ran.heard(watched) is True and "helper" in seen
    finally:
        sys.setprofile(None)


def test_a_witness_the_process_refuses_hears_nothing(monkeypatch):
    def refuse(fn):
        raise PermissionError("autod: refused")

    monkeypatch.setattr(ran, "_setprofile", refuse)

    def test_x():
        return None

    assert ran.witness(test_x, {}) is None


def test_returned_reads_only_real_frames():
    assert ran._returned(SimpleNamespace(f_code=code_of(TESTS[0]), f_lasti=0)) is False

    def gen():
        yield sys._getframe()

    g = gen()
    frame = next(g)
    assert ran._returned(frame) is False  # stopped at its yield
    with pytest.raises(StopIteration):
        next(g)
    assert ran._returned(frame) is True


def test_rewritten_bytecode_of_the_workspace_is_neither_read_nor_written(tmp_path, monkeypatch):
    calls = []
    rewrite = SimpleNamespace(_read_pyc=lambda *a, **k: calls.append(("read", a)) or "code",
                              _write_pyc=lambda *a, **k: calls.append(("write", a)) or True)
    monkeypatch.setitem(sys.modules, "_pytest.assertion.rewrite", rewrite)
    ws = tmp_path / "ws"
    (ws / "tests").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(ws)
    ran.no_rewritten_bytecode(False, os.path.join(str(ws), ""))
    assert rewrite._read_pyc(str(ws / "tests" / "t.py"), "y") == "code"  # not the first recorder: left alone
    ran.no_rewritten_bytecode(True, os.path.join(str(ws), ""))
    inside, outside = str(ws / "tests" / "test_a.py"), str(tmp_path / "site" / "t.py")
    assert rewrite._read_pyc(inside, "p") is None
    assert rewrite._read_pyc(str(link / "tests" / "t.py"), "p") is None
    assert rewrite._write_pyc("s", "co", "h", inside + "c") is False
    assert rewrite._write_pyc("s", "co", "h", str(link / "t.pyc")) is False
    calls.clear()
    assert rewrite._read_pyc(outside, "p") == "code" and rewrite._write_pyc("s", "co", "h", outside + "c")
    assert [c[0] for c in calls] == ["read", "write"]
    before = rewrite._read_pyc
    ran.no_rewritten_bytecode(True, "")
    monkeypatch.setitem(sys.modules, "_pytest.assertion.rewrite", SimpleNamespace())
    ran.no_rewritten_bytecode(True, os.path.join(str(ws), ""))
    assert rewrite._read_pyc is before


# -- what `ran` carries of it (autod.checks.judge_path) ------------------------------------------------


def test_judging_files_are_the_workspace_s_test_files_by_pytest_s_naming(tmp_path, monkeypatch):
    monkeypatch.setattr(path, "_WS", str(tmp_path))
    ws = str(tmp_path)
    yes = ["tests/helpers.py", "test_a.py", "pkg/a_test.py", "conftest.py", "src/conftest.py",
           "test/x.py", "testing/util.py", "a/tests/b/c.py"]
    no = ["src/calc.py", "pkg/testsuite.py", "tests.py", "pkg/contest.py", "a_tests.py"]
    for rel in yes:
        assert path._judging(os.path.join(ws, rel)), rel
    for rel in no:
        assert not path._judging(os.path.join(ws, rel)), rel
    assert not path._judging("/elsewhere/tests/test_a.py") and not path._judging(None)
    assert not path._judging(ws + "x/tests/test_a.py")  # a sibling directory that starts alike
    monkeypatch.setattr(path, "_WS", "")
    assert not path._judging(os.path.join(ws, "tests/test_a.py"))


def _test_module(tmp_path: Path, src: str, extra: dict | None = None) -> dict:
    f = tmp_path / "tests" / "test_calc.py"
    f.parent.mkdir(exist_ok=True)
    f.write_text(src)
    g: dict = {"__name__": "test_calc", **(extra or {})}
    exec(compile(src, str(f), "exec"), g)
    return g


def test_ran_carries_the_test_s_code_by_content_its_literals_by_value_and_its_module_s_rebindings(
        tmp_path, monkeypatch):
    monkeypatch.setattr(path, "_WS", str(tmp_path))
    monkeypatch.setattr(ran, "_LITERALS", {})
    src = ("EXPECTED = 5\nLIMIT = 9\n\n\ndef helper():\n    return 1\n\n\n"
           "def test_add():\n    assert add(2, 3) == EXPECTED and helper() == 1 and LIMIT and other\n")
    add = lambda a, b: a - b  # noqa: E731
    g = _test_module(tmp_path, src, {"add": add, "other": 10 ** 20})
    ran.keep_bindings(g)
    base = path.ran(SimpleNamespace(obj=g["test_add"]))
    again = _test_module(tmp_path, src, {"add": add, "other": 3})
    assert base == path.ran(SimpleNamespace(obj=again["test_add"]))
    changed = []
    fn = g["test_add"]
    code = fn.__code__
    fn.__code__ = code.replace(co_consts=tuple(4 if c == 3 else c for c in code.co_consts))
    changed.append(path.ran(SimpleNamespace(obj=fn)))
    fn.__code__ = code
    g["EXPECTED"] = -1  # a literal rebound, as collection ended
    changed.append(path.ran(SimpleNamespace(obj=fn)))
    g["EXPECTED"] = 5
    g["other"] = int(str(10 ** 20))  # an equal value, another object: rebound since collection
    changed.append(path.ran(SimpleNamespace(obj=fn)))
    g2 = _test_module(tmp_path, src, {"add": add, "other": 3})
    helper = g2["helper"]
    helper.__code__ = helper.__code__.replace(co_consts=tuple(2 if c == 1 else c
                                                              for c in helper.__code__.co_consts))
    changed.append(path.ran(SimpleNamespace(obj=g2["test_add"])))
    g3 = _test_module(tmp_path, src, {"add": add, "other": 4})  # not a literal of the file: by type
    assert path.ran(SimpleNamespace(obj=g3["test_add"])) == base
    g4 = _test_module(tmp_path, src, {"add": lambda a, b: a + b, "other": 3})  # the code under test's
    assert path.ran(SimpleNamespace(obj=g4["test_add"])) == base
    g5 = _test_module(tmp_path, src, {"add": add, "other": 3})
    g5["LIMIT"] = 10  # a literal of the file with another value, however it got there
    changed.append(path.ran(SimpleNamespace(obj=g5["test_add"])))
    assert len(set(changed)) == len(changed) and base not in changed


def test_ran_carries_a_test_s_default_arguments(tmp_path, monkeypatch):
    monkeypatch.setattr(path, "_WS", str(tmp_path))
    monkeypatch.setattr(ran, "_LITERALS", {})
    g = _test_module(tmp_path, "def test_d(x=5, *, y=(1, 'a')):\n    assert x == 5 and y\n")
    fn = g["test_d"]
    base = path.ran(SimpleNamespace(obj=fn))
    seen = {base}
    for defaults, kw in (((-1,), {"y": (1, "a")}), ((5,), {"y": (1, "b")}), ((5,), None),
                         (None, {"y": (1, "a")})):
        fn.__defaults__, fn.__kwdefaults__ = defaults, kw
        digest = path.ran(SimpleNamespace(obj=fn))
        assert digest not in seen, (defaults, kw)
        seen.add(digest)
    fn.__defaults__, fn.__kwdefaults__ = (5,), {"y": (1, "a")}
    assert path.ran(SimpleNamespace(obj=fn)) == base

    class Key(str):
        def __lt__(self, other):
            raise AssertionError("a key's own code ran")

    fn.__kwdefaults__ = {Key("y"): (1, "a"), "z": 1}
    assert path.ran(SimpleNamespace(obj=fn)) not in seen


def test_ran_names_what_a_wrapped_test_wraps_and_the_fixtures_it_requests(tmp_path, monkeypatch):
    monkeypatch.setattr(path, "_WS", str(tmp_path))
    monkeypatch.setattr(ran, "_LITERALS", {})
    src = ("import functools\n\n\ndef deco(f):\n    @functools.wraps(f)\n    def w(*a):\n"
           "        return f(*a)\n    return w\n\n\n@deco\ndef test_w():\n    x = 1\n    assert x\n\n\n"
           "def value():\n    return 5\n")
    g = _test_module(tmp_path, src)
    item = SimpleNamespace(obj=g["test_w"],
                           _fixtureinfo=SimpleNamespace(name2fixturedefs={"value": (SimpleNamespace(func=len),
                                                                                   SimpleNamespace(func=g["value"]))}))
    base = path.ran(item)
    inner = g["test_w"].__wrapped__
    inner.__code__ = inner.__code__.replace(co_consts=tuple(0 if c == 1 else c
                                                            for c in inner.__code__.co_consts))
    assert path.ran(item) != base
    g = _test_module(tmp_path, src)
    item.obj = g["test_w"]
    item._fixtureinfo.name2fixturedefs["value"] = (SimpleNamespace(func=g["value"]),)
    assert path.ran(item) == base  # the same text compiled again: what it ran is the same
    value = g["value"]
    value.__code__ = value.__code__.replace(co_consts=(None, 6))
    assert path.ran(item) != base  # a fixture's content changed
    for info in (None, SimpleNamespace(name2fixturedefs=None), SimpleNamespace(name2fixturedefs={1: ()})):
        assert path._fixtures(SimpleNamespace(_fixtureinfo=info)) == []
    assert path._fixtures(SimpleNamespace(_fixtureinfo=SimpleNamespace(name2fixturedefs={"a": None}))) == []


def test_generated_rebindings_of_a_test_module_change_what_its_tests_ran(tmp_path, monkeypatch):
    """Every name of a generated test module, rebound after collection to a random stand-in, changes the
    digest of a test that reads it; leaving the others alone does not."""
    monkeypatch.setattr(path, "_WS", str(tmp_path))
    rng = random.Random(7)
    names = [f"N{i}" for i in range(12)]
    src = "".join(f"{n} = {rng.choice([1, 'x', (1, 2), None, 2.5])!r}\n" for n in names)
    src += "\n\ndef test_all():\n    assert [" + ", ".join(names) + "]\n"
    for name in names:
        monkeypatch.setattr(ran, "_LITERALS", {})
        g = _test_module(tmp_path, src)
        ran.keep_bindings(g)
        item = SimpleNamespace(obj=g["test_all"])
        base = path.ran(item)
        g[name] = rng.choice([object(), [1], "y", 3, json])
        assert path.ran(item) != base, name
