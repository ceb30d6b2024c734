"""autod's per-test recorder: a pytest plugin that writes what each test did, for the judge, sealed.

Copied as `autod_verdicts.py` into a read-only directory first on a check's PYTHONPATH and loaded by `-p`
and `PYTEST_PLUGINS` in every pytest the check starts; it runs in the project's own Python (standard
library and pytest only, syntax old Pythons read). The code under test shares the process, so the
recorder depends on nothing it could change with plain Python (autod.checks.seal has the scheme):

- At import (before any conftest, test or code under test) it takes one key from autod's pipe
  (`$_AUTOD_JUDGE_KEYS`) and keeps every function it writes with; once registered it leaves
  `sys.modules`. A first recorder that found no key fails its session (exit status 3).
- It writes one record, `results-<fingerprint>.json` in `$_AUTOD_JUDGE_OUT`: {"seal", "mac", "body"}, the
  body {"tests": {nodeid: outcome}, "collected", "collect_errors", "deselected", "exitstatus", "complete",
  "worker", "session", "pid", "first", "runner", "runner_foreign", "ran"} and its HMAC-SHA256 under the
  key (`ran`: what each test ran, as autod.checks.judge_path digests it when its call begins).
  An outcome is the worst of a test's phases (passed < xpassed < xfailed < skipped < failed < error),
  once its protocol ran to its end (`_tests`); a call the recorder saw raise is not passed, whatever its
  report says (`pytest_runtest_call`). `runner` names the parts of the runner changed since import
  (below), `runner_foreign` those whose new value is not an installed module's code; `first`: the
  process's first recorder (a later one is pytester's, or a copy imported). A session that ends before
  its last hook writes nothing: a key taken with no record is a failed run. Under pytest-xdist the
  controller's record has the outcomes. A pytest that ran no session (`--version`) records that.
- What it holds until then the code under test could rewrite, so it also tells autod each phase, each
  raising call and each runner change the moment it hears them, on the channel autod handed the check
  (`_tell`, in autod.checks.judge_wire; autod.checks.heard judges a session by what it told).
- Before and after each test's call it names the hook implementations on a test's way to its verdict,
  a test whose function was swapped, what stands in for the item's own code, and what the call goes
  through if it moved since `pytest_configure` (`_watch`, autod.checks.judge_path), as runner changes.
- Around each test's call a witness (autod.checks.judge_ran) keeps the frame the collected function's
  code is entered in with the item's own arguments; a call whose frame did not end at a return is
  counted as a raising one, whatever reported it.
"""

import hashlib
import operator
import os
import sys

if __name__ == "autod_verdicts":  # as a check loads it: its parts sit beside it in autod's lib/
    from autod_path import HOOKS, collected, every_hook, hooked, is_code, name_of, plain, ran, standing  # noqa: I001
    from autod_path import keep_path, moved, test_function
    from autod_ran import heard, keep_bindings, no_rewritten_bytecode, witness
    from autod_wire import _json, _mac, _take_key, _tell
else:  # as autod's own module (autod.checks.pertest's tests write records with it)
    from autod.checks.judge_path import HOOKS, collected, every_hook, hooked, is_code, name_of, plain, ran  # noqa: I001
    from autod.checks.judge_path import keep_path, moved, standing, test_function
    from autod.checks.judge_ran import heard, keep_bindings, no_rewritten_bytecode, witness
    from autod.checks.judge_wire import _json, _mac, _take_key, _tell

_RANK = {"passed": 0, "xpassed": 1, "xfailed": 2, "skipped": 3, "failed": 4, "error": 5}
_state = {"phases": {}, "collected": set(), "errors": [], "deselected": [], "worker": False, "written": False,
          "runner": set(), "foreign": set(), "raised": {}, "hooked": {}, "functions": {}, "told": set(),
          "ran": {}}

# what the record is written with, taken now, before any of the project's code has run
_open, _write, _close, _replace, _getpid = os.open, os.write, os.close, os.replace, os.getpid
_join = os.path.join
_sha256 = hashlib.sha256
_len, _isinstance, _sorted, _str, _int = len, isinstance, sorted, str, int
_dict, _list, _tuple, _set, _getattr, _hasattr = dict, list, tuple, set, getattr, hasattr
_O_WRITE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_OUT = os.environ.get("_AUTOD_JUDGE_OUT")
_WS = os.path.join(os.environ.get("_AUTOD_JUDGE_WS") or "", "") if os.environ.get("_AUTOD_JUDGE_WS") else ""
_MAX_NAMED = 1000  # runner parts named in a record (then one label counts the rest)


