"""What a test's own code is and whether it ran: the content of its code, its module's bindings, and a
witness that the collected test function itself ran, with its own arguments, and returned.

The code under test shares the test runner's process, so it can change what a protected test runs
without touching a file or a hook: rewrite the test's code as pytest compiles or imports it (a patched
`ast.parse`, an import hook), swap a code object's constants from a thread it launders its calls through,
rebind a name in the test's module (`test_calc.EXPECTED = -1`), or swap what pytest calls for the test
for the length of one call (`item._obj`, from a function pytest calls on the way, put back before the
call ends). Lists of what may not be patched close names, not the class. So:

- `content`: a digest of a code object by what it holds (its instructions, constants, names, nested
  code): the test's code, and each function of a test file it reads (autod.checks.judge_path `ran`),
  must be what the check's run before ran, by content, not by file and name;
- `bound`: the names of a test module rebound since collection ended, which `ran` carries too;
- `witness`: as each test's call begins, a profiler on the calling thread keeps the frame in which the
  collected function's code is entered with the arguments pytest gave the item (and one of each function
  it wraps), and is gone; once the call is over, each frame says where it ended. A call with no such
  frame ended at a return did not run the test, whatever its report says: the recorder counts it as
  not passed.

Copied as `autod_ran.py` beside the recorder (autod.checks.pertest); standard library only, syntax old
Pythons read. It stays in `sys.modules`, one of the namespaces the recorder compares.
"""

import ast as _ast
import contextlib
import dis
import hashlib
import os
import sys

_CODE = type(compile("", "<autod>", "exec"))
_FUNCTION = type(lambda: None)
_FRAME = type(sys._getframe())
_sha256, _type, _repr, _str, _sorted, _len, _id = hashlib.sha256, type, repr, str, sorted, len, id
_setprofile, _getprofile, _suppress = sys.setprofile, sys.getprofile, contextlib.suppress
_dict_get, _frozenset, _tuple, _all, _any = dict.get, frozenset, tuple, all, any
_RETURNS = _frozenset(dis.opmap[n] for n in ("RETURN_VALUE", "RETURN_CONST") if n in dis.opmap)
_SIMPLE = (int, float, complex, str, bytes, bool, type(None), type(Ellipsis))
_BOUND = {}  # id of a test module's namespace -> (it, a copy as collection ended)
_LITERALS = {}  # a test file -> its top-level names bound once to a literal, each its constant's text
_compile, _open_file, _ONLY_AST = compile, open, _ast.PyCF_ONLY_AST


class _Probe:
    def method(self):
        return None


_METHOD = type(_Probe().method)


def content(code):
    """A digest of what a code object holds: its instructions, constants (nested code by its own
    content; a constant of another type by its type's name), names, arguments and flags. Two
    compilations of the same source under the same Python and pytest give the same digest. Linear in
    the code's size; a protected file's code is as large as its source."""
    h, todo = _sha256(), [code]
    while todo:
        c = todo.pop()
        h.update(c.co_code)
        h.update(_repr((c.co_names, c.co_varnames, c.co_freevars, c.co_cellvars, c.co_argcount,
                        c.co_kwonlyargcount, c.co_flags, _str(c.co_name))).encode("utf-8", "surrogatepass"))
        for k in c.co_consts:
            if _type(k) is _CODE:
                todo.append(k)
                h.update(b"<code>")
            else:
                h.update(constant(k).encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:16]


def constant(k):
    """A constant as text: a builtin scalar by its repr, a tuple or frozenset of them by theirs (a
    frozenset sorted, as its order follows hashes), anything else by its type alone."""
    kind = _type(k)
    if kind in _SIMPLE:
        return kind.__name__ + ":" + _repr(k) + ";"
    if kind is tuple:
        return "(" + "".join(constant(x) for x in k) + ")"
    if kind is frozenset:
        return "{" + "".join(_sorted(constant(x) for x in k)) + "}"
    return "<" + _str(kind.__name__) + ">"


def literals(filename):
    """A test file's top-level names bound to a literal (`EXPECTED = 5`, `CASES = ((2, 3, 5),)`) and
    bound once, each with its constant's text (`constant`): what the module's own code says the name
    holds, read from the file's source with the compiler bound before any project code ran. Names a
    test reads from its module are compared with the run before by value only when they are these: a
    value built by the code under test (`from calc import LIMIT`, `N = len(calc.ALL)`) may change with
    a fix; a literal a test file binds may not."""
    known = _LITERALS.get(filename)
    if known is None:
        known = _LITERALS[filename] = {}
        try:
            with _open_file(filename, "rb") as fh:
                tree = _compile(fh.read(), filename, "exec", _ONLY_AST)
        except Exception:
            return known
        counts = {}
        for node in tree.body:
            targets = node.targets if _type(node) is _ast.Assign else \
                [node.target] if _type(node) is _ast.AnnAssign and node.value is not None else []
            for t in targets:
                if _type(t) is _ast.Name:
                    counts[t.id] = counts.get(t.id, 0) + 1
                    value = _literal(node.value)
                    if value is not None:
                        known[t.id] = value
        for name, n in counts.items():
            if n > 1:
                known.pop(name, None)
    return known


def _literal(node):
    """The text of a literal expression (a constant, a signed number, a tuple of them), else None."""
    kind = _type(node)
    if kind is _ast.Constant:
        return constant(node.value)
    if kind is _ast.UnaryOp and _type(node.op) is _ast.USub and _type(node.operand) is _ast.Constant:
        value = node.operand.value
        return constant(-value) if _type(value) in (int, float, complex) else None
    if kind is _ast.Tuple:
        parts = [_literal(e) for e in node.elts]
        return None if None in parts else "(" + "".join(parts) + ")"
    return None


