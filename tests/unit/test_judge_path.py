"""Naming what stands on a test's way to its verdict (autod.checks.judge_path): a hook implementation by
its code's place, whatever object stands in for a function; foreign when it is a candidate's."""

from __future__ import annotations

import functools
import json
import os
import random
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from autod.checks import judge_path as path

SOURCE = ("def hook(item):\n    return True\n\n\n"
          "class Plug:\n    def pytest_runtest_call(self, item):\n        pass\n")


@pytest.fixture
def candidate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """A workspace with the candidate's file `src/calc.py` compiled in it, and an unchanged `src/other.py`."""
    (tmp_path / "src").mkdir()
    names: dict = {}
    for rel in ("src/calc.py", "src/other.py"):
        (tmp_path / rel).write_text(SOURCE)
        ns: dict = {}
        exec(compile(SOURCE, str(tmp_path / rel), "exec"), ns)
        names[rel] = ns
    monkeypatch.setattr(path, "_WS", str(tmp_path))
    monkeypatch.setattr(path, "_CHANGED", path.changed_files(json.dumps(["src/calc.py"]), str(tmp_path)))
    return names


def test_a_function_is_named_by_its_code_s_place_and_a_candidate_s_is_foreign(candidate):
    assert path.name_of(candidate["src/calc.py"]["hook"]) == ("hook (src/calc.py:1)", True)
    assert path.name_of(candidate["src/other.py"]["hook"]) == ("hook (src/other.py:1)", False)
    method = candidate["src/calc.py"]["Plug"]().pytest_runtest_call
    assert path.name_of(method) == ("Plug.pytest_runtest_call (src/calc.py:6)", True)
    assert path.name_of(os.path.join)[0].startswith("join (") and not path.name_of(os.path.join)[1]


def test_what_is_no_function_is_named_by_its_type_and_is_foreign_only_while_a_candidate_is_judged(
        candidate, monkeypatch):
    for thing in (functools.partial(print), len, SimpleNamespace(), object()):
        label, foreign = path.name_of(thing)
        assert label.startswith("a ") and foreign, (thing, label)
    monkeypatch.setattr(path, "_CHANGED", frozenset())
    assert not path.name_of(functools.partial(print))[1]


def test_a_name_does_not_depend_on_what_a_function_says_of_itself(candidate):
    fn = candidate["src/calc.py"]["hook"]
    fn.__module__, fn.__name__ = "_pytest.runner", "pytest_runtest_call"
    assert path.name_of(fn) == ("hook (src/calc.py:1)", True)


def test_changed_files_reads_only_a_list_of_paths(tmp_path):
    assert path.changed_files(json.dumps(["a.py", 3, None]), str(tmp_path)) == {str(tmp_path / "a.py")}
    for text in ("", None, "{", json.dumps({"a.py": 1}), json.dumps("a.py")):
        assert path.changed_files(text, str(tmp_path)) == frozenset(), text
    assert path.changed_files(json.dumps(["a.py"]), "") == frozenset()


def test_every_implementation_of_a_hook_on_the_way_is_named_once(candidate):
    impls = {name: [] for name in path.HOOKS}

    class Caller:
        def __init__(self, name):
            self.name = name

        def get_hookimpls(self):
            return list(impls[self.name])

    manager = SimpleNamespace(hook=SimpleNamespace(**{n: Caller(n) for n in path.HOOKS}))
    named: dict = {}
    assert path.hooked(manager, named) == []
    impls["pytest_pyfunc_call"].append(SimpleNamespace(function=candidate["src/calc.py"]["hook"]))
    impls["pytest_runtest_call"].append(SimpleNamespace(function=candidate["src/other.py"]["hook"]))
    got = path.hooked(manager, named)
    assert sorted(got) == [("pytest_pyfunc_call runs hook (src/calc.py:1)", True),
                           ("pytest_runtest_call runs hook (src/other.py:1)", False)]
    assert path.hooked(manager, named) == []  # named already
    impls["pytest_runtest_call"][0].function = functools.partial(print)  # swapped in place
    assert path.hooked(manager, named) == [("pytest_runtest_call runs a functools.partial", True)]
    for name in path.HOOKS:  # every hook on the way is looked at
        impls[name].append(SimpleNamespace(function=candidate["src/calc.py"]["Plug"]().pytest_runtest_call))
    assert len(path.hooked(manager, named)) == len(path.HOOKS)
    del manager.hook.pytest_fixture_setup  # a hook this pytest does not have
    assert path.hooked(manager, {}) != []


