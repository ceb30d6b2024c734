"""What stands between a test and its verdict, named for the record: the hook implementations on a
test's way through pytest, and the function each test runs.

A plugin the code under test registers through the plugin manager pytest hands out can make a failing
test's call pass without its assertion ever running: a `pytest_pyfunc_call` that never calls the test,
an inner `pytest_runtest_call` wrapper that swallows what it raised, a `pytest_collection_modifyitems`
that swaps `item.obj`; so can swapping a registered implementation's function, or a test's `obj`,
directly. Nothing the recorder hears after the call can tell. So the recorder
(autod.checks.judge_plugin) names, before and after each test's call and when the session ends, every
implementation of the hooks in `HOOKS` ("<hook> runs <qualname> (<file>:<line>)", for the function
that stands there, or the type of the callable that does), and each test whose function is no longer
the one collected. These names join the runner's changes, so a name the check's run before the
candidate did not have makes the run one that cannot be trusted (autod.checks.outcome). Without a run
before, a name counts when its code is in a file the candidate changed, or is no function at all.

Copied as `autod_path.py` beside the recorder (autod.checks.pertest); standard library only, syntax old
Pythons read. It stays in `sys.modules`, one of the namespaces the recorder compares.
"""

import hashlib
import json
import operator
import os

if __name__ == "autod_path":  # as a check loads it: its parts sit beside it in autod's lib/
    from autod_ran import bound, constant, content, literals, unwrapped
else:  # as autod's own module
    from autod.checks.judge_ran import bound, constant, content, literals, unwrapped

HOOKS = ("pytest_collection_modifyitems", "pytest_runtestloop", "pytest_runtest_protocol",
         "pytest_runtest_logstart", "pytest_runtest_setup", "pytest_runtest_call", "pytest_pyfunc_call",
         "pytest_runtest_teardown", "pytest_runtest_makereport", "pytest_runtest_logreport",
         "pytest_report_teststatus", "pytest_runtest_logfinish", "pytest_fixture_setup",
         "pytest_exception_interact")
_FUNCTION = type(json.loads)
_METHOD = type(os.environ.get)
_MODULE, _CODE, _MISSING = type(os), type(json.loads.__code__), object()
_dict_get, _sha256, _issubclass = dict.get, hashlib.sha256, issubclass
_type_module, _type_qualname = type.__dict__["__module__"].__get__, type.__dict__["__qualname__"].__get__
_str, _type, _getattr, _isinstance, _id = str, type, getattr, isinstance, id
_KNOWN = {}  # id of a callable seen standing in a hook -> (it, its name, foreign)
_KEPT = []  # each `named` and plugin manager a look was keyed by
_LAST = {}  # (ids of `named` and a plugin manager, hook) -> its implementations' callables' ids last time
_tuple, _map, _function_of = tuple, map, operator.attrgetter("function")
_sorted, _list, _callable, _all = sorted, list, callable, all
_own = type.__dict__["__dict__"].__get__  # a class's own namespace, read with no code of it run
_mro = type.__dict__["__mro__"].__get__
_instance_dict = object.__getattribute__
_CACHED = getattr(__import__("functools"), "cached_property", None)
_TYPES = {}  # node id -> the type of the item collected under it
_PATH = {}  # label -> what a test's call went through at configure time (`keep_path`)
_bool = bool
_SLOT = type(os.stat_result.st_mode)  # a slot's member descriptor: it reads the slot, no code of it
_sys_modules = __import__("sys").modules
_realpath, _join, _relpath = os.path.realpath, os.path.join, os.path.relpath


def changed_files(text, workspace):
    """The absolute paths (as given, and resolved) of the candidate's files: the JSON list of
    workspace-relative paths in `text` (`$_AUTOD_JUDGE_CHANGED`); empty without a candidate."""
    try:
        rels = json.loads(text or "[]")
    except ValueError:
        return frozenset()
    if not _isinstance(rels, list) or not workspace:
        return frozenset()
    out = set()
    for rel in rels:
        if _isinstance(rel, _str):
            out.add(_join(workspace, rel))
            out.add(_realpath(_join(workspace, rel)))
    return frozenset(out)


_WS = os.environ.get("_AUTOD_JUDGE_WS") or ""
_LIB = _join(os.path.dirname(os.path.abspath(__file__)), "")  # autod's, made anew for each run
_CHANGED = changed_files(os.environ.get("_AUTOD_JUDGE_CHANGED"), _WS)