def keep_bindings(namespace):
    """Keep a test module's bindings as they are now (when collection ends); not a namespace holding a
    name that is not a `str` (any lookup there may run the key's code: `ran` says so instead)."""
    if _type(namespace) is dict and _id(namespace) not in _BOUND and _all(_type(k) is str for k in namespace):
        _BOUND[_id(namespace)] = (namespace, dict(namespace))


def bound(namespace):
    """The names of a test module rebound, added or deleted since its bindings were kept, sorted; a
    namespace not kept gives none. Compared by identity: no value's code runs."""
    kept = _BOUND.get(_id(namespace))
    if kept is None or kept[0] is not namespace:
        return []
    was = kept[1]
    out = [k for k in was if _dict_get(namespace, k, was) is not was[k]]
    out.extend(k for k in namespace if k not in was)
    return _sorted(_str(k) for k in out)


def unwrapped(fn, depth=10):
    """The functions a test's function wraps (`__wrapped__`, read from each function's own namespace),
    innermost last; each a Python function."""
    out = []
    while depth > 0 and _type(fn) is _FUNCTION and _type(fn.__dict__) is dict:
        inner = _dict_get(fn.__dict__, "__wrapped__")
        if _type(inner) is _METHOD:
            inner = inner.__func__
        if _type(inner) is not _FUNCTION:
            break
        out.append(inner)
        fn, depth = inner, depth - 1
    return out


def witness(fn, funcargs):
    """Begin hearing a test's call: `fn` the collected test function, `funcargs` the arguments pytest
    gives it (name -> value). Returns (what `heard` is asked with, the codes it looks for), or None when
    there is nothing to hear (not a Python function). The profiler keeps the frames of the test's code
    (entered with the item's own arguments) and of each function it wraps as they are entered, and is
    gone once it has one of each: the test's own body runs with whatever profiler there was. `heard`
    decides from the frames themselves once the call is over, against the codes its caller kept, so
    what the profiler holds (reachable from `sys.getprofile()`) decides nothing."""
    if _type(fn) is not _FUNCTION:
        return None
    outer = fn.__code__
    inner = _tuple(f.__code__ for f in unwrapped(fn))
    named = outer.co_varnames[:outer.co_argcount + outer.co_kwonlyargcount]
    args = _tuple((n, v) for n, v in (funcargs.items() if _type(funcargs) is dict else ()) if n in named)
    inner_ids = _frozenset(_id(c) for c in inner)
    mine, theirs, prev = [], [], _getprofile()
    entered = set()

    def hear(frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        if code is outer:
            local = frame.f_locals
            if _all(_dict_get(local, n, hear) is v for n, v in args):
                mine.append(frame)
        elif _id(code) in inner_ids:
            theirs.append(frame)
            entered.add(_id(code))
        if mine and _len(entered) == _len(inner_ids):
            with _suppress(Exception):  # refused (a candidate's frame below): tried again at the next
                _setprofile(prev)

    try:
        _setprofile(hear)
    except Exception:
        return None
    return (hear, prev, mine, theirs), (outer, inner)


def heard(watched):
    """End hearing a test's call (`watched`: what `witness` returned): whether a frame of the collected
    function's code, entered with the item's own arguments, ended at a return, and so did one of each
    function it wraps. Puts back the profiler there was, if this one is still set."""
    if watched is None:
        return True
    (hear, prev, mine, theirs), (outer, inner) = watched
    if _getprofile() is hear:
        with _suppress(Exception):  # refused: a candidate's frame below
            _setprofile(prev)
    kept = _tuple(theirs)
    return _any(_type(f) is _FRAME and f.f_code is outer and _returned(f) for f in _tuple(mine)) and \
        _all(_any(_type(f) is _FRAME and f.f_code is c and _returned(f) for f in kept) for c in inner)


def _returned(frame):
    """Whether a frame ended at a return: its last instruction is one (a frame left by an exception
    stops where it raised, a generator or a coroutine not run to its end at its yield or await)."""
    if _type(frame) is not _FRAME:
        return False
    at = frame.f_lasti
    code = frame.f_code.co_code
    return 0 <= at < _len(code) and code[at] in _RETURNS


def no_rewritten_bytecode(first, workspace):
    """pytest caches each test module's rewritten code as a `.pyc` in `__pycache__` and reads it back
    whenever the source's hash matches. In the workspace such a file may be the candidate's own,
    written in this run or a rolled-back one's (autod.checks.judge_guard, which keeps Python's own
    imports from reading them): so the workspace's test modules are rewritten from their source in
    every run, and no rewritten code of theirs is read or written. Called once, by the process's
    first recorder (`first`), with the workspace's path ending in a separator."""
    rewrite = sys.modules.get("_pytest.assertion.rewrite")
    read, write = getattr(rewrite, "_read_pyc", None), getattr(rewrite, "_write_pyc", None)
    if not first or not workspace or read is None or write is None:
        return  # a later recorder of this process (pytester's, a copy imported): the first one did it
    real, realpath = os.path.join(os.path.realpath(workspace), ""), os.path.realpath

    def in_source_tree(path):
        return path.startswith(workspace) or realpath(path).startswith(real)

    def _read_pyc(source, pyc, *args, **kwargs):
        if in_source_tree(_str(source)):
            return None
        return read(source, pyc, *args, **kwargs)

    def _write_pyc(state, co, source_hash, pyc, *args, **kwargs):
        if in_source_tree(_str(pyc)):
            return False
        return write(state, co, source_hash, pyc, *args, **kwargs)

    rewrite._read_pyc, rewrite._write_pyc = _read_pyc, _write_pyc
