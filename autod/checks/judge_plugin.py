"""autod's per-test recorder: a pytest plugin that writes what each test did, for the judge.

Copied as `autod_verdicts.py` into a read-only directory first on a check's PYTHONPATH and loaded by
`PYTEST_PLUGINS=autod_verdicts`, so every pytest the check starts (directly, through `make`, a script,
or `python -m pytest`) loads it from autod, never from the workspace. It runs inside the project's own
Python: standard library and pytest only, and syntax old Pythons read.

At the end of the session it writes `results-<pid>.json` into `$_AUTOD_JUDGE_OUT` (a directory autod
owns, outside the workspace): {"tests": {nodeid: outcome}, "collected": [...], "collect_errors": [...],
"deselected": [...], "exitstatus": N, "complete": true}. An outcome is the worst of a test's phases:
passed < xpassed < xfailed < skipped < failed < error (a failing setup or teardown). A session that
ends before this hook (a crash, `os._exit`, a `SystemExit` at import) writes nothing, and autod reads
no file as a failed run, never a pass. Under pytest-xdist the controller writes, the workers do not.
"""

import json
import os

_RANK = {"passed": 0, "xpassed": 1, "xfailed": 2, "skipped": 3, "failed": 4, "error": 5}
_state = {"tests": {}, "collected": set(), "errors": [], "deselected": [], "worker": False}


def _outcome(report):
    when = getattr(report, "when", "call")
    wasxfail = hasattr(report, "wasxfail")
    if report.outcome == "passed":
        return "xpassed" if wasxfail and when == "call" else "passed"
    if report.outcome == "skipped":
        return "xfailed" if wasxfail else "skipped"
    if report.outcome == "failed":
        return "failed" if when == "call" else "error"
    return None  # "rerun" and other plugins' outcomes: the final report decides


def pytest_configure(config):
    _state["worker"] = hasattr(config, "workerinput")


def pytest_runtest_logreport(report):
    outcome = _outcome(report)
    if outcome is None:
        return
    tests = _state["tests"]
    now = tests.get(report.nodeid)
    if now is None or _RANK[outcome] > _RANK[now]:
        tests[report.nodeid] = outcome


def pytest_collectreport(report):
    if report.failed:
        _state["errors"].append(report.nodeid or "<session>")


def pytest_deselected(items):
    _state["deselected"].extend(getattr(i, "nodeid", str(i)) for i in items)


def pytest_collection_finish(session):
    _state["collected"].update(i.nodeid for i in session.items)


def pytest_sessionfinish(session, exitstatus):
    out = os.environ.get("_AUTOD_JUDGE_OUT")
    if not out or _state["worker"]:
        return
    doc = {
        "tests": _state["tests"],
        "collected": sorted(_state["collected"]),
        "collect_errors": _state["errors"],
        "deselected": _state["deselected"],
        "exitstatus": int(exitstatus),
        "complete": True,
    }
    path = os.path.join(out, "results-" + str(os.getpid()) + ".json")
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as fh:
            json.dump(doc, fh)
        os.replace(tmp, path)
    except OSError:
        pass  # no file: autod reads the run as one that reported nothing


try:  # pytest-xdist's controller learns each worker's collection through this hook
    import pytest

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(node, ids):
        _state["collected"].update(ids)

except Exception:  # an old pytest without hookimpl: the controller's collection is then unknown
    pass
