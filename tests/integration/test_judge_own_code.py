"""A test is heard passing only when its own code ran, as the run before compiled it, to a return
(autod.checks.judge_ran), with real pytest runs under real bubblewrap and the reach guard on.

Each attack is plain Python in the code under test, the bug still in it and the AST tripwire silent, in a
project whose conftest imports the code under test (the usual shape): the test's code rewritten as pytest
compiles or imports it, a constant of it swapped from a thread the call is laundered through, a literal
of its module rebound, and the function pytest calls for the test swapped for one call from any Python
function pytest calls on the way. Before the content digest, the literals and the witness, each was judged
`fixed` (the window swaps and the plugin tricks with or without the run before). The window's functions are
generated: a probe run lists every Python function called between the recorder's look and the test's
own code, and a spy on each one that can be reached by name swaps the test's function for that call.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest
from test_judge_hostile import CHECK, FAILING, calc_repo_with, calc_workspace, check

from autod.act.reach import introduced
from autod.checks.outcome import Before, decide
from autod.checks.pertest import CANDIDATE_FILES
from autod.checks.run import CheckResult, run_check
from autod.checks.sandbox import probe
from autod.verdict import Status

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not probe().works, reason="needs a working bubblewrap"),
]

BUGGY = "\n\ndef add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
SRC_PATH = ("import sys, pathlib\n"
            "sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / 'src'))\n")
CONFTEST = SRC_PATH + "import calc  # noqa\n"
TEST_LITERAL = (SRC_PATH + "from calc import add, mul\n\nEXPECTED = 5\n\n\n"
                "def test_add():\n    assert add(2, 3) == EXPECTED\n\n\n"
                "def test_mul():\n    assert mul(2, 3) == 6\n")

# the window: called by pytest between the recorder's look and the test's own code
FIND_ITEM = '''
_frame = getattr(os.sys, '_get' + 'frame')


def _swap_for_one_call(now=None):
    if not str(now or os.environ.get('PY' + 'TEST_CURRENT_TEST', '')).endswith('test_add (call)'):
        return
    f = _frame(1)
    while f is not None:
        item = getattr(f, 'f_lo' + 'cals').get('item') or getattr(f, 'f_lo' + 'cals').get('pyfuncitem')
        if getattr(item, 'name', None) == 'test_add' and not getattr(item, '_autod_done', False):
            real = item.obj
            item._autod_done = True

            def _pass(*args, **kwargs):
                item._obj = real
            item._obj = _pass
            return
        f = getattr(f, 'f_ba' + 'ck')
'''
SPY = '''import os
''' + FIND_ITEM + '''

_path = [p[::-1] for p in {path!r}]  # spelt backwards: a plugin's hook is named after the runner
_owner = os.sys.modules[{module!r}[::-1]]  # loaded by the runner before any test
for _part in _path[:-1]:
    _owner = getattr(_owner, _part)
_real = getattr(_owner, _path[-1])


def _spy(*args, **kwargs):
    _swap_for_one_call()
    return _real(*args, **kwargs)


setattr(_owner, _path[-1], _spy)
''' + BUGGY
ENCODER = '''import os
''' + FIND_ITEM + '''
_env = os.environ
_encode = _env.encodevalue


def _spy(value):
    _swap_for_one_call(value)  # what the runner is setting the variable to
    return _encode(value)


_env.encodevalue = _spy
''' + BUGGY
PLUGINS = '''import os

_env = os.environ
_encode = _env.encodevalue


def _spy(value):
    if type(value) is str and value.endswith('test_add (setup)'):
        pm = getattr(os.sys.modules['_py' + 'test.debugging'].pytestPDB._config, 'plugin' + 'manager')
        {what}
    return _encode(value)


_env.encodevalue = _spy
''' + BUGGY
# the test's code, rewritten as pytest reads, parses or imports it
AST_PARSE = '''import ast

_parse = ast.parse


class _Same(ast.NodeTransformer):
    def visit_Assert(self, node):
        t = node.test
        if type(t) is ast.Compare and len(t.ops) == 1 and type(t.ops[0]) is ast.Eq:
            t.comparators = [ast.parse(ast.unparse(t.left), mode='eval').body]
        return node


def _parse_tests(source, filename='<unknown>', *args, **kwargs):
    tree = _parse(source, filename, *args, **kwargs)
    if str(filename).endswith('test_calc.py'):
        tree = ast.fix_missing_locations(_Same().visit(tree))
    return tree


ast.parse = _parse_tests
''' + BUGGY
READ_BYTES = '''import pathlib

_read = pathlib.Path.read_bytes


def _read_tests(self):
    data = _read(self)
    return data.replace(b'== 5', b'== add(2, 3)') if self.name == 'test_calc.py' else data


pathlib.Path.read_bytes = _read_tests
''' + BUGGY
FINDER = '''import ast
import importlib.util
import os
import types

_compile = getattr(os.sys.modules['built' + 'ins'], 'comp' + 'ile')
_HERE = os.path.dirname(os.path.realpath(__file__))
_TEST = os.path.realpath(os.path.join(_HERE, '..', 'tests', 'test_calc.py'))


class _Loader:
    def create_module(self, spec):
        return None

    def exec_module(self, module):
        with open(_TEST, 'rb') as f:
            source = f.read().replace(b'== 5', b'== add(2, 3)')
        tree = ast.parse(source, filename=_TEST)
        os.sys.modules['_py' + 'test.assertion.rewrite'].rewrite_asserts(tree, source, _TEST, None)
        types.FunctionType(_compile(tree, _TEST, 'exec', dont_inherit=True), module.__dict__)()


class _Finder:
    def find_spec(self, name, path=None, target=None):
        if name == 'test_calc':
            return importlib.util.spec_from_file_location(name, _TEST, loader=_Loader())
        return None


{install}
''' + BUGGY
POOL_SWAP = '''import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

_pool = ThreadPoolExecutor(1)


def _watch():
    for _ in range(20000):
        test = os.sys.modules.get('test_calc')
        fn = vars(test).get('test_add') if test is not None else None
        if fn is not None:
            code = fn.__code__
            consts = tuple(-1 if type(c) is int and c == 5 else c for c in code.co_consts)
            new = _pool.submit(code.replace, co_consts=consts).result()
            _pool.submit(setattr, fn, '__co' + 'de__', new).result()
            return
        time.sleep(0.0005)


threading.Thread(target=_watch, daemon=True).start()
''' + BUGGY
REBIND = '''import os
import threading
import time


def _watch():
    for _ in range(20000):
        test = os.sys.modules.get('test_calc')
        if test is not None and 'EXPECTED' in vars(test):
            test.EXPECTED = -1
            return
        time.sleep(0.0005)


threading.Thread(target=_watch, daemon=True).start()
''' + BUGGY

CTYPES_BORROWED = '''import os
import types

_compile = getattr(os.sys.modules['built' + 'ins'], 'comp' + 'ile')
_SRC = """
import ctypes
def swap(fn):
    consts = fn.__code__.co_consts
    for i, c in enumerate(consts):
        if type(c) is int and c == 5:
            ctypes.c_void_p.from_address(id(consts) + 24 + 8 * i).value = id(-1)
