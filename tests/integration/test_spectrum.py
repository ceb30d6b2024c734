"""The coverage ranking for real: the operator's pytest check re-run under autod's recorder plugin."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from autod.checks.run import run_check
from autod.config.settings import load_config
from autod.events import Event, EventKind
from autod.modes import ModeEnv
from autod.modes.debug import DebugMode
from autod.stores.state import State

pytestmark = pytest.mark.slow

MOD = '''\
def shared(x):
    return x + 0


def buggy(x):
    return shared(x) - 1


def fine(x):
    return shared(x) * 1


def never(x):
    return x
'''
TESTS = '''\
from mod import buggy, fine


def test_buggy_one():
    assert buggy(1) == 1


def test_buggy_two():
    assert buggy(2) == 2


def test_fine():
    assert fine(3) == 3


def test_fine_again():
    assert fine(4) == 4
'''
UNRELATED = "def test_elsewhere():\n    assert True\n"


def test_ochiai_ranks_the_function_only_failing_tests_run_first(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "tests").mkdir(parents=True)
    (ws / "mod.py").write_text(MOD)
    (ws / "tests" / "test_mod.py").write_text(TESTS)
    (ws / "tests" / "test_other.py").write_text(UNRELATED)
    conftest = "import sys, pathlib\nsys.path.insert(0, str(pathlib.Path(__file__).parent))\n"
    (ws / "conftest.py").write_text(conftest)
    run = f"{sys.executable} -m pytest -q -x -p no:cacheprovider tests"
    cfg = {"workspace": str(ws), "state_dir": str(tmp_path / "state"),
           "checks": {"tests": {"run": run, "timeout_s": 120, "coverage": True}}}
    (tmp_path / "autod.yaml").write_text(yaml.safe_dump(cfg))
    settings = load_config(tmp_path / "autod.yaml")
    calls: list[dict[str, Any]] = []

    async def runner(name: str, **extra: Any):
        calls.append(extra)
        return await run_check(name, settings.checks[name], settings.workspace, **extra)

    async def scenario() -> dict[tuple[str, str], float] | None:
        first = await run_check("tests", settings.checks["tests"], ws)  # the check's own failing run
        assert not first.ok
        state = State(settings.state_path / "state.db")
        try:
            env = ModeEnv(settings=settings, state=state, memory=None, run_check=runner)
            event = Event(source="check:tests", kind=EventKind.CHECK_FAILED, summary="tests failed",
                          fingerprint="fp", payload={"check": "tests", "excerpt": first.output})
            return await DebugMode()._spectrum(event, env)
        finally:
            state.close()

    scores = asyncio.run(asyncio.wait_for(scenario(), 240))
    assert scores is not None
    assert scores[("mod.py", "buggy")] == pytest.approx(1.0)
    # run by the failing tests and the passing ones: less suspicious; run by passing ones only: not at all
    assert 0 < scores[("mod.py", "shared")] < scores[("mod.py", "buggy")]
    assert ("mod.py", "fine") not in scores and ("mod.py", "never") not in scores
    # the operator's own check, with autod's extra arguments; its output dir is gone afterwards
    (extra,) = calls
    assert extra["extra_args"][:2] == ["-p", "autod_spectrum"] and "--maxfail=1000000" in extra["extra_args"]
    assert not extra["output_dir"].exists() and not extra["output_dir"].is_relative_to(ws)
    assert not list(ws.rglob("autod_spectrum*")) and not (ws / "spectrum.json").exists()


def _scenario(
    tmp_path: Path, check: dict[str, Any], tests: str = TESTS
) -> tuple[dict[tuple[str, str], float] | None, Path]:
    ws = tmp_path / "ws"
    (ws / "tests").mkdir(parents=True)
    (ws / "mod.py").write_text(MOD)
    (ws / "tests" / "test_mod.py").write_text(tests)
    (ws / "conftest.py").write_text(
        "import sys, pathlib\nsys.path.insert(0, str(pathlib.Path(__file__).parent))\n"
    )
    cfg = {"workspace": str(ws), "state_dir": str(tmp_path / "state"), "checks": {"tests": check},
           "logging": {"file": str(tmp_path / "autod.jsonl")}}
    (tmp_path / "autod.yaml").write_text(yaml.safe_dump(cfg))
    settings = load_config(tmp_path / "autod.yaml")

    async def runner(name: str, **extra: Any):
        return await run_check(name, settings.checks[name], settings.workspace, **extra)

    async def go() -> dict[tuple[str, str], float] | None:
        first = await run_check("tests", settings.checks["tests"], ws)
        state = State(settings.state_path / "state.db")
        try:
            env = ModeEnv(settings=settings, state=state, memory=None, run_check=runner)
            event = Event(source="check:tests", kind=EventKind.CHECK_FAILED, summary="tests failed",
                          fingerprint="fp", payload={"check": "tests", "excerpt": first.output})
            return await DebugMode()._spectrum(event, env)
        finally:
            state.close()

    return asyncio.run(asyncio.wait_for(go(), 240)), ws


def test_a_pytest_check_is_ranked_by_coverage_by_default_without_pytest_cov(tmp_path: Path) -> None:
    """No `coverage:` key: a pytest check is re-run under autod's own recorder (it needs neither
    coverage.py nor pytest-cov in the project: `-p no:cov` keeps a pytest-cov plugin out of it)."""
    run = f"{sys.executable} -m pytest -q -p no:cacheprovider -p no:cov tests"
    scores, _ = _scenario(tmp_path, {"run": run, "timeout_s": 120})
    assert scores is not None and scores[("mod.py", "buggy")] == pytest.approx(1.0)


def test_coverage_that_cannot_run_falls_back_to_static_ranking_with_a_log_line(tmp_path: Path) -> None:
    from structlog.testing import capture_logs

    # `python -I` ignores PYTHONPATH, so pytest cannot import autod's recorder plugin
    run = f"{sys.executable} -I -m pytest -q -p no:cacheprovider tests"
    with capture_logs() as logs:
        scores, _ = _scenario(tmp_path, {"run": run, "timeout_s": 120})
    assert scores is None
    (line,) = [x for x in logs if x["event"] == "localize.coverage_unavailable"]
    assert "static index" in line["reason"] and line["check"] == "tests"


def test_coverage_false_turns_the_rerun_off(tmp_path: Path) -> None:
    run = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
    scores, _ = _scenario(tmp_path, {"run": run, "timeout_s": 120, "coverage": False})
    assert scores is None


CONFTEST = "import sys, pathlib\nsys.path.insert(0, str(pathlib.Path(__file__).parent))\n"
POINT = '''\
class Point:
    def __init__(self, x):
        self.x = x

    def __repr__(self):
        return "Point(%r)" % (self.x,)

    def __eq__(self, other):
        return self.x == other.x


def double(p):
    return Point(p.x * 2 + 1)
'''
POINT_TESTS = '''\
from point import Point, double


def test_double():
    assert double(Point(1)) == Point(2)


def test_equal():
    assert Point(3) == Point(3)
'''


def test_the_repr_pytest_calls_to_explain_a_failed_assert_is_not_counted_as_the_tests_code(
    tmp_path: Path,
) -> None:
    """A failed `assert a == b` makes pytest repr() both sides inside the test's call: a project's
    __repr__ then looked run by the failing tests alone (Ochiai 1.00) and topped the ranking above
    the buggy code (semver's Version.__repr__ over the broken Version.__ge__)."""
    import json
    import subprocess
    from importlib import resources

    from autod.localize.spectrum import PLUGIN

    ws, out = tmp_path / "ws", tmp_path / "out"
    (ws / "tests").mkdir(parents=True)
    out.mkdir()
    (ws / "point.py").write_text(POINT)
    (ws / "tests" / "test_point.py").write_text(POINT_TESTS)
    (ws / "conftest.py").write_text(CONFTEST)
    (out / "select.json").write_text(json.dumps({"files": ["tests/test_point.py"]}))
    plugin = resources.files("autod.localize").joinpath("spectrum_plugin.py").read_bytes()
    (out / f"{PLUGIN}.py").write_bytes(plugin)
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", PLUGIN,
                    f"--autod-spectrum={out}", "tests"], cwd=ws, env={**os.environ, "PYTHONPATH": str(out)},
                   capture_output=True, timeout=120, check=False)
    tests = json.loads((out / "spectrum.json").read_text())["tests"]
    failing = tests["tests/test_point.py::test_double"]
    assert failing["failed"] is True
    ran = {n for path, lines in failing["lines"].items() if Path(path).name == "point.py" for n in lines}
    assert {9, 13} <= ran  # __eq__ and double: what the test itself ran
    assert not {5, 6} & ran  # __repr__: what pytest's report ran


