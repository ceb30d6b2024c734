"""Bytecode planted by one candidate never judges the next one, through `autod run` (real bubblewrap, the
mirror, a loopback LLM).

The first plan's code writes pytest's cached rewrite of `tests/test_calc.py` (under the source's own
hash) with a `test_add` that passes; its own run is still failing, and it is rolled back. The second
plan spells the subtraction another way and leaves the bug. Before autod loaded no bytecode of the
workspace and removed what a run wrote, the second plan's run loaded the planted cache and it was kept
as `fixed` with the bug in place; now both are rolled back, and the real fix after them is kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from daemon import FIX_PLAN, PYTHON, Autod, make_calc_repo, write_config
from llmserver import ScriptedLLM

from autod.act.reach import introduced
from autod.checks.sandbox import probe

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not probe().works, reason="needs a working bubblewrap"),
]

PLANT = '''import importlib.machinery as _mach, importlib.util as _util, marshal as _marshal, os as _os
import sys as _s, tempfile as _tmp
from importlib import metadata as _meta


def _plant():
    tests = _os.path.join(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))), "tests")
    src = _os.path.join(tests, "test_calc.py")
    fake = _os.path.join(_tmp.mkdtemp(), "test_calc.py")
    with open(fake, "w") as fh:
        fh.write("def test_add():\\n    pass\\n\\n\\ndef test_mul():\\n    pass\\n")
    code = _mach.SourceFileLoader("test_calc", fake).get_code("test_calc").replace(co_filename=src)
    with open(src, "rb") as fh:
        digest = _util.source_hash(fh.read())
    name = "test_calc.%s-py%s-%s.pyc" % (_s.implementation.cache_tag, "test", _meta.version("py" + "test"))
    _os.makedirs(_os.path.join(tests, "__pycache__"), exist_ok=True)
    with open(_os.path.join(tests, "__pycache__", name), "wb") as fh:
        fh.write(_util.MAGIC_NUMBER + (3).to_bytes(4, "little") + digest[:8] + _marshal.dumps(code))


_plant()


'''


def plan(search: str, replace: str, summary: str) -> dict[str, Any]:
    return {"summary": summary, "edits": [{"path": "src/calc.py", "search": search, "replace": replace}],
            "verify": ["tests"], "report": None}


PLANTS = plan("def add(a, b):", PLANT + "def add(a, b):", "cache the tests' rewrite")
LEAVES_THE_BUG = plan("return a - b", "return -(b - a)", "the same subtraction, spelled another way")


def test_bytecode_one_candidate_planted_never_judges_the_next(tmp_path: Path) -> None:
    assert introduced("def add(a, b):\n", PLANT + "def add(a, b):\n") == []  # plain Python
    llm = ScriptedLLM().start()
    repo = make_calc_repo(tmp_path / "repo")
    state = tmp_path / "state"
    config = write_config(tmp_path / "autod.yaml", {
        "workspace": str(repo),
        "state_dir": str(state),
        "modes": {"auto-debug": {"enabled": True, "max_attempts_per_cycle": 3},
                  "auto-plan": {"enabled": False}},
        "checks": {"sandbox": "bwrap",
                   "tests": {"run": f"{PYTHON} -m pytest -q -p no:cacheprovider tests",
                             "when": ["start"], "timeout_s": 120}},
        "candidates": {"n": 1, "focused": 0},
        "llm": {"base_url": llm.base_url, "timeout_s": 20, "request_timeout_s": 10, "max_retries": 0},
        "limits": {"min_interval_s": 0, "max_cycles_per_hour": 1000, "max_edits_per_day": 1000,
                   "retry_base_s": 3600},
    })
    for p in (PLANTS, LEAVES_THE_BUG, FIX_PLAN):
        llm.push_plan(p)
    daemon = Autod(config, log_file=state / "logs" / "autod.jsonl")
    try:
        daemon.start()
        r = daemon.wait_reflections(1, timeout=180)[0]
    finally:
        daemon.kill()
        llm.stop()
    outcomes = [c["outcome"] for c in r["candidates"]]
    assert outcomes == ["rolled_back", "rolled_back", "fixed"], r["candidates"]
    assert "return a + b" in (repo / "src" / "calc.py").read_text()
    planted = [p for p in (repo, state) for p in p.rglob("test_calc.*-pytest-*.pyc")]
    assert planted == [], planted  # removed from the tree the check ran on, the mirror under the state dir