def test_a_test_function_is_its_obj_or_a_bound_method_s_function(candidate):
    fn = candidate["src/calc.py"]["hook"]
    assert path.test_function(SimpleNamespace(obj=fn)) is fn
    plug = candidate["src/calc.py"]["Plug"]
    assert path.test_function(SimpleNamespace(obj=plug().pytest_runtest_call)) is plug.pytest_runtest_call
    assert path.test_function(SimpleNamespace()) is None


@pytest.mark.parametrize("error", [RuntimeError, KeyError, ValueError, TypeError, RecursionError])
def test_an_item_whose_obj_raises_runs_nothing_known_and_never_raises_out_of_the_recorder(error):
    """A plugin's item (or one a candidate reached) whose `obj` raises: no digest, which the verdict
    reads as "ran other code" when the run before had one (autod.checks.outcome); never an error out
    of the recorder's wrapper around pytest's hooks."""
    class Item:
        @property
        def obj(self):
            raise error("no obj")

    assert path.test_function(Item()) is None
    assert path.ran(Item()) is None


def test_places_are_workspace_relative_autod_s_own_by_name_and_a_link_is_seen_through(tmp_path, monkeypatch):
    real = tmp_path / "real"
    (real / "src").mkdir(parents=True)
    (real / "src" / "calc.py").write_text(SOURCE)
    (tmp_path / "ws").symlink_to(real)
    (tmp_path / "other").symlink_to(real)
    lib = tmp_path / "lib"
    lib.mkdir()

    def hook_in(filename: Path) -> object:
        ns: dict = {}
        exec(compile(SOURCE, str(filename), "exec"), ns)
        return ns["hook"]

    monkeypatch.setattr(path, "_LIB", os.path.join(str(lib), ""))
    ws = str(tmp_path / "ws")
    monkeypatch.setattr(path, "_WS", ws)
    monkeypatch.setattr(path, "_CHANGED", path.changed_files(json.dumps(["src/calc.py"]), ws))
    through = hook_in(tmp_path / "other" / "src" / "calc.py")  # the changed file by another link to it
    assert path.name_of(through) == (f"hook ({tmp_path / 'other' / 'src' / 'calc.py'}:1)", True)
    assert path.name_of(hook_in(lib / "autod_verdicts.py")) == ("hook (autod's autod_verdicts.py:1)", False)
    monkeypatch.setattr(path, "_WS", "")
    assert path.name_of(hook_in(tmp_path / "ws" / "src" / "calc.py"))[0] == \
        f"hook ({tmp_path / 'ws' / 'src' / 'calc.py'}:1)"


def test_a_look_is_never_mistaken_for_another_whose_table_took_a_freed_ones_place(candidate):
    """The ids a look is remembered by stay taken: a fresh table (which Python would gladly put where
    a freed one was) is always looked at anew."""
    impl = SimpleNamespace(function=candidate["src/calc.py"]["hook"])
    manager = SimpleNamespace(hook=SimpleNamespace(pytest_pyfunc_call=SimpleNamespace(
        get_hookimpls=lambda: [impl])))
    for _ in range(20):
        named: dict = {}
        assert path.hooked(manager, named) == [("pytest_pyfunc_call runs hook (src/calc.py:1)", True)]
        del named


def test_every_hook_is_each_hook_the_manager_knows_and_nothing_else():
    caller = SimpleNamespace(get_hookimpls=lambda: [])
    manager = SimpleNamespace(hook=SimpleNamespace(pytest_b=caller, pytest_a=caller, other=caller,
                                                   pytest_c=SimpleNamespace(), pytest_d=3))
    assert path.every_hook(manager) == ("pytest_a", "pytest_b")
    assert path.every_hook(SimpleNamespace()) == ()
    import pytest as real

    hooks = path.every_hook(real.Config.fromdictargs({}, []).pluginmanager)
    assert set(path.HOOKS) <= set(hooks) and "pytest_pycollect_makeitem" in hooks


