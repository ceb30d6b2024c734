"""Shared fixtures: the scripted loopback LLM, a temporary git repository, and `autod run` as a process."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from llmserver import scripted_llm_fixture

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

scripted_llm = pytest.fixture(scripted_llm_fixture)


def pytest_configure(config: pytest.Config) -> None:
    """Before the workers start: autod's bytecode, written once. Every Python the suite starts imports
    autod (hundreds of `autod run`s; every check's pytest loads autod's recorder in its sandbox), and
    with PYTHONDONTWRITEBYTECODE set, as on CI's machines, none of them writes what it compiled, so
    each compiled autod's modules from source again. The import system still reads bytecode that is
    there (and recompiles any whose source changed since). Not in a worker, not where Python writes
    bytecode itself, and not in a check autod runs on this checkout (config/autod.yaml): there no
    module of the workspace is read from bytecode, and what a run writes is removed after it."""
    if hasattr(config, "workerinput") or not sys.dont_write_bytecode or "_AUTOD_JUDGE_WS" in os.environ:
        return
    import compileall

    compileall.compile_dir(str(Path(__file__).resolve().parents[1] / "autod"), quiet=1)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` (pyproject): three workers per usable CPU. Most of the suite waits (on daemons starting,
    cycles, deadlines it tests): on two idle cores the suite used 64 % of them with two workers per CPU
    and took 613 s, with three 559 s. Four were tried (2026-12-01): 70 % of the cores against 68 %, and
    546-718 s against 666-700 s, inside the machine's own spread, while a pace test that times a loopback
    server failed under the extra load. `-n logical` stays one per CPU (the unit tests alone hardly wait:
    autod's own check in config/autod.yaml), and PYTEST_XDIST_AUTO_NUM_WORKERS still sets the number
    (xdist's hook)."""
    if config.option.numprocesses != "auto" or os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return 3 * len(os.sched_getaffinity(0))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files marked `early` first, the rest in the order collected (`--no-loadscope-reorder`): xdist
    hands files out in this order, so the longest start at once and the short unit files even out the
    end, instead of a minutes-long file starting last on a worker while the others sit idle."""
    items.sort(key=lambda item: item.get_closest_marker("early") is None)  # stable: the order otherwise


@pytest.fixture
def calc_repo(tmp_path: Path) -> Path:
    """A git repository whose test fails: calc.add subtracts."""
    from daemon import make_calc_repo

    return make_calc_repo(tmp_path / "repo")


def inside_a_check_sandbox() -> bool:
    """Whether these tests run as autod's own check, under bwrap (its init is PID 1)."""
    try:
        return Path("/proc/1/comm").read_text().strip() == "bwrap"
    except OSError:
        return False


@pytest.fixture
def real_bwrap() -> None:
    """bubblewrap must work here (CI installs it: its absence fails, never skips), except inside
    autod's own check sandbox, where root keeps no capability and bwrap cannot nest."""
    from autod.checks import sandbox

    verdict = sandbox.probe()
    if not verdict.works and inside_a_check_sandbox():
        pytest.skip("nested in autod's check sandbox: bwrap cannot run here")
    assert verdict.works, verdict.why
