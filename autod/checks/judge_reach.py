"""The candidate's own code may not reach into the process that judges it: an audit hook, in every
Python a candidate's check starts.

The code under test runs in the test runner's process, so with plain Python it can reach the runner and
the tests that judge it, and make a failing test pass with the bug in place: a tracer or profiler that
rewrites the runner's frame locals or the test module's globals as they run, `gc` to find the runner's
objects, a test function's `__code__` swapped for an empty one, an object's `__class__` swapped for one
that lies, a code object built to pass for the runner's own. The AST tripwire (autod.act.reach) names
direct spellings of these; names assembled at run time pass it.

So a candidate's checks run with an audit hook (PEP 578: once added, never removed) that refuses these
operations whenever a file the candidate changed has a frame on the calling thread's stack, however
deep: called directly, through `exec`, or laundered through any helper of the standard library, an
installed package or the project. The refusal is an exception in the candidate's code: its test fails,
and so does the candidate. What is refused:

- `sys.settrace`, `sys.setprofile`, `sys._current_frames` (tracing other frames, or taking them);
- `gc.get_objects`, `gc.get_referrers`, `gc.get_referents` (finding any object of the process);
- setting a function's `__code__`; building a code object (`code.__new__`, `CodeType.replace`);
- opening a process's memory (`/proc/self/mem`, which writes what `ctypes` would);
- in the changed file's own lines only (an installed library it imports may do these for itself):
  setting an object's `__class__`, and `ctypes` loading or reaching memory (`ctypes.dlsym`, `.cdata`, ...).

A project's own code is never refused: the run before any candidate, and every file the candidate left
as it was, run as always (the hook looks for the changed files' frames only). Copied as
`autod_reach.py` into the check's read-only library directory (autod.checks.pertest) and installed
by the import guard (autod.checks.judge_guard) at start-up, before any other code of the process, when
`$_AUTOD_JUDGE_CHANGED` names the candidate's files. Standard library only, syntax old Pythons read;
everything it uses is bound in the hook's closure, and the guard takes the module out of `sys.modules`
once it is installed.
"""

import json
import os
import re
import sys

# event -> where a changed file's frame makes it refused: "anywhere" on the stack (the standard library
# has helpers that do these on a caller's behalf: bdb and profile set tracers, so who called matters,
# not who did it), or only as the "innermost" frame that is a file (an installed library a changed
# module imports may load a shared library for itself); "set": decided by the attribute set
EVENTS = {
    **dict.fromkeys(("sys.settrace", "sys.setprofile", "sys._current_frames", "gc.get_objects",
                     "gc.get_referrers", "gc.get_referents", "code.__new__"), "anywhere"),
    **dict.fromkeys(("ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.cdata",
                     "ctypes.cdata/buffer", "ctypes.addressof", "ctypes.call_function", "ctypes.string_at",
                     "ctypes.wstring_at"), "innermost"),
    "object.__setattr__": "set",  # (obj, name, value): neither attribute below can be deleted
    "open": "memory",  # (path, mode, flags): refused only for a process's memory (`is_memory`)
}
ATTRIBUTES = {"__code__": "anywhere", "__class__": "innermost"}


_PROC_MEM = re.compile(r"/proc/[^/]+(/task/[^/]+)?/mem")


def is_memory(path, realpath=os.path.realpath, fspath=os.fspath, fsdecode=os.fsdecode):
    """Whether opening `path` opens a process's memory (`/proc/self/mem`, by any spelling that resolves
    there), or may (a relative `mem`: it may be opened relative to a directory descriptor of `/proc`,
    which the event does not show). A descriptor number opens nothing new."""
    if isinstance(path, int):
        return False
    try:
        name = fsdecode(fspath(path))
    except (TypeError, ValueError):
        return False
    if not name.startswith("/") and name.rstrip("/").split("/")[-1] == "mem":
        return True
    return _PROC_MEM.fullmatch(realpath(name)) is not None


def changed_files(text, workspace):
    """The absolute paths (as given, and resolved) of the candidate's changed files, from the JSON list
    of workspace-relative paths in `text`; empty when there is none or it is not such a list."""
    try:
        rels = json.loads(text)
    except ValueError:
        return frozenset()
    if not isinstance(rels, list) or not workspace:
        return frozenset()
    out = set()
    for rel in rels:
        if isinstance(rel, str) and rel and not os.path.isabs(rel):
            path = os.path.normpath(os.path.join(workspace, rel))
            out.update((path, os.path.realpath(path)))
    return frozenset(out)


def install(changed):
    """Add the hook refusing the operations above to the candidate's `changed` files."""
    if not changed:
        return
    import threading

    getframe, cwd, join, isabs = sys._getframe, os.getcwd(), os.path.join, os.path.isabs
    normpath, realpath = os.path.normpath, os.path.realpath
    seen = {}  # a frame's file name -> whether it is one of the changed files
    events, attributes, refusal, memory = dict(EVENTS), dict(ATTRIBUTES), PermissionError, is_memory
    inside = threading.local()  # the hook's own look at the stack raises events too: not looked at

    def is_changed(name):
        hit = seen.get(name)
        if hit is None:
            path = normpath(name if isabs(name) else join(cwd, name))
            hit = seen[name] = path in changed or realpath(path) in changed
        return hit

    def changed_frame(deep):
        """The changed file with a frame on the stack (`deep`), or whose frame is the innermost one that
        is a file (code run by `exec` is not: it was called from a file); None."""
        frame = getframe(3)
        while frame is not None:
            name = frame.f_code.co_filename
            if is_changed(name):
                return name
            if not deep and not name.startswith("<"):
                return None
            frame = frame.f_back
        return None

    def look(event, args):
        kind = events.get(event)
        if kind is None:
            return
        what = event
        if kind == "memory":
            if not memory(args[0]):
                return
            kind, what = "anywhere", "open " + str(args[0]) + " (a process's memory)"
        if kind == "set":
            kind, what = attributes.get(args[1]), "setting " + str(args[1])
            if kind is None:
                return
        where = changed_frame(kind == "anywhere")
        if where is not None:
            raise refusal("autod: code a candidate changed (" + where + ") may not use " + what +
                          " while its checks run: it reaches into the test runner that judges it")

    def hook(event, args):
        if getattr(inside, "on", False):
            return
        inside.on = True
        try:
            look(event, args)
        finally:
            inside.on = False

    sys.addaudithook(hook)


if __name__ == "autod_reach":
    install(changed_files(os.environ.get("_AUTOD_JUDGE_CHANGED", ""), os.environ.get("_AUTOD_JUDGE_WS", "")))
