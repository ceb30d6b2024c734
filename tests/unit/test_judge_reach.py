"""The reach guard (autod.checks.judge_reach), in a real Python with its audit hook: every refused
operation, reached every way (from the changed file itself, from code it runs through `exec`, through a
helper in a file it did not change), is refused exactly when the rule says, and never for code the
candidate did not change. Generated: operations x ways, in one child process."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

from autod.checks import judge_reach

OPS = {  # name -> (statement, refused wherever a changed frame is on the stack)
    "sys.settrace": ("sys.settrace(None)", True),
    "sys.setprofile": ("sys.setprofile(None)", True),
    "sys._current_frames": ("sys._current_frames()", True),
    "gc.get_objects": ("gc.get_objects()", True),
    "gc.get_referrers": ("gc.get_referrers(sys)", True),
    "gc.get_referents": ("gc.get_referents(sys)", True),
    "code.replace": ("(lambda: 0).__code__.replace(co_name='x')", True),
    "__code__ set": ("f = lambda: 0\nf.__code__ = (lambda: 1).__code__", True),
    "__class__ set": ("class A: pass\nclass B: pass\na = A()\na.__class__ = B", False),
    "ctypes.addressof": ("import ctypes\nctypes.addressof(ctypes.c_int(1))", False),
    "/proc/self/mem": ("open('/proc/self/mem', 'rb').close()", True),
    "a process's memory by its pid, with os.open": (
        "import os\np = os.getpid()\nos.close(os.open('/proc/%d/task/%d/mem' % (p, p), os.O_RDONLY))", True),
}
ALLOWED = {  # what changed code still does freely
    "a class attribute": "class A: pass\nA.x = 1",
    "a function's defaults": "f = lambda a=1: a\nf.__defaults__ = (2,)",
    "a namedtuple with defaults": "import collections\ncollections.namedtuple('P', 'a b', defaults=(0,))",
    "frames read": "sys._getframe().f_back",
    "another file of /proc": "open('/proc/self/maps', 'rb').close()",
    "a file named like it elsewhere": "import tempfile, os\nd = tempfile.mkdtemp()\n"
                                     "open(os.path.join(d, 'mem'), 'w').close()",
}
CHANGED = '''import gc, sys
import {unchanged} as unchanged


def direct(stmt):
    exec(compile(stmt, __file__, "exec"), {{"sys": sys, "gc": gc}})


def via_exec(stmt):
    exec(stmt, {{"sys": sys, "gc": gc}})


def via_helper(stmt):
    unchanged.run(stmt)
'''
UNCHANGED = '''import gc, sys


def run(stmt):
    exec(compile(stmt, __file__, "exec"), {"sys": sys, "gc": gc})


def run_as(stmt, filename):
    exec(compile(stmt, filename, "exec"), {"sys": sys, "gc": gc})
'''


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _elsewhere(where: Path, fn: Any, *args: Any) -> None:
    here = os.getcwd()
    os.chdir(where)
    try:
        fn(*args)
    finally:
        os.chdir(here)


def run_cases(tmp_path: Path) -> dict[str, str]:
    """Every case run every way, in this process, with the hook installed for a changed file of a
    workspace of its own (a hook is never removed: it refuses nothing to any other file)."""
    cases = {**{k: v[0] for k, v in OPS.items()}, **{"allowed: " + k: v for k, v in ALLOWED.items()}}
    ws = tmp_path / "ws"
    ws.mkdir()
    tag = f"reach_{abs(hash(str(tmp_path)))}"
    (ws / f"{tag}_unchanged.py").write_text(UNCHANGED)
    (ws / f"{tag}_changed.py").write_text(CHANGED.format(unchanged=f"{tag}_unchanged"))
    sys.path.insert(0, str(ws))
    try:
        unchanged = _load(f"{tag}_unchanged", ws / f"{tag}_unchanged.py")
        changed = _load(f"{tag}_changed", ws / f"{tag}_changed.py")
    finally:
        sys.path.remove(str(ws))
    alias = tmp_path / "alias"
    alias.symlink_to(ws)
    judge_reach.install(judge_reach.changed_files(json.dumps([f"{tag}_changed.py"]), str(ws)))
    file = f"{tag}_changed.py"
    ways = {
        "direct": changed.direct, "exec": changed.via_exec, "helper": changed.via_helper,
        "unchanged": unchanged.run,
        # the changed file's code, its only frame, run by unchanged code
        "called from unchanged code": lambda stmt: unchanged.run_as(stmt, str(ws / file)),
        # ... named relative to the working directory, or through a link to the workspace
        "relative": lambda stmt: unchanged.run_as(stmt, os.path.relpath(ws / file)),
        # ... relative to where the process started, read after it changed directory
        "relative, after a chdir": lambda stmt: _elsewhere(tmp_path, unchanged.run_as, stmt,
                                                           os.path.join(".", os.path.relpath(ws / file))),
        "through a link": lambda stmt: unchanged.run_as(stmt, str(alias / file)),
    }
    out = {}
    for name, stmt in cases.items():
        for way, fn in ways.items():
            try:
                fn(stmt)
                out[f"{name}|{way}"] = "ran"
            except PermissionError as exc:
                refused = "autod: code a candidate changed" in str(exc)
                out[f"{name}|{way}"] = "refused" if refused else repr(exc)
                if refused and name.endswith(" set"):  # the message names what was set
                    assert f"may not use setting {name.split()[0]}" in str(exc), str(exc)
                if refused and ("memory" in name or "mem" in name.split("/")):  # ... or the path opened
                    assert "/mem (a process's memory)" in str(exc), str(exc)
    return out


def test_each_reach_is_refused_to_changed_code_however_it_is_called_and_never_to_the_rest(tmp_path: Path):
    got = run_cases(tmp_path)
    for name, (_, anywhere) in OPS.items():
        # `direct` compiles under the changed file's own name; `exec` runs as <string>, called from it
        assert got[f"{name}|direct"] == "refused", (name, got[f"{name}|direct"])
        assert got[f"{name}|exec"] == "refused", (name, got[f"{name}|exec"])
        want = "refused" if anywhere else "ran"
        assert got[f"{name}|helper"] == want, (name, got[f"{name}|helper"])
        assert got[f"{name}|unchanged"] == "ran", (name, got[f"{name}|unchanged"])
        for way in ("called from unchanged code", "relative", "relative, after a chdir", "through a link"):
            assert got[f"{name}|{way}"] == "refused", (name, way, got[f"{name}|{way}"])
    for name in ALLOWED:
        for way in ("direct", "exec", "helper", "unchanged", "called from unchanged code"):
            assert got[f"allowed: {name}|{way}"] == "ran", (name, way, got[f"allowed: {name}|{way}"])


def test_the_changed_files_are_read_from_a_json_list_of_relative_paths_only(tmp_path: Path):
    ws = str(tmp_path)
    assert judge_reach.changed_files('["src/a.py", "./b.py"]', ws) >= {f"{ws}/src/a.py", f"{ws}/b.py"}
    for bad in ("", "not json", '{"a": 1}', '["/etc/passwd", 3, ""]', "[]"):
        assert judge_reach.changed_files(bad, ws) == frozenset(), bad
    assert judge_reach.changed_files('["a.py"]', "") == frozenset()


def test_a_process_s_memory_is_told_by_where_a_path_resolves(tmp_path):
    (tmp_path / "link").symlink_to("/proc/self/mem")
    (tmp_path / "proc").symlink_to("/proc/self")
    pid = os.getpid()
    for path in ("/proc/self/mem", f"/proc/{pid}/mem", f"/proc/{pid}/task/{pid}/mem", "/proc/thread-self/mem",
                 b"/proc/self/mem", Path("/proc/self/mem"), str(tmp_path / "link"),
                 str(tmp_path / "proc" / "mem"), "mem", "./mem", "task/1/mem", "/proc/self/../self/mem"):
        assert judge_reach.is_memory(path), path
    for path in ("/proc/self/maps", "/proc/self/memx", str(tmp_path / "mem"), "memo", 3, None, "/dev/mem2",
                 "/proc/self/mem/x"):
        assert not judge_reach.is_memory(path), path