# only the process's first recorder takes a key (another is pytester's inner run, or a copy imported)
_FIRST = os.environ.get("_AUTOD_JUDGE_FIRST") != str(_getpid())
os.environ["_AUTOD_JUDGE_FIRST"] = str(_getpid())
_KEY = _take_key() if _FIRST else None
_FP = _sha256(_KEY).hexdigest()[:16] if _KEY is not None else ""  # the record's name for its key


_tell("hello", _FP)  # before any conftest, test or code under test: this session has a channel

# The runner as it was before any project code ran: every function and class of pytest, pluggy, unittest,
# builtins, the import system and this recorder, each such class's own attributes, each function's code.
# A change (through `sys.modules` by any spelling) is named in the record, and a run whose runner changed
# beyond the check's run before the candidate is a failed run (autod.checks.outcome). Compared when each
# module has been collected and when the session ends, never while a test runs (its own `monkeypatch`).
_RUNNER_ROOTS = ("pytest", "_pytest", "pluggy", "unittest", "builtins", "importlib", "_frozen_importlib",
                 "_frozen_importlib_external",  # the import system: the guard's bytecode rule lives there
                 "autod_wire", "autod_path", "autod_ran")  # what the record is written and autod told with
_MISSING = object()
_FUNCTION, _type = type(_take_key), type
_map, _zip, _id, _any = map, zip, id, any
_code_of = operator.attrgetter("__code__")
_DESCRIPTORS = (staticmethod, classmethod, property)


def _judged(value):  # code, or what runs code when read: any descriptor, callable or not
    return value is not _MISSING and is_code(value)


def _runner_parts():
    """The runner's namespaces now, each as (namespace, a copy, the ids of its values), and its
    functions with their code."""
    spaces, fns = [], []
    names = [n for n in _sorted(sys.modules) if n.split(".")[0] in _RUNNER_ROOTS]
    mods = [(n, _getattr(sys.modules[n], "__dict__", None)) for n in names] + [(__name__, globals())]
    seen = _set()
    for name, ns in mods:
        if not _isinstance(ns, _dict) or _id(ns) in seen:
            continue  # `importlib._bootstrap_external` is `_frozen_importlib_external`
        seen.add(_id(ns))
        todo = [(ns, name)]
        for key, value in _list(ns.items()):
            if _isinstance(value, _type) and _getattr(value, "__module__", None) == name != "builtins":
                todo.append((value.__dict__, name + "." + _str(key)))  # built-in types are immutable
        for space, prefix in todo:
            copy = _dict(space)
            spaces.append((space, copy, (_tuple(_map(_id, copy)), _tuple(_map(_id, copy.values()))), prefix))
            for v in copy.values():
                v = v.__func__ if _isinstance(v, (staticmethod, classmethod)) else v
                if _type(v) is _FUNCTION and _getattr(v, "__module__", None) == name:
                    fns.append(v)
    fns = _tuple(fns)
    return spaces, (fns, _tuple(_map(_code_of, fns)))


def _runner_changed():
    """Add to the record the runner's parts that are not what they were at import: a function or
    class (or descriptor) in one of its namespaces replaced, removed or added, or a function's code
    replaced. Compared by identity, in C, a namespace at a time; named only where one differs."""
    for ns, copy, ids, prefix in _SPACES:
        if (_tuple(_map(_id, ns)), _tuple(_map(_id, ns.values()))) == ids:
            continue
        if not plain(ns):  # a key whose own `__eq__` would run in the comparison's lookups
            _change(prefix + " holds a name that is not a str", True)
            continue
        for key in _set(copy) | _set(ns):
            was, now = copy.get(key, _MISSING), ns.get(key, _MISSING)
            if was is not now and (_judged(was) or _judged(now)):
                _change(prefix + "." + _str(key), _foreign(now))
    fns, codes = _CODES
    if _tuple(_map(_code_of, fns)) != codes:
        for f, c in _zip(fns, codes):
            if f.__code__ is not c:
                label = _str(f.__module__) + "." + _str(f.__qualname__) + ".__code__"
                _change(label, _in_workspace(f.__code__.co_filename))


def _change(label, foreign):
    """A change of the runner, for the record, and told to autod now: each foreign one, and the others
    up to `_MAX_NAMED` labels told (then once that there were more)."""
    _state["runner"].add(label)
    if foreign:
        _state["foreign"].add(label)
    told = _state["told"]
    if (label, foreign) in told:
        return
    if foreign or _len(told) < _MAX_NAMED:
        told.add((label, foreign))
        _tell("runner", _FP, label, "foreign" if foreign else "")
    elif ("", False) not in told:
        told.add(("", False))
        _tell("runner", _FP, "more parts changed than autod is told", "")