"""
_ns = {}
_BORROWED = os.path.join(os.path.dirname(os.__file__), '_struct_helpers.py')
types.FunctionType(_compile(_SRC, _BORROWED, 'exec'), _ns)()


def _late(name):
    test = vars(os.sys.modules['test_calc'])
    if 'test_add' in test and not test.get('_done'):
        test['_done'] = True
        _ns['swap'](test['test_add'])
    raise AttributeError(name)


_t = os.sys.modules.get('test_calc')
if _t is not None:
    vars(_t)['__getattr__'] = _late
''' + BUGGY

ATTACKS = {
    "ctypes from code compiled under a standard library file name": (CONFTEST, CTYPES_BORROWED),
    "the test's function swapped for one call from os.environ's encoder": (CONFTEST, ENCODER),
    "the python plugin unregistered at the test's setup": (
        CONFTEST, PLUGINS.format(what="pm.unregister(pm.get_plugin('python'))")),
    "the python plugin made a conftest plugin for the test": (
        CONFTEST, PLUGINS.format(what="pm._conftest_plugins.add(pm.get_plugin('python'))")),
    "ast.parse rewrites the test's assertion": (CONFTEST, AST_PARSE),
    "Path.read_bytes rewrites the test's source": (CONFTEST, READ_BYTES),
    "an import finder compiles a changed test module": (CONFTEST, FINDER.format(
        install="os.sys.meta_path.insert(0, _Finder())")),
    "the tests directory's path importer cache entry": (CONFTEST, FINDER.format(
        install="os.sys.path_importer_cache[os.path.dirname(_TEST)] = _Finder()")),
    "the test's constants swapped from a pool thread": (None, POOL_SWAP),
}
# also without the run before: the witness hears what the test did in this run alone
WITHOUT_BEFORE = {"the test's function swapped for one call from os.environ's encoder",
                  "the python plugin unregistered at the test's setup",
                  "the python plugin made a conftest plugin for the test"}

# every Python function a test's call runs before the test's own code, by module and qualified name
WINDOW_PROBE = '''import sys
import pytest


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_call(item):
    target, seen = item.obj.__code__, []

    def prof(frame, event, arg):
        if event == "call" and frame.f_code is target:
            sys.setprofile(None)
        elif event == "call":
            seen.append(frame.f_globals.get("__name__", "") + " " + frame.f_code.co_qualname)

    sys.setprofile(prof)
    yield
    sys.setprofile(None)
    open("window.txt", "w").write("\\n".join(dict.fromkeys(seen)))
'''


def candidate_check(repo: Path) -> CheckResult:
    token = CANDIDATE_FILES.set(("src/calc.py",))
    try:
        return asyncio.run(run_check("tests", CHECK, repo))
    finally:
        CANDIDATE_FILES.reset(token)


def judged(repo: Path, base: CheckResult, code: str) -> tuple[Status, Status, CheckResult]:
    """The candidate `code` (the bug still in it, nothing the tripwire names) as `src/calc.py`, judged
    with and without the run before; the buggy module put back."""
    assert "return a - b" in code and introduced(BUGGY, code, world=False) == [], code[:300]
    calc = repo / "src" / "calc.py"
    was = calc.read_text()
    calc.write_text(code)
    try:
        after = candidate_check(repo)
    finally:
        calc.write_text(was)
    with_before = decide([after], Before(1, FAILING, {"tests": base})).status
    without = decide([after], Before(1, FAILING, {})).status
    return with_before, without, after


@pytest.fixture(scope="module")
def shaped(tmp_path_factory: pytest.TempPathFactory) -> dict[str | None, tuple[Path, CheckResult]]:
    """The calc project as is, and with a conftest that imports the code under test; each with its
    check's run before."""
    return {None: calc_workspace(tmp_path_factory, "plain"),
            CONFTEST: calc_repo_with(tmp_path_factory.mktemp("conftest"), {"tests/conftest.py": CONFTEST},
                                     "conftest imports calc")}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_a_test_whose_own_code_did_not_run_as_compiled_to_a_return_is_never_fixed(shaped, name):
    shape, code = ATTACKS[name]
    repo, base = shaped[shape]
    with_before, without, after = judged(repo, base, code)
    assert with_before is Status.ROLLED_BACK, (name, after.output[-2000:])
    if name in WITHOUT_BEFORE:
        assert without is Status.ROLLED_BACK, (name, after.output[-2000:])


