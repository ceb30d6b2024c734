"""The judge holds by invariant, with real pytest runs under real bubblewrap: whatever a candidate makes
the code under test do, or whichever module it stands in for, a test that failed is fixed only when
pytest reports it passed.

The stand-ins are generated: a probe pytest run lists every top-level module loaded by the time it has
collected (`sys.modules`), and a file of each name is planted where `python -m pytest`, pytest's
rootdir insertion and the test's own `sys.path` would find it first.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon import CALC_BUGGY, PYTHON, SET_NAMED_TESTS, git, make_calc_repo

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

CHECK = CheckConfig(run=f"{PYTHON} -m pytest -q -p no:cacheprovider tests", timeout_s=120, sandbox="bwrap")
FAILING = frozenset({"tests/test_calc.py::test_add"})
PROBE = (
    "import sys\n\n\ndef pytest_collection_finish(session):\n"
    "    names = sorted({m.split('.')[0] for m in list(sys.modules)})\n"
    "    open('modules.txt', 'w').write('\\n'.join(names))\n"
)


def check(repo: Path) -> CheckResult:
    return asyncio.run(run_check("tests", CHECK, repo))


def calc_workspace(tmp_path_factory: pytest.TempPathFactory, name: str) -> tuple[Path, CheckResult]:
    """The calc repository and its check's run before any candidate: `test_add` failing."""
    repo = make_calc_repo(tmp_path_factory.mktemp(name) / "repo")
    base = check(repo)
    assert base.tests is not None and base.tests.failing == FAILING, base.output[-2000:]
    return repo, base


def calc_repo_with(root: Path, files: dict[str, str], why: str) -> tuple[Path, CheckResult]:
    """The calc repository with `files` (relative path -> text) committed (`why`), and its check's run
    before any candidate: `test_add` failing."""
    repo = make_calc_repo(root / "repo")
    for rel, text in files.items():
        (repo / rel).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", why)
    base = check(repo)
    assert base.tests is not None and base.tests.failing == FAILING, base.output[-2000:]
    return repo, base


@contextlib.contextmanager
def planted(repo: Path, code: str) -> Iterator[None]:
    """`code` as the code under test (the bug still in it, nothing the AST tripwire names), the buggy
    module put back afterwards."""
    assert "return a - b" in code and introduced(CALC_BUGGY, code, world=False) == [], code[:200]
    (repo / "src" / "calc.py").write_text(code)
    try:
        yield
    finally:
        (repo / "src" / "calc.py").write_text(CALC_BUGGY)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CheckResult]:
    return calc_workspace(tmp_path_factory, "judge")


def verdict(repo: Path, base: CheckResult) -> tuple[Status, CheckResult]:
    after = check(repo)
    return decide([after], Before(1, FAILING, {"tests": base})).status, after


def clean(repo: Path) -> None:
    git(repo, "checkout", "-q", "--", ".")
    git(repo, "clean", "-qfdx")