def _unsure(label):
    """A report pytest's own classes did not make: counted as a foreign change of the runner."""
    _change(label, True)


def _watch(manager, item, every=False):
    """Name what stands on a test's way to its verdict (autod.checks.judge_path): every hook
    implementation there not named yet (`every`: of any hook), and a test whose function is not the
    one collected."""
    for label, foreign in hooked(manager, _state["hooked"], every_hook(manager) if every else HOOKS):
        _change(label, foreign)
    for label in standing(item) if item is not None else ():
        _change(label, True)
    for label, foreign in moved(item.config) if item is not None else ():
        _change(label, foreign)
    if item is not None and _str(item.nodeid) in _state["functions"]:
        now = test_function(item)
        if now is not _state["functions"][_str(item.nodeid)]:
            label, foreign = name_of(now)
            _change("the function of " + _str(item.nodeid) + " is now " + label, foreign)


def _foreign(value):
    """Whether a part's new value is not the runner's or an installed plugin's own code (pytest changes
    itself as it configures, and so do plugins such as hypothesis's): gone, code from the workspace,
    or anything but a Python function, property or class of an installed module."""
    if value is _MISSING:
        return True
    if _isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    elif _isinstance(value, property):
        return _any(_foreign(f) for f in (value.fget, value.fset, value.fdel) if f is not None)
    if _type(value) is _FUNCTION:
        return _in_workspace(value.__code__.co_filename)
    if _isinstance(value, _type):  # its module's file, and the code of its own functions
        return _in_workspace(_str(_getattr(sys.modules.get(value.__module__), "__file__", None) or "")) or \
            _any(_foreign(v) for v in _list(value.__dict__.values())
                 if _type(v) is _FUNCTION or _isinstance(v, _DESCRIPTORS))
    return True


def _in_workspace(filename):
    return not _WS or not filename.startswith("/") or filename.startswith(_WS)


def _record(exitstatus, session):
    """Write this session's sealed record, once; nothing without a key or a directory to write in."""
    if _state["written"] or not _OUT or _KEY is None:
        return
    _state["written"] = True
    worker = _state["worker"]
    body = _json({
        "tests": {} if worker else _tests(),
        "collected": [] if worker else _sorted(_state["collected"]),
        "collect_errors": [] if worker else _state["errors"],
        "deselected": [] if worker else _state["deselected"],
        "exitstatus": _int(exitstatus),
        "complete": True,
        "worker": worker,
        "session": session,
        "pid": _getpid(),
        "first": _FIRST,
        "runner": _named(_state["runner"]),
        "runner_foreign": _named(_state["foreign"]),
        "ran": _state["ran"],
    })
    fp = _FP
    doc = _json({"seal": fp, "mac": _mac(_KEY, body.encode("ascii")), "body": body}).encode("ascii")
    path = _join(_OUT, "results-" + fp + ".json")
    tmp = path + ".tmp"
    try:
        fd = _open(tmp, _O_WRITE, 0o600)
        try:
            while doc:
                doc = doc[_write(fd, doc):]
        finally:
            _close(fd)
        _replace(tmp, path)
    except OSError:
        pass  # no record: autod reads the key taken without one as a failed run


def _named(labels):
    """At most `_MAX_NAMED` labels, and one that counts the rest: a change past the cap still changes
    what the record says."""
    named = _sorted(labels)[:_MAX_NAMED]
    if _len(labels) > _MAX_NAMED:
        named.append(_str(_len(labels) - _MAX_NAMED) + " more parts changed than a record names")
    return named


def _outcome(report):
    when = _getattr(report, "when", "call")
    wasxfail = _hasattr(report, "wasxfail")
    if report.outcome == "passed":
        return "xpassed" if wasxfail and when == "call" else "passed"
    if report.outcome == "skipped":
        return "xfailed" if wasxfail else "skipped"
    if report.outcome == "failed":
        return "failed" if when == "call" else "error"
    return None  # "rerun" and other plugins' outcomes: the final report decides


def pytest_plugin_registered(plugin, manager):
    # registered (this hook is called for this module the moment pytest registers it, before any
    # conftest loads): no longer importable by name, so `import autod_verdicts` in a conftest or the
    # code under test gives a fresh module, which never held this session's key
    if __name__ == "autod_verdicts" and sys.modules.get(__name__) is plugin:
        del sys.modules[__name__]


def pytest_configure(config):
    _state["worker"] = _hasattr(config, "workerinput")
    keep_path(config)