def name_of(fn):
    """(name, foreign) of a callable where a hook's or a test's function stands: its qualified name,
    file and first line (a method's function's), or the type of what is no function; foreign when a
    candidate is judged and its code is in a changed file, or it is no function."""
    if _type(fn) is _METHOD:
        fn = fn.__func__
    if _type(fn) is not _FUNCTION:
        kind = _type(fn)
        return "a " + _str(_getattr(kind, "__module__", "?")) + "." + _str(kind.__qualname__), bool(_CHANGED)
    code = fn.__code__
    where = code.co_filename
    if _WS and where.startswith(_join(_WS, "")):
        where = _relpath(where, _WS)
    elif where.startswith(_LIB):
        where = "autod's " + where[len(_LIB):]
    foreign = code.co_filename in _CHANGED or _realpath(code.co_filename) in _CHANGED
    return _str(fn.__qualname__) + " (" + where + ":" + _str(code.co_firstlineno) + ")", foreign


def every_hook(manager):
    """The names of every hook `manager` knows now (its specifications' and any a plugin added)."""
    hook = _getattr(manager, "hook", None)
    return _tuple(_sorted(n for n, v in _list(_getattr(hook, "__dict__", {}).items())
                          if n.startswith("pytest_") and _callable(_getattr(v, "get_hookimpls", None))))


def hooked(manager, named, hooks=HOOKS):
    """Every implementation of `hooks` registered with `manager` now: each (label, foreign) not yet in
    `named` (label -> foreign), which takes them. A hook the manager does not know is passed over. A
    hook whose implementations' callables are the ones it had at the last look is passed over too
    (each callable seen is kept, so no other object ever has its id)."""
    found = []
    hook = _getattr(manager, "hook", None)
    for name in hooks:
        caller = _getattr(hook, name, None)
        impls = caller.get_hookimpls() if caller is not None else ()
        ids = _tuple(_map(_id, _map(_function_of, impls)))
        if _LAST.get((_id(named), _id(manager), name)) == ids:
            continue
        for impl in impls:
            fn = impl.function
            known = _KNOWN.get(_id(fn))
            if known is None or known[0] is not fn:  # each callable named once (a path is resolved)
                known = _KNOWN[_id(fn)] = (fn, *name_of(fn))
            label = name + " runs " + known[1]
            if label not in named:
                named[label] = known[2]
                found.append((label, known[2]))
        if (_id(named), _id(manager), name) not in _LAST:
            _KEPT.append((named, manager))  # their ids too are never another's
        _LAST[(_id(named), _id(manager), name)] = ids
    return found