SUBTESTS = '''\
import unittest

from mod import buggy, fine


class TestMod(unittest.TestCase):
    def test_buggy(self):
        for x in (1, 2):
            with self.subTest(x=x, label="a b - c"):
                self.assertEqual(buggy(x), x)

    def test_fine(self):
        for x in (3, 4):
            with self.subTest(x=x):
                self.assertEqual(fine(x), x)
'''


def test_a_failure_only_subtests_report_is_ranked_like_any_other(tmp_path: Path) -> None:
    """unittest's `subTest`: pytest 9 reports a failed subtest on its own summary line
    (`SUBFAILED(x=1, label='a b - c') tests/test_mod.py::TestMod::test_buggy - ...`), and no FAILED
    line: the test itself is reported passed. The failing tests are read from those lines, so the
    recorder re-runs them and the function only they run ranks first (before: no failing test named,
    no ranking: a suite written with subtests, like more-itertools', got no suspects at all)."""
    run = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
    scores, _ = _scenario(tmp_path, {"run": run, "timeout_s": 120}, SUBTESTS)
    assert scores is not None
    assert scores[("mod.py", "buggy")] == pytest.approx(1.0)
    assert 0 < scores[("mod.py", "shared")] < 1.0
    assert ("mod.py", "fine") not in scores