def test_a_literal_of_the_test_module_rebound_is_never_fixed(tmp_path):
    repo, base = calc_repo_with(tmp_path, {"tests/test_calc.py": TEST_LITERAL}, "a literal expected")
    with_before, _, after = judged(repo, base, REBIND)
    assert with_before is Status.ROLLED_BACK, after.output[-2000:]


@pytest.fixture(scope="module")
def window(shaped) -> list[tuple[str, tuple[str, ...]]]:
    """Every Python function a real test's call runs before the test's own code that can be reached by
    name from its module (a function, or a class's function), outside pytest and pluggy."""
    repo, _ = shaped[None]
    (repo / "tests" / "conftest.py").write_text(WINDOW_PROBE)
    try:
        run = check(repo)
    finally:
        (repo / "tests" / "conftest.py").unlink()
    lines = (repo / "window.txt").read_text().split("\n")
    (repo / "window.txt").unlink()
    assert run.tests is not None and lines, run.output[-2000:]
    out = []
    for line in lines:
        module, _, qual = line.partition(" ")
        if module.split(".")[0] in ("pytest", "_pytest", "pluggy", "conftest") or module.startswith("autod_"):
            continue
        if "<" in qual or not module or module == "__main__":
            continue  # a nested function or a lambda: not reachable by name
        out.append((module, tuple(qual.split("."))))
    assert len(out) >= 5, lines
    return out


@pytest.mark.parametrize("seed", range(2))
def test_a_spy_on_any_function_pytest_calls_on_the_way_never_makes_a_test_fixed(shaped, window, seed):
    repo, base = shaped[CONFTEST]
    for module, path in random.Random(seed).sample(window, min(4, len(window))):
        code = SPY.format(module=module[::-1], path=[p[::-1] for p in path])
        with_before, without, after = judged(repo, base, code)
        assert with_before is not Status.FIXED and without is not Status.FIXED, (module, path,
                                                                                 after.output[-2000:])


def test_a_real_fix_beside_a_spy_that_swaps_nothing_is_fixed(shaped):
    """The positive control: the witness hears a test that ran, the content and literals are the run
    before's, so a real fix is fixed, with a spy on pytest's way that calls through."""
    repo, base = shaped[CONFTEST]
    fixed = SPY.format(module="tcepsni", path=["noitcnufsi"]).replace("return a - b", "return a + b")
    calc = repo / "src" / "calc.py"
    was = calc.read_text()
    calc.write_text(fixed.replace("_swap_for_one_call()\n    return _real", "return _real"))
    try:
        after = candidate_check(repo)
    finally:
        calc.write_text(was)
    assert decide([after], Before(1, FAILING, {"tests": base})).status is Status.FIXED, after.output[-2000:]