@pytest.fixture(scope="module")
def loaded_modules(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Every top-level module a real pytest run has loaded by the time it has collected."""
    repo = make_calc_repo(tmp_path_factory.mktemp("probe") / "repo")
    (repo / "tests" / "conftest.py").write_text(PROBE)
    run = check(repo)
    names = (repo / "modules.txt").read_text().split()
    assert run.tests is not None and len(names) > 50, run.output[-2000:]
    own = {"calc", "conftest", "test_calc", "tests", "__main__", "sitecustomize", "autod_verdicts"}
    return [n for n in names if n.isidentifier() and n not in own]


def plant(repo: Path, name: str, body: str) -> None:
    for where in ("", "tests", "src"):  # cwd (python -m), rootdir/tests (pytest), the test's own path
        (repo / where / f"{name}.py").write_text(body)


def test_no_stand_in_for_any_loaded_module_makes_a_failing_test_pass(workspace, loaded_modules):
    repo, base = workspace
    try:
        for name in loaded_modules:
            plant(repo, name, "raise SystemExit(0)\n")
        status, after = verdict(repo, base)
        # none of the stand-ins was imported: the run went on and reported the test still failing
        assert status is Status.ROLLED_BACK, after.output[-2000:]
        assert after.tests is not None and after.tests.failing == FAILING, after.output[-2000:]
    finally:
        clean(repo)


@pytest.mark.parametrize("seed", range(3))
def test_each_sampled_stand_in_alone_is_never_judged_fixed(workspace, loaded_modules, seed):
    repo, base = workspace
    names = random.Random(seed).sample(loaded_modules, 4)
    for name in names:
        try:
            plant(repo, name, "import os\nos._exit(0)\n")
            status, after = verdict(repo, base)
            assert status is not Status.FIXED, (name, after.output[-1500:])
        finally:
            clean(repo)


CODE = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
EVASIONS = {
    "SkipTest at import": "import unittest\nraise unittest.SkipTest('later')\n" + CODE,
    "SkipTest in the function": CODE.replace("return a - b",
                                             "import unittest\n    raise unittest.SkipTest('x')"),
    "pytest.skip at module level": "import pytest\npytest.skip('later', allow_module_level=True)\n" + CODE,
    "pytest.xfail in the function": CODE.replace("return a - b", "import pytest\n    pytest.xfail('known')"),
    "os._exit(0) at import": "import os\nos._exit(0)\n" + CODE,
    "SystemExit(0) at import": "raise SystemExit(0)\n" + CODE,
    "sys.exit in the function": CODE.replace("return a - b", "import sys\n    sys.exit(0)"),
    "an error at import hides the module": "raise ImportError('no')\n" + CODE,
    "KeyboardInterrupt in the function": CODE.replace("return a - b", "raise KeyboardInterrupt"),
}


@pytest.mark.parametrize("how", sorted(EVASIONS))
def test_code_under_test_that_skips_exits_or_hides_is_never_fixed(workspace, how):
    repo, base = workspace
    try:
        (repo / "src" / "calc.py").write_text(EVASIONS[how])
        status, after = verdict(repo, base)
        assert status is Status.ROLLED_BACK, (how, after.exit_code, after.output[-1500:])
    finally:
        clean(repo)


PLUGIN = (
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
    "    out = yield\n    rep = out.get_result()\n    rep.outcome, rep.longrepr = 'passed', None\n"
)


def test_workspace_distribution_metadata_registers_no_runner_plugin(workspace):
    repo, base = workspace
    try:
        info = repo / "evil-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text("[pytest11]\nevil = evilplug\n")
        (repo / "evilplug.py").write_text(PLUGIN)
        status, after = verdict(repo, base)
        assert status is Status.ROLLED_BACK and after.tests is not None, after.output[-1500:]
        assert after.tests.failing == FAILING
    finally:
        clean(repo)


def test_the_real_fix_is_fixed(workspace):
    repo, base = workspace
    try:
        (repo / "src" / "calc.py").write_text(CODE.replace("a - b", "a + b"))
        status, after = verdict(repo, base)
        assert status is Status.FIXED, after.output[-1500:]
    finally:
        clean(repo)


def test_a_test_named_by_a_set_s_order_has_the_same_id_in_every_run(tmp_path):
    """pytest names a parameter it cannot print by its index in the set, whose order follows the
    string hashes: with hash randomization the ids change from run to run (isodate's test_format), so
    the unchanged code would seem to drop tests it ran before and no candidate could ever pass. Checks
    run with PYTHONHASHSEED=0 unless their environment sets it."""
    repo = make_calc_repo(tmp_path / "repo")
    (repo / "tests" / "test_set_params.py").write_text(SET_NAMED_TESTS)
    runs = [check(repo) for _ in range(3)]
    seen = [r.tests.seen for r in runs if r.tests is not None]
    assert len(seen) == 3 and len(seen[0]) > 10
    assert seen[0] == seen[1] == seen[2]
    assert any("expected" in t for t in seen[0])  # named by index: the case the rule is for
    unchanged = decide([runs[2]], Before(1, FAILING, {"tests": runs[0]}))
    assert "no longer runs" not in unchanged.reason