def pytest_runtest_logreport(report):
    if _type(report) is not _REPORT and _REPORT is not None:
        _unsure("a test report of type " + _str(_getattr(_type(report), "__qualname__", "?")))
    if _type(report.outcome) is not _str:
        _unsure("a test report's outcome of type " + _str(_type(report.outcome).__qualname__))
        return  # not heard: a test that failed before and is not heard passing did not pass
    outcome = _outcome(report)
    if outcome is None:
        return
    phases = _state["phases"].setdefault(_str(report.nodeid), {})
    when = _str(_getattr(report, "when", "call"))
    if when == "call" and outcome in ("passed", "xpassed") and _state["raised"].get(report.nodeid):
        # the call raised, as this recorder saw it around the test itself: a report made after it that
        # says passed was made to say so (a plugin's wrapper, a swapped hook, a patched report)
        _unsure("a test reported passed though its call raised or did not return: " + _str(report.nodeid))
        outcome = "failed"
    now = phases.get(when)
    if now is None or _RANK[outcome] > _RANK[now]:
        phases[when] = outcome
    _tell("phase", _FP, _str(report.nodeid), when, outcome)


def _tests():
    """Each test's outcome, from what its phases reported: the worst of them, when the test failed or
    its protocol ran to its end; a test whose call (or a skip in its setup) or teardown was never
    reported, because something ended the session in the middle of it (`pytest.exit`, an exception
    that passes for its `Exit`), did not pass and is left out: not heard."""
    tests = {}
    for nodeid, phases in _state["phases"].items():
        worst = _sorted(phases.values(), key=_RANK.__getitem__)[-1]
        ended = "teardown" in phases and ("call" in phases or phases.get("setup") in ("skipped", "xfailed"))
        if ended or _RANK[worst] >= _RANK["failed"]:
            tests[nodeid] = worst
    return tests


def pytest_collectreport(report):
    if "::" not in report.nodeid:
        _runner_changed()  # a module collected: the code under test it imports has run
    if report.failed:
        _state["errors"].append(report.nodeid or "<session>")


def pytest_deselected(items):
    _state["deselected"].extend(_getattr(i, "nodeid", _str(i)) for i in items)


def pytest_collection_finish(session):
    _state["collected"].update(i.nodeid for i in session.items)
    _state["functions"].update((_str(i.nodeid), test_function(i)) for i in session.items)
    for fn in _state["functions"].values():  # each test module's bindings, as collected
        keep_bindings(_getattr(fn, "__globals__", None))
    collected(session.items)
    _watch(session.config.pluginmanager, None, every=True)  # what collected them, and anything else


def pytest_sessionfinish(session, exitstatus):
    if _FIRST and _OUT and _KEY is None and not _state["worker"]:
        # no key to seal with: the pipe was empty (something took the keys first) or gone. Whatever
        # records there are do not speak for this session, so pytest must not say it passed either.
        sys.stderr.write("autod_verdicts: no key to seal this session's results with; failing it\n")
        session.exitstatus = 3
        return
    _runner_changed()
    _watch(session.config.pluginmanager, None, every=True)
    _record(exitstatus, True)


def pytest_unconfigure(config):
    _record(0, False)  # a pytest that ran no session (`--version`, a usage error) says so


try:  # pytest-xdist's controller learns each worker's collection through this hook
    import pytest

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_call(item):
        """Whether the test raised, seen around its call before any report is made of it (no report
        hook, and no wrapper outside this one, can hide it), or did not run its own code to a return
        (autod.checks.judge_ran `witness`: a wrapper inside this one, or anything on the way, that calls
        something else or swallows what the test raised)."""
        _watch(item.config.pluginmanager, item)
        digest = _state["ran"][_str(item.nodeid)] = ran(item)
        if digest is not None:
            _tell("ran", _FP, _str(item.nodeid), digest)
        watched = witness(_state["functions"].get(_str(item.nodeid)), _getattr(item, "funcargs", None)) \
            if _FIRST else None
        outcome = yield
        returned = heard(watched)
        _watch(item.config.pluginmanager, item)
        raised = _getattr(outcome, "excinfo", None) is not None or not returned
        _state["raised"][_str(item.nodeid)] = raised
        if raised:
            _tell("raised", _FP, _str(item.nodeid))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(node, ids):
        _state["collected"].update(ids)

except Exception:  # an old pytest without hookimpl: the controller's collection is then unknown
    pass


# taken last, still while pytest imports this module: before any conftest, test or code under test
no_rewritten_bytecode(_FIRST, _WS)
_REPORT = _getattr(sys.modules.get("_pytest.reports"), "TestReport", None)
_SPACES, _CODES = [], ()  # bound before they are kept: the keeping itself is not a change
_SPACES, _CODES = _runner_parts()
