"""The recorder's records are sealed (autod.checks.seal): code under test that keeps a failing test from
passing (a `SkipTest`, exit status 0; or the bug left in place) and then forges what the recorder
wrote, with plain Python the AST tripwire does not look for, is never judged fixed or improved.

The forgeries are composed from generated parts: how the record is forged (rebinding the functions a
recorder writes with; rewriting, replacing or deleting the record at exit; taking keys from the pipe
and sealing a record of its own; draining the pipe; swapping it for a file of known keys; importing a
fresh copy of the recorder and making it record every test passed, with and without the process's
"first" marker cleared), each alone and in seeded combinations, against real pytest runs under real
bubblewrap. Before the seal, the rebinding and the rewrites made a skipped test `fixed`.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest
from daemon import git, make_calc_repo
from test_judge_hostile import CHECK, FAILING, calc_repo_with, calc_workspace, check

from autod.act.reach import introduced
from autod.checks.outcome import Before, decide
from autod.checks.run import CheckResult, run_check
from autod.checks.sandbox import probe
from autod.config.models import CheckConfig
from autod.verdict import Status

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not probe().works, reason="needs a working bubblewrap"),
]

BUGGY = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
NOT_PASSING = {
    "skipped (exit 0)": BUGGY.replace("return a - b", "import unittest\n    raise unittest.SkipTest(0)"),
    "still failing": BUGGY,
}
# what every forgery shares: where the recorder writes, and a record's body made to say "passed"
HELPERS = '''import atexit, glob, hashlib, hmac, json, os
_OUT = os.environ.get("_AUTOD_JUDGE_OUT", "")
_KEYS = os.environ.get("_AUTOD_JUDGE_KEYS", "")
_stolen = []


def _records():
    return [p for p in glob.glob(os.path.join(_OUT, "results-*.json"))]


def _body(path):
    doc = json.load(open(path))
    return json.loads(doc["body"]) if "body" in doc else doc


def _passed(body):
    body = dict(body)
    body["tests"] = {t: "passed" for t in body.get("tests", {})}
    body["exitstatus"] = 0
    return body


def _steal():
    try:
        fd = os.open(_KEYS, os.O_RDONLY | os.O_NONBLOCK)
        data = os.read(fd, 65)
        os.close(fd)
        _stolen.append(bytes.fromhex(data[:64].decode()))
    except (OSError, ValueError):
        pass
'''
FORGERIES = {
    "rebinds what a recorder writes with": '''
_real_dump, _real_dumps, _real_write = json.dump, json.dumps, os.write


def _lie(text):
    for word in ("skipped", "failed", "error"):
        text = text.replace('"%s"' % word, '"passed"')
    return text


json.dump = lambda obj, fh, **kw: fh.write(_lie(_real_dumps(obj, **kw)))
json.dumps = lambda obj, **kw: _lie(_real_dumps(obj, **kw))
os.write = lambda fd, data: _real_write(fd, _lie(data.decode("latin-1")).encode("latin-1")) and len(data)
''',
    "rewrites the record's body at exit": '''
def _rewrite():
    for path in _records():
        doc = json.load(open(path))
        if "body" in doc:
            doc["body"] = json.dumps(_passed(json.loads(doc["body"])))
        else:
            doc = _passed(doc)
        json.dump(doc, open(path, "w"))


atexit.register(_rewrite)
''',
    "replaces the record with an unsealed one at exit": '''
def _replace():
    for path in _records():
        body = _passed(_body(path))
        body["complete"] = True
        json.dump(body, open(path, "w"))


atexit.register(_replace)
''',
    "deletes the record at exit": '''
atexit.register(lambda: [os.remove(p) for p in _records()])
''',
    "seals a record of its own with a key it took": '''
_steal()


def _own():
    if not _stolen or not _records():
        return
    key = _stolen[0]
    body = json.dumps(_passed(_body(_records()[0])), sort_keys=True)
    fp = hashlib.sha256(key).hexdigest()[:16]
    mac = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
    json.dump({"seal": fp, "mac": mac, "body": body}, open(os.path.join(_OUT, "results-%s.json" % fp), "w"))


atexit.register(_own)
''',
    "drains the key pipe": '''
for _ in range(100):
    _steal()
''',
    "swaps the key pipe for a file of known keys": '''
try:
    os.remove(_KEYS)
    open(_KEYS, "w").write(("ab" * 32 + "\\n") * 64)
except OSError:
    pass
''',
    "makes a fresh copy of the recorder record every test passed": '''
def _copy():
    if not _records():
        return
    tests = _passed(_body(_records()[0]))["tests"]
    import autod_verdicts
    autod_verdicts._state["tests"].update(tests)
    autod_verdicts._state["collected"].update(tests)
    autod_verdicts._record(0, True)


atexit.register(_copy)
''',
    "clears the first marker, then makes a fresh copy record every test passed": '''
def _first_copy():
    if not _records():
        return
    tests = _passed(_body(_records()[0]))["tests"]
    os.environ.pop("_AUTOD_JUDGE_FIRST", None)
    import autod_verdicts
    autod_verdicts._state["tests"].update(tests)
    autod_verdicts._state["collected"].update(tests)
    autod_verdicts._record(0, True)


atexit.register(_first_copy)
''',
}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CheckResult]:
    return calc_workspace(tmp_path_factory, "sealed")


def candidates() -> list[tuple[str, str]]:
    """(what it does, calc.py): each forgery alone, and seeded combinations, over each way of not
    passing."""
    combos = [(name,) for name in FORGERIES]
    rng = random.Random(11)
    combos += [tuple(rng.sample(sorted(FORGERIES), rng.randint(2, 4))) for _ in range(6)]
    out = []
    for how, code in NOT_PASSING.items():
        for combo in combos:
            out.append((f"{how}; " + "; ".join(combo), HELPERS + "".join(FORGERIES[c] for c in combo) + code))
    return out


def test_no_forged_record_makes_a_test_that_did_not_pass_fixed_or_improved(workspace):
    repo, base = workspace
    seen = set()
    try:
        for what, code in candidates():
            assert introduced(BUGGY, code, world=False) == [], what  # plain Python: the tripwire is silent
            (repo / "src" / "calc.py").write_text(code)
            after = check(repo)
            status = decide([after], Before(1, FAILING, {"tests": base})).status
            assert status is Status.ROLLED_BACK, (what, after.exit_code, after.output[-1500:])
            seen.add(after.exit_code)
            git(repo, "checkout", "-q", "--", ".")
    finally:
        git(repo, "checkout", "-q", "--", ".")
        git(repo, "clean", "-qfdx")
    assert seen >= {0, 1}  # both ways of not passing ran: a skip exits 0, a failure 1


def test_the_real_fix_with_the_same_helpers_is_still_fixed(workspace):
    """The positive control: plain code that imports and registers the same things, and fixes the bug."""
    repo, base = workspace
    try:
        (repo / "src" / "calc.py").write_text(HELPERS + "atexit.register(lambda: None)\n"
                                              + BUGGY.replace("a - b", "a + b"))
        after = check(repo)
        status = decide([after], Before(1, FAILING, {"tests": base})).status
        assert status is Status.FIXED, after.output[-1500:]
    finally:
        git(repo, "checkout", "-q", "--", ".")


PLUGIN_FIRST = HELPERS + '''
for _ in range(100):  # every key still in the pipe, before the recorder would take its own
    _steal()


'''
PLUGIN_FIRST += '''
def pytest_unconfigure(config):
    tests = {"tests/test_calc.py::test_add": "passed", "tests/test_calc.py::test_mul": "passed"}
    for i, key in enumerate(_stolen):
        body = {"tests": tests if i == 0 else {}, "collected": sorted(tests) if i == 0 else [],
                "collect_errors": [], "deselected": [], "exitstatus": 0, "complete": True,
                "worker": False, "session": i == 0, "pid": os.getpid(), "first": i == 0}
        text = json.dumps(body, sort_keys=True)
        fp = hashlib.sha256(key).hexdigest()[:16]
        mac = hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
        with open(os.path.join(_OUT, "results-%s.json" % fp), "w") as fh:
            json.dump({"seal": fp, "mac": mac, "body": text}, fh)
'''


def test_a_project_plugin_pytest_loads_before_the_recorder_cannot_take_its_key_first(tmp_path):
    """The check names a plugin of the project's own (`PYTEST_PLUGINS`, as an operator may): pytest
    imports those before autod's, so autod's recorder is also named by `-p` in PYTEST_ADDOPTS, which
    pytest loads first. The project's plugin, changed to take every key in the pipe and seal records of
    every test passed, finds the recorder's key already taken: its records are one more first recorder
    of the process, and the run is a failed run. Named only in PYTEST_PLUGINS, the recorder found the
    pipe empty, and the forged records were the run's: `fixed`."""
    repo = make_calc_repo(tmp_path / "repo")
    check_cfg = CheckConfig(run=CHECK.run, timeout_s=120, sandbox="bwrap", env={"PYTEST_PLUGINS": "projplug"})
    (repo / "projplug.py").write_text("def pytest_configure(config):\n    pass\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the project's own plugin")
    base = asyncio.run(run_check("tests", check_cfg, repo))
    assert base.tests is not None and base.tests.failing == FAILING, base.output[-2000:]
    (repo / "projplug.py").write_text(PLUGIN_FIRST)
    (repo / "src" / "calc.py").write_text(NOT_PASSING["skipped (exit 0)"])
    assert introduced(BUGGY, (repo / "src" / "calc.py").read_text(), world=False) == []
    after = asyncio.run(run_check("tests", check_cfg, repo))
    assert after.exit_code == 0  # the skip: pytest's own status says nothing is wrong
    status = decide([after], Before(1, FAILING, {"tests": base})).status
    assert status is Status.ROLLED_BACK, after.output[-1500:]