def ran(item):
    """What a test runs, as a digest: its function, and the origin of every name its code reads from
    its module's globals (and, for a module there, of each attribute its code names), by code object:
    a function is its file and qualified name as compiled (`co_qualname`: neither its `__name__` nor
    its `__qualname__`, which anything can set), a class its module and name, a module its name and
    file, anything else its type. A test whose digest is not the run before's ran something else
    (autod.checks.outcome); None: not a Python function's test."""
    fn = test_function(item)
    if _type(fn) is _METHOD:
        fn = fn.__func__
    if _type(fn) is not _FUNCTION:
        return None
    names = _sorted(_read_names(fn.__code__))
    spaces = fn.__globals__
    if _type(spaces) is not dict or not plain(spaces):
        return "a test module whose namespace cannot be read by name"
    labels = ["test " + _origin(fn)]
    said = literals(fn.__code__.co_filename) if _judging(fn.__code__.co_filename) else {}
    labels.extend("wraps " + _origin(inner) for inner in unwrapped(fn))
    labels.extend("rebound " + name for name in bound(spaces))
    labels.extend(_fixtures(item))
    for name in names:
        value = _dict_get(spaces, name, _MISSING)
        if value is _MISSING:
            continue  # a builtin, or only an attribute's name
        labels.append(name + "=" + (constant(value) if name in said else _origin(value)))
        if _type(value) is _MODULE:
            inner = _getattr(value, "__dict__", {})
            if _type(inner) is not dict or not plain(inner):
                labels.append(name + " cannot be read by name")
                continue
            labels.extend(name + "." + a + "=" + _origin(_dict_get(inner, a)) for a in names if a in inner)
    return _sha256("\n".join(labels).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _fixtures(item):
    """Labels of the fixtures a test requests, each the origin of its function (its content too, when a
    test file holds it); none when the item keeps no fixture information pytest's way."""
    info = _getattr(item, "_fixtureinfo", None)
    defs = _getattr(info, "name2fixturedefs", None)
    if _type(defs) is not dict or not plain(defs):
        return []
    out = []
    for name in _sorted(defs):
        for fixturedef in _tuple(defs[name] or ())[-1:]:  # the one the test gets: the closest
            out.append("fixture " + name + "=" + _origin(_getattr(fixturedef, "func", None)))
    return out


def _defaults(fn):
    """A function's default arguments as constants' text (a default is the function's, not its code's)."""
    kw = fn.__kwdefaults__
    if _type(kw) is dict and not plain(kw):
        return constant(fn.__defaults__) + "<keyword defaults not read by name>"
    return constant(fn.__defaults__) + constant(_tuple(_sorted(kw.items())) if _type(kw) is dict else kw)


def _judging(filename):
    """Whether a file of the workspace judges by pytest's naming (a test module, a conftest, a file
    under a `tests`/`test`/`testing` directory): code the candidate may not change, so what it holds
    must be what the run before compiled."""
    if not _WS or _type(filename) is not _str or not filename.startswith(_join(_WS, "")):
        return False
    parts = _relpath(filename, _WS).split(os.sep)
    name = parts[-1]
    return name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py") or \
        any(p in ("tests", "test", "testing") for p in parts[:-1])


def _read_names(code):
    """Every name a code object and the code objects inside it read (globals and attributes alike)."""
    out, todo = set(), [code]
    while todo:
        c = todo.pop()
        out.update(c.co_names)
        todo.extend(k for k in c.co_consts if _type(k) is _CODE)
    return out


def _origin(value):
    kind = _type(value)
    if kind is _METHOD:
        value, kind = value.__func__, _type(value.__func__)
    if kind is _FUNCTION:
        code = value.__code__
        where = code.co_filename
        if _WS and where.startswith(_join(_WS, "")):
            where = _relpath(where, _WS)
        qual = _str(_getattr(code, "co_qualname", code.co_name))
        held = " holding " + content(code) + _defaults(value) if _judging(code.co_filename) else ""
        return "function " + where + ":" + qual + ("" if _bound_there(value, qual) else " (a twin)") + held
    if kind is _MODULE:
        inner = value.__dict__
        return "module " + _str(_dict_get(inner, "__name__")) + " " + _str(_dict_get(inner, "__file__"))
    if _issubclass(kind, type):  # read through `type`'s own descriptors: no class's code runs
        return "class " + _str(_type_module(value)) + "." + _str(_type_qualname(value))
    return "a " + _str(_type_module(kind)) + "." + _str(_type_qualname(kind))


def _bound_there(fn, qual):
    """Whether a module-level function is the one its module binds at its name, in the module compiled
    from its file: a twin (a second `add` compiled in `calc.py`, or code compiled under a borrowed file
    name) has the same file and qualified name, and a test made to call it reads as the run before."""
    if "." in qual:
        return True  # a method or a nested function: told by its file and qualified name
    modules = _sys_modules
    if not plain(modules):
        return False
    module = _dict_get(modules, _str(_getattr(fn, "__module__", "")))
    inner = _getattr(module, "__dict__", None) if _type(module) is _MODULE else None
    if _type(inner) is not dict or not plain(inner) or _dict_get(inner, qual) is not fn:
        return False
    where, file = fn.__code__.co_filename, _dict_get(inner, "__file__")
    return _type(file) is _str and (file == where or _realpath(file) == _realpath(where))


def test_function(item):
    """What a test item runs: its `obj`'s function (a bound method's), or None (not a Python test, or
    an `obj` that raises: a plugin's item, or one a candidate reached; no digest, which the verdict
    reads as other code run when the run before had one)."""
    try:
        obj = item.obj
    except Exception:
        return None
    return obj.__func__ if _type(obj) is _METHOD else obj


def plain(space):
    """Whether every key of a namespace is a `str` itself: a key of a subclass of it runs its own
    `__eq__` in any lookup of a name of its hash (in the middle of a digest, of a comparison), so a
    namespace holding one is never read by name. Iterating keys runs no code."""
    return _all(_type(key) is _str for key in space)


def is_code(value):
    """Whether reading `value` as a class attribute runs code: its type (or a base) defines `__get__`
    (a function, a property, any descriptor, callable or not), or it is callable. Read through `type`'s
    own slots: no code of `value`'s runs."""
    for cls in _mro(_type(value)):
        space = _own(cls)
        if plain(space) and "__get__" in space:
            return True
    return _callable(value)


def collected(items):
    """Keep the type of each collected test item (`standing` compares them)."""
    for item in items:
        _TYPES[_str(item.nodeid)] = _type(item)


def standing(item):
    """Labels of what stands in for a test item's own code: its type not the one collected, an
    attribute of its own in place of its class's code (`item.runtest = f` skips the test with no class,
    hook or function changed; a `cached_property` keeps its value there, and that is its own), or a
    namespace that cannot be read by name (its test module's: any lookup there may run a key's code)."""
    nodeid = _str(item.nodeid)
    kind = _type(item)
    if _TYPES.get(nodeid, kind) is not kind:
        return ["the test " + nodeid + " is now a " + _str(_type_qualname(kind))]
    try:
        own = _instance_dict(item, "__dict__")
    except Exception:
        return ["the attributes of the test " + nodeid + " cannot be read"]
    if _type(own) is not dict or not plain(own):
        return ["the attributes of the test " + nodeid + " cannot be read"]
    out = []
    fn = test_function(item)
    fn = fn.__func__ if _type(fn) is _METHOD else fn
    if _type(fn) is _FUNCTION and (_type(fn.__globals__) is not dict or not plain(fn.__globals__)):
        out.append("the module of the test " + nodeid + " holds a name that is not a str")
    return out + _shadows(item, own, "the test " + nodeid)


def _shadows(obj, own, who):
    """Labels of `obj`'s own attributes (its `__dict__`, `own`) that stand in place of its class's code
    (a `cached_property` keeps its value there: its own)."""
    spaces = [_own(cls) for cls in _mro(_type(obj))]
    if not _all(_map(plain, spaces)):
        return ["the class of " + who + " cannot be read"]
    out = []
    for key in _list(own):
        for space in spaces:
            if key in space:
                value = space[key]
                if (_CACHED is None or _type(value) is not _CACHED) and is_code(value):
                    out.append(who + " has its own " + key)
                break
    return out


def _own_dict(obj):
    """An object's own `__dict__` when it is a plain one (no code of it run), else None."""
    try:
        own = _instance_dict(obj, "__dict__")
    except Exception:
        return None
    return own if _type(own) is dict and plain(own) else None


def _call_path(config):
    """The runner's objects every test's call goes through, by label, read from their own
    `__dict__`s: the hook relay the config and the plugin manager hand out, the manager's hook
    executor, and each hook on a test's way with its executor."""
    def held(obj, name):  # from its own `__dict__`, or its slot (pluggy's hook callers have slots)
        if obj is None:
            return None
        own = _own_dict(obj)
        if own is not None and name in own:
            return own[name]
        for space in _map(_own, _mro(_type(obj))):
            slot = space[name] if plain(space) and name in space else None
            if _type(slot) is _SLOT:
                try:
                    return slot.__get__(obj, _type(obj))
                except AttributeError:
                    return None
        return None

    manager = held(config, "pluginmanager")
    relay = held(manager, "hook")
    out = {"the config's hook relay": held(config, "hook"), "the plugin manager's hook relay": relay,
           "the plugin manager's hook executor": held(manager, "_inner_hookexec")}
    for name in HOOKS:
        caller = held(relay, name)
        out["the caller of " + name] = caller
        out["the executor of " + name] = held(caller, "_hookexec")
    return out, (config, manager, held(config, "_session") or held(config, "session"))


def keep_path(config):
    """Keep what a test's call goes through (`moved` compares): at `pytest_configure`."""
    _PATH.clear()
    _PATH.update(_call_path(config)[0])


def moved(config):
    """(label, foreign) of each object on every test's call path that is not the one kept at
    configure time (`config.hook = relay`, a hook caller's `_hookexec` swapped: no class, hook
    implementation or function changed), and each of the config's, the plugin manager's and the
    session's own attributes in place of their class's code."""
    now, owners = _call_path(config)
    out = []
    for label, was in _list(_PATH.items()):
        if _dict_get(now, label) is not was:
            out.append(("what a test's call goes through moved: " + label, _bool(_CHANGED)))
    for who, obj in zip(("the config", "the plugin manager", "the session"), owners, strict=True):
        own = _own_dict(obj) if obj is not None else {}
        if own is None:
            out.append(("the attributes of " + who + " cannot be read", True))
            continue
        out.extend((label, True) for label in _shadows(obj, own, who))
    return out