def test_what_a_test_ran_follows_what_its_names_are_bound_to_not_a_fixed_body(tmp_path, monkeypatch):
    """A test module that reads `add` and `calc.mul`: its digest is the same when `add`'s body changes
    (a fix), and differs when `add`, `calc.mul` or the test function itself is bound to something
    else, however the stand-in names itself."""
    monkeypatch.setattr(path, "_WS", str(tmp_path))
    lib = tmp_path / "calc.py"

    def module(body: str, name: str):
        lib.write_text(body)
        ns: dict = {"__name__": name}
        exec(compile(body, str(lib), "exec"), ns)
        mod = type(os)(name)
        mod.__dict__.update(ns)
        return mod

    buggy = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
    test_src = "def test_add():\n    assert add(2, 3) == 5 and calc.mul(2, 3) == 6\n"

    def digest(calc, swap=None) -> str:
        g = {"add": calc.add, "calc": calc, "__name__": "test_calc"}
        exec(compile(test_src, str(tmp_path / "test_calc.py"), "exec"), g)
        if swap:
            swap(g, calc)
        return path.ran(SimpleNamespace(obj=g["test_add"]))

    calc = module(buggy, "calc")
    base = digest(calc)
    assert base == digest(module(buggy, "calc")) and len(base) == 16
    assert digest(module(buggy.replace("a - b", "a + b"), "calc")) == base  # the fix: same origins

    def right(a, b):
        return a + b

    def passes():
        pass

    passes.__name__ = passes.__qualname__ = "test_add"
    passes.__module__ = "test_calc"
    for swap in (lambda g, c: g.__setitem__("add", right), lambda g, c: setattr(c, "mul", right),
                 lambda g, c: g.__setitem__("add", functools.partial(right)),
                 lambda g, c: g.__setitem__("calc", type(os)("calc"))):
        assert digest(module(buggy, "calc"), swap) != base
    assert path.ran(SimpleNamespace(obj=passes)) != base
    assert path.ran(SimpleNamespace(obj=None)) is None and path.ran(SimpleNamespace()) is None


def test_an_origin_is_told_by_kind_and_place_never_by_what_a_thing_says_of_itself(tmp_path, monkeypatch):
    monkeypatch.setattr(path, "_WS", str(tmp_path))
    ns: dict = {}
    exec(compile("def f():\n    def g():\n        pass\n    return g\n", str(tmp_path / "m.py"), "exec"), ns)
    assert path._origin(ns["f"]) == "function m.py:f (a twin)"  # no module binds it
    assert path._origin(ns["f"]()) == "function m.py:f.<locals>.g"
    assert path._origin(os) == f"module os {os.__file__}"
    assert path._origin(type(os)("fake")) == "module fake None"
    assert path._origin(dict) == "class builtins.dict" and path._origin({}) == "a builtins.dict"

    class Meta(type):
        def __getattribute__(cls, name):
            raise AssertionError("a class's own code ran")

    lying = Meta("Lying", (), {"__module__": "calc", "__qualname__": "add"})
    assert path._origin(lying) == "class calc.add"
    monkeypatch.setattr(path, "_WS", "")
    assert path._origin(ns["f"]) == f"function {tmp_path / 'm.py'}:f (a twin)"


def test_a_function_is_the_one_its_module_binds_or_a_twin(tmp_path, monkeypatch):
    """A second `add` compiled in `calc.py` (kept aside, or compiled under the file's name) has the
    same file and qualified name as the module's `add`: told apart by what the module binds."""
    import importlib.util

    src = tmp_path / "calc_twin_mod.py"
    src.write_text("def add(a, b):\n    return a + b\n_twin = add\n\ndef add(a, b):\n    return a - b\n")
    spec = importlib.util.spec_from_file_location("calc_twin_mod", src)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "calc_twin_mod", module)
    spec.loader.exec_module(module)
    monkeypatch.setattr(path, "_WS", str(tmp_path))
    assert path._origin(module.add) == "function calc_twin_mod.py:add"
    assert path._origin(module._twin) == "function calc_twin_mod.py:add (a twin)"
    borrowed: dict = {"__name__": "calc_twin_mod"}
    exec(compile("def add(a, b):\n    return a + b\n", str(src), "exec"), borrowed)
    assert path._origin(borrowed["add"]) == "function calc_twin_mod.py:add (a twin)"
    module.add = module._twin  # the module binds the right one: that is what everyone calls
    assert path._origin(module._twin) == "function calc_twin_mod.py:add"


def test_every_name_a_test_reads_counts_whatever_sorts_before_it(tmp_path):
    g: dict = {"zzz": os.path.join}
    exec(compile("def test_x():\n    assert aaa_builtin_missing or zzz\n", str(tmp_path / "t.py"), "exec"), g)
    before = path.ran(SimpleNamespace(obj=g["test_x"]))
    g["zzz"] = os.path.split
    assert path.ran(SimpleNamespace(obj=g["test_x"])) != before