KEY_READER = HELPERS + '''
import autod_verdicts  # imported while the project's conftest loads: the recorder's module, if it is there
_found = getattr(autod_verdicts, "_KEY", None)


def _reseal():
    if not _found:
        return
    for path in _records():
        body = json.dumps(_passed(_body(path)), sort_keys=True)
        fp = hashlib.sha256(_found).hexdigest()[:16]
        mac = hmac.new(_found, body.encode(), hashlib.sha256).hexdigest()
        json.dump({"seal": fp, "mac": mac, "body": body}, open(path, "w"))


atexit.register(_reseal)
'''


def test_code_under_test_a_conftest_imports_finds_no_key_in_the_recorder_s_module(tmp_path):
    """The project's conftest imports the package under test when it loads, which is before pytest
    configures its plugins. The candidate imports `autod_verdicts` then, takes the recorder's key and
    seals a rewritten record at exit. The recorder leaves `sys.modules` the moment it is registered, so
    the module it gets is a fresh copy with no key, and the skip stays a skip."""
    repo, base = calc_repo_with(tmp_path, {
        "tests/conftest.py": "import pathlib, sys\n"
                             "sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / 'src'))\n"
                             "import calc  # noqa: F401  (the project's own fixtures need it)\n",
    }, "a conftest that imports the code under test")
    (repo / "src" / "calc.py").write_text(KEY_READER + NOT_PASSING["skipped (exit 0)"])
    assert introduced(BUGGY, (repo / "src" / "calc.py").read_text(), world=False) == []
    after = check(repo)
    assert after.exit_code == 0 and after.tests is not None, after.output[-1500:]
    assert after.tests.outcomes.get("tests/test_calc.py::test_add") == "skipped"
    status = decide([after], Before(1, FAILING, {"tests": base})).status
    assert status is Status.ROLLED_BACK, after.output[-1500:]
