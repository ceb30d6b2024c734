"""autod's per-test line recorder: a pytest plugin copied next to its results and loaded with `-p`.

It runs inside the project's own Python (not autod's), so it imports nothing beyond the standard
library and pytest, and keeps to syntax old Pythons read. Loaded as
`pytest -p autod_spectrum --autod-spectrum=DIR`, it reads DIR/select.json ({"files": [...]}),
collects only those test files, records which lines of files under the rootdir each test executes
(sys.monitoring on 3.12+, sys.settrace before), and writes DIR/spectrum.json:
{"tests": {nodeid: {"failed": bool, "lines": {abs_path: [line, ...]}}}}.
"""

import json
import os
import sys
import threading

import pytest

MAX_LINES = 2000000  # recorded (file, line) pairs over the whole run, at most
# pytest's failure report: a failed `assert a == b` calls repr() (and the comparison's explanation) of
# the operands inside the test's call, so a project's __repr__ would look run by the failing tests
# alone and top the ranking. Code reached from these frames is the report's, not the test's.
_REPORTING = tuple(os.sep + os.path.join("_pytest", d) + os.sep for d in ("assertion", "_io"))

_state = {"root": "", "out": "", "files": None, "current": None, "tests": {}, "total": 0, "tool": None}


def pytest_addoption(parser):
    parser.addoption("--autod-spectrum", action="store", default=None, help="autod: spectrum output dir")


def pytest_configure(config):
    out = config.getoption("--autod-spectrum")
    if not out:
        return
    _state["out"] = out
    _state["root"] = os.path.realpath(str(config.rootpath))
    try:
        with open(os.path.join(out, "select.json"), encoding="utf-8") as fh:
            files = json.load(fh).get("files") or []
        _state["files"] = {os.path.realpath(os.path.join(_state["root"], f)) for f in files}
    except (OSError, ValueError):
        _state["files"] = None
    _start_tool()


def pytest_ignore_collect(collection_path, config):
    selected = _state["files"]
    path = str(collection_path)
    if not selected or not path.endswith(".py") or os.path.basename(path) == "conftest.py":
        return None
    return True if os.path.realpath(path) not in selected else None


def _wanted(filename):
    root = _state["root"]
    return bool(root) and filename.startswith(root) and not filename.startswith(_state["out"])


def _reporting(frame):
    """Whether `frame` runs for pytest's failure report (a caller is pytest's assertion explainer)."""
    while frame is not None:
        name = frame.f_code.co_filename
        if _REPORTING[0] in name or _REPORTING[1] in name:
            return True
        frame = frame.f_back
    return False


def _record(filename, line):
    cur = _state["current"]
    if cur is None or _state["total"] >= MAX_LINES:
        return
    lines = cur.setdefault(filename, set())
    if line not in lines:
        lines.add(line)
        _state["total"] += 1


# -- recording: sys.monitoring (3.12+) ----------------------------------------------------------
def _start_tool():
    mon = getattr(sys, "monitoring", None)
    if mon is None:
        return
    for tool in (mon.COVERAGE_ID, 3, 4):
        if mon.get_tool(tool) is None:
            mon.use_tool_id(tool, "autod-spectrum")
            _state["tool"] = tool
            break
    else:
        return

    def on_line(code, line):
        if _state["current"] is not None and _wanted(code.co_filename):
            if _reporting(sys._getframe(1)):
                return None  # not now: the line may still run for the test itself
            _record(code.co_filename, line)
            return mon.DISABLE  # re-enabled for the next test by restart_events()
        if not _wanted(code.co_filename):
            return mon.DISABLE
        return None

    mon.register_callback(_state["tool"], mon.events.LINE, on_line)
    mon.set_events(_state["tool"], mon.events.LINE)


# -- recording: sys.settrace (before 3.12) ------------------------------------------------------
def _tracer(frame, event, arg):
    if event != "call" or not _wanted(frame.f_code.co_filename) or _reporting(frame.f_back):
        return None
    return _local


def _local(frame, event, arg):
    if event == "line":
        _record(frame.f_code.co_filename, frame.f_lineno)
    return _local


def _begin():
    _state["current"] = {}
    if _state["tool"] is not None:
        sys.monitoring.restart_events()
    elif getattr(sys, "monitoring", None) is None:
        threading.settrace(_tracer)
        sys.settrace(_tracer)


def _end():
    if _state["tool"] is None and getattr(sys, "monitoring", None) is None:
        sys.settrace(None)
        threading.settrace(None)
    cur, _state["current"] = _state["current"], None
    return cur or {}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if _state["out"]:
        _begin()  # fixtures run library code too: their lines count for the test


def pytest_runtest_makereport(item, call):
    # the test's lines end with its call, or with a setup that failed (then there is no call)
    if _state["out"] and _state["current"] is not None and (call.when == "call" or call.excinfo):
        lines = _end()
        entry = _state["tests"].setdefault(item.nodeid, {"failed": False, "lines": {}})
        entry["lines"] = {f: sorted(ls) for f, ls in lines.items()}


def pytest_runtest_logreport(report):
    if _state["out"] and report.failed:
        _state["tests"].setdefault(report.nodeid, {"failed": False, "lines": {}})["failed"] = True


def pytest_sessionfinish(session, exitstatus):
    if not _state["out"]:
        return
    if _state["tool"] is not None:
        sys.monitoring.set_events(_state["tool"], 0)
        sys.monitoring.free_tool_id(_state["tool"])
    tmp = os.path.join(_state["out"], "spectrum.json.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump({"tests": _state["tests"]}, fh)
    os.replace(tmp, os.path.join(_state["out"], "spectrum.json"))