class _Counted(str):
    """A key whose own hash and equality would run code in any lookup of its hash."""

    calls = 0

    def __hash__(self) -> int:
        _Counted.calls += 1
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        _Counted.calls += 1
        return str.__eq__(self, other)


@pytest.mark.parametrize("seed", range(5))
def test_a_namespace_is_plain_only_when_every_key_is_a_str_and_telling_runs_none_of_their_code(seed):
    rng = random.Random(seed)
    names = [f"n{i}" for i in range(rng.randrange(1, 40))]
    space = dict.fromkeys(names, 0)
    assert path.plain(space)
    space[_Counted(rng.choice(names) + "x")] = 1
    _Counted.calls = 0
    assert not path.plain(space) and _Counted.calls == 0


class _NotCallable:
    def __get__(self, inst, owner=None):
        return 1


@pytest.mark.parametrize("value", [len, print, lambda: 0, _Counted.__eq__, property(lambda s: 1),
                                   staticmethod(len), classmethod(len), _NotCallable(),
                                   functools.cached_property(lambda s: 1), functools.partial(len), int, type,
                                   SimpleNamespace, str.upper, "".upper])
def test_whatever_runs_code_when_read_or_called_is_code(value):
    assert path.is_code(value)


@pytest.mark.parametrize("value", [0, "text", (), [], {}, None, 1.5, SimpleNamespace(), object(), b""])
def test_data_is_not_code(value):
    assert not path.is_code(value)


class _Item:
    nodeid = "tests/test_x.py::test_a"

    def runtest(self):
        return "ran"

    @functools.cached_property
    def location(self):
        return ("x", 1, "y")


class _Other(_Item):
    pass


def test_an_items_own_attribute_in_place_of_its_class_code_is_named_and_its_own_data_is_not():
    item = _Item()
    path.collected([item])
    assert path.standing(item) == []
    assert item.location == ("x", 1, "y")  # a cached_property keeps its value in the item: its own
    item.extra = 3  # data of its own that no class has
    assert path.standing(item) == []
    item.runtest = lambda: None
    assert path.standing(item) == ["the test tests/test_x.py::test_a has its own runtest"]
    del item.runtest
    item.__class__ = _Other
    assert path.standing(item) == ["the test tests/test_x.py::test_a is now a _Other"]


def test_a_digest_reads_no_name_in_a_test_module_holding_a_key_that_is_not_a_str(tmp_path):
    g: dict = {"add": os.path.join}
    exec(compile("def test_x():\n    assert add\n", str(tmp_path / "t.py"), "exec"), g)
    plain_digest = path.ran(SimpleNamespace(obj=g["test_x"]))
    g[_Counted("zz")] = 0
    _Counted.calls = 0
    unreadable = "a test module whose namespace cannot be read by name"
    assert path.ran(SimpleNamespace(obj=g["test_x"])) == unreadable
    assert _Counted.calls == 0 and plain_digest != unreadable


def test_a_module_the_test_reads_that_holds_such_a_key_is_named_and_later_names_still_count(tmp_path):
    import types

    poisoned = types.ModuleType("aaa_mod")
    poisoned.__dict__[_Counted("x")] = 0
    g: dict = {"aaa_mod": poisoned, "zzz": os.path.join}
    exec(compile("def test_x():\n    assert aaa_mod.x and zzz\n", str(tmp_path / "t.py"), "exec"), g)
    _Counted.calls = 0
    first = path.ran(SimpleNamespace(obj=g["test_x"]))
    assert _Counted.calls == 0
    g["zzz"] = os.path.split  # a name read after the unreadable module still counts
    assert path.ran(SimpleNamespace(obj=g["test_x"])) != first
    del poisoned.__dict__[next(k for k in poisoned.__dict__ if type(k) is _Counted)]
    poisoned.x = 1
    assert path.ran(SimpleNamespace(obj=g["test_x"])) not in (first, None)


