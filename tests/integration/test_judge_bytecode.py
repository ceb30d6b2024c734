"""Code under test that plants bytecode the tests will load in place of their source never gets a failing
test judged fixed, in its own run or in any run after it was rolled back (autod.checks.judge_guard: no
module of the workspace is loaded from bytecode during a check; autod.checks.judge_plugin: pytest
rewrites the workspace's test modules from source).

The check runs the code under test with the workspace writable, and a `.pyc` is a file git ignores:
rolling the candidate back leaves it. Python and pytest load a cached `.pyc` whenever its header matches
the source (its hash, or its mtime and size), and the header is the source's to copy. The plantings are
generated: what is planted (pytest's assertion rewriter's cache of a test module; Python's cache of a
helper the test imports, timestamp or unchecked-hash; a package of bytecode without source that shadows
the helper) times when it counts (later in the same run: the test module importing the candidate is
collected first; or in a run after the candidate was rolled back). autod removes what a run planted
(autod.checks.bytecode). Each planting is then made again by hand, outside any check: autod's check
still does not load it, and plain pytest on the same rolled-back, still buggy tree passes the failing
test (the planting is potent).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
from pathlib import Path

import pytest
from daemon import PYTHON, git, make_repo
from test_judge_hostile import CHECK

from autod.act.reach import introduced
from autod.checks import bytecode
from autod.checks.outcome import Before, decide
from autod.checks.run import CheckResult, run_check
from autod.checks.sandbox import probe
from autod.verdict import Status

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not probe().works, reason="needs a working bubblewrap"),
]

BUGGY = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
FILES = {
    "src/calc.py": BUGGY,
    "tests/test_a.py": "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n",
    "tests/helper.py": "def expected():\n    return 5\n",
    "tests/test_z.py": "from calc import add\nfrom helper import expected\n\n\n"
                       "def test_add():\n    assert add(2, 3) == expected()\n",
}
FAILING = frozenset({"tests/test_z.py::test_add"})

# the candidate's import-time code: writes one planting, found from calc.py's own place
PLANT = '''
import importlib.machinery as _mach, importlib.util as _util, marshal as _marshal, os as _os, sys as _s
import tempfile as _tmp
from importlib import metadata as _meta

_TESTS = _os.path.join(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))), "tests")


def _code(name, text, as_path):
    fake = _os.path.join(_tmp.mkdtemp(), name + ".py")
    with open(fake, "w") as fh:
        fh.write(text)
    return _mach.SourceFileLoader(name, fake).get_code(name).replace(co_filename=as_path)


def _put(path, head, code):
    _os.makedirs(_os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(_util.MAGIC_NUMBER + head + _marshal.dumps(code))


def _plant():
    kind = %(kind)r
    tag = _s.implementation.cache_tag
    if kind == "the assertion rewriter's cache of a test module":
        src = _os.path.join(_TESTS, "test_z.py")
        with open(src, "rb") as fh:
            digest = _util.source_hash(fh.read())
        name = "test_z.%%s-py%%s-%%s.pyc" %% (tag, "test", _meta.version("py" + "test"))
        _put(_os.path.join(_TESTS, "__pycache__", name), (3).to_bytes(4, "little") + digest[:8],
             _code("test_z", "def test_add():\\n    pass\\n", src))
        return
    src = _os.path.join(_TESTS, "helper.py")
    code = _code("helper", "def expected():\\n    return -1\\n", src)
    if kind == "a package of bytecode without source":
        _put(_os.path.join(_TESTS, "helper", "__init__.pyc"), bytes(12), code)
        return
    pyc = _os.path.join(_TESTS, "__pycache__", "helper.%%s.pyc" %% tag)
    if kind == "Python's cache of a helper, unchecked hash":
        _put(pyc, (1).to_bytes(4, "little") + bytes(8), code)
    else:
        st = _os.stat(src)
        _put(pyc, (0).to_bytes(4, "little") + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
             + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little"), code)


_plant()


'''
KINDS = ("the assertion rewriter's cache of a test module", "Python's cache of a helper, timestamp",
         "Python's cache of a helper, unchecked hash", "a package of bytecode without source")
WHEN = ("later in the same run", "in a run after the rollback")


def check(repo: Path) -> CheckResult:
    return asyncio.run(run_check("tests", CHECK, repo))


def plain_pytest_passes_the_failing_test(repo: Path) -> bool:
    """pytest without autod, as the operator would run it: does the planting work there?"""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST", "_AUTOD"))}
    run = subprocess.run([PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                          "--rootdir", str(repo), "tests/test_z.py"], cwd=repo, env=env,
                         capture_output=True, text=True, timeout=120)
    return run.returncode == 0


@pytest.mark.parametrize(("kind", "when"), list(itertools.product(KINDS, WHEN)))
def test_no_planted_bytecode_makes_a_failing_test_fixed(tmp_path, kind, when):
    repo = make_repo(tmp_path / "repo", FILES)
    (repo / "pytest.ini").write_text("[pytest]\npythonpath = src tests\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "helpers on the path")
    base = check(repo)
    assert base.tests is not None and base.tests.failing == FAILING, base.output[-2000:]
    candidate = PLANT % {"kind": kind} + BUGGY
    assert introduced(BUGGY, candidate, world=False) == []  # plain Python: the tripwire sees none of it
    (repo / "src" / "calc.py").write_text(candidate)
    first = check(repo)
    runs = [first]
    git(repo, "checkout", "-q", "--", ".")  # rolled back: the planting, ignored or untracked, stays
    if when == "in a run after the rollback":
        runs.append(check(repo))
    for after in runs:
        decision = decide([after], Before(1, FAILING, {"tests": base}))
        assert decision.status is Status.ROLLED_BACK, (kind, when, decision, after.output[-1500:])
    assert bytecode.present(repo) == {}  # what the candidate planted was removed when its run ended
    # the planting is potent: planted again by hand, plain pytest passes the still buggy failing test
    (repo / "src" / "plant_now.py").write_text(candidate)
    subprocess.run([PYTHON, str(repo / "src" / "plant_now.py")], check=True, timeout=60)
    (repo / "src" / "plant_now.py").unlink()
    planted = bytecode.present(repo)
    assert planted, (kind, when)
    # autod's check does not load it (and leaves what it did not see written alone)
    again = check(repo)
    decision = decide([again], Before(1, FAILING, {"tests": base}))
    assert decision.status is Status.ROLLED_BACK, (kind, when, decision, again.output[-1500:])
    assert bytecode.present(repo) == planted
    assert plain_pytest_passes_the_failing_test(repo), (kind, when)