def test_a_function_is_bound_there_by_its_files_real_path_not_its_spelling(tmp_path, monkeypatch):
    import importlib.util

    src = tmp_path / "real_dir" / "bound_mod.py"
    src.parent.mkdir()
    src.write_text("def add(a, b):\n    return a + b\n")
    (tmp_path / "link_dir").symlink_to(src.parent)
    spec = importlib.util.spec_from_file_location("bound_mod", src)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bound_mod", module)
    spec.loader.exec_module(module)
    assert path._bound_there(module.add, "add")  # the same spelling
    module.__file__ = str(tmp_path / "link_dir" / "bound_mod.py")
    assert path._bound_there(module.add, "add")  # another spelling of the same file
    module.__file__ = str(tmp_path / "other.py")
    assert not path._bound_there(module.add, "add")  # another file
    module.__file__ = None
    assert not path._bound_there(module.add, "add")
    module.__file__ = str(src)
    monkeypatch.setitem(sys.modules, _Counted("bound_mod2"), module)
    _Counted.calls = 0
    assert not path._bound_there(module.add, "add") and _Counted.calls == 0  # sys.modules unreadable


class _Slotted:
    __slots__ = ("nodeid",)

    def runtest(self):
        return None


def test_an_item_whose_attributes_or_module_cannot_be_read_by_name_is_named(tmp_path):
    slotted = _Slotted()
    slotted.nodeid = "t::slots"
    assert path.standing(slotted) == ["the attributes of the test t::slots cannot be read"]
    item = _Item()
    item.__dict__[_Counted("k")] = 1
    assert path.standing(item) == ["the attributes of the test tests/test_x.py::test_a cannot be read"]
    g: dict = {}
    exec(compile("def test_a():\n    pass\n", str(tmp_path / "t.py"), "exec"), g)
    clean = _Item()
    clean.obj = g["test_a"]
    assert path.standing(clean) == []
    g[_Counted("k")] = 1
    said = "the module of the test tests/test_x.py::test_a holds a name that is not a str"
    assert path.standing(clean) == [said]


def test_a_class_that_holds_such_a_key_cannot_be_read_and_the_nearest_class_decides(monkeypatch):
    monkeypatch.setattr(path, "_TYPES", {})  # none collected: the types are not compared here
    odd = type("Odd", (_Item,), {_Counted("k"): 1})
    item = odd()
    item.runtest = lambda: None
    assert path.standing(item) == ["the class of the test tests/test_x.py::test_a cannot be read"]

    class Data(_Item):
        runtest = 3  # data in the nearest class: an attribute of the instance stands for nothing

    item = Data()
    item.runtest = 4
    assert path.standing(item) == []


class _Caller:
    __slots__ = ("_hookexec",)


class _Manager:
    def register(self):
        return None


def _config() -> SimpleNamespace:
    relay = SimpleNamespace()
    for name in path.HOOKS:
        caller = _Caller()
        caller._hookexec = print
        setattr(relay, name, caller)
    manager = _Manager()
    manager.hook = relay
    manager._inner_hookexec = len
    return SimpleNamespace(pluginmanager=manager, hook=relay, _session=SimpleNamespace())


@pytest.mark.parametrize("how", ["relay", "executor", "caller", "slot", "shadow", "unreadable"])
def test_what_a_tests_call_goes_through_is_kept_at_configure_and_each_move_named(how):
    config = _config()
    path.keep_path(config)
    assert path.moved(config) == []
    manager, relay = config.pluginmanager, config.hook
    if how == "relay":
        config.hook = SimpleNamespace(**vars(relay))
        want = "what a test's call goes through moved: the config's hook relay"
    elif how == "executor":
        manager._inner_hookexec = max
        want = "what a test's call goes through moved: the plugin manager's hook executor"
    elif how == "caller":
        relay.pytest_pyfunc_call = _Caller()
        want = "what a test's call goes through moved: the caller of pytest_pyfunc_call"
    elif how == "slot":
        relay.pytest_runtest_call._hookexec = repr
        want = "what a test's call goes through moved: the executor of pytest_runtest_call"
    elif how == "shadow":
        manager.register = lambda: None
        want = "the plugin manager has its own register"
    else:
        manager.__dict__[_Counted("k")] = 1
        want = "the attributes of the plugin manager cannot be read"
    labels = [label for label, _ in path.moved(config)]
    assert want in labels, labels


class _Session:
    def gethookproxy(self, where):
        return None


def test_the_objects_that_hold_the_call_path_are_read_whole_and_what_stands_in_is_foreign():
    config = _config()
    session = _Session()
    config._session = session
    path.keep_path(config)
    config.pluginmanager.__dict__[_Counted("k")] = 1  # unreadable: the others are still looked at
    session.gethookproxy = lambda where: None
    moved = dict(path.moved(config))  # (and what the unreadable manager held reads as moved)
    assert moved["the attributes of the plugin manager cannot be read"] is True
    assert moved["the session has its own gethookproxy"] is True
