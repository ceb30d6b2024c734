"""End to end through `autod run`: auto-doc, auto-plan, the offline fixer and git.commit.

How the cron case is driven: a `* * * * *` schedule would cost up to a minute per run, and a
seconds-level option would be a test hook in production config. Instead the test runs the real
`CronSource` in-process with a per-second trigger (the constructor seam its unit tests use), puts the
schedule event it yields into the daemon's durable queue, and starts `autod run`, which handles it
exactly as one its own cron source had queued (a restart hands queued events back the same way).
"""

from __future__ import annotations

import asyncio
import collections
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from apscheduler.triggers.cron import CronTrigger
from daemon import Autod, base_config, git, make_calc_repo, run_cli, write_config
from llmserver import ScriptedLLM

from autod.config.settings import CronSource as CronConfig
from autod.events import Event
from autod.modes.doc import only_docstrings_changed
from autod.sources.cron import CronSource
from autod.stores.queue import EventQueue

pytestmark = pytest.mark.slow

WATCH = [{"type": "watch", "paths": ["."], "settle_ms": 200}]
RUFF = str(Path(sys.executable).parent / "ruff")

GEO = '''"""Geometry helpers."""


def area(width, height):
    """Area of a rectangle.

    Args:
        width: the width
        height: the height
    """
    return width * height
'''
# a human renames a parameter and leaves the docstring behind
GEO_STALE = GEO.replace("area(width, height)", "area(width, depth)").replace("* height", "* depth")
GEO_PERIMETER = (
    GEO_STALE
    + '''

def perimeter(width, depth):
    """Perimeter of a rectangle.

    Args:
        width: the width
        length: the length
    """
    return 2 * (width + depth)
'''
)
# a human breaks add() and renames mul()'s parameters, leaving its docstring stale
CALC_BROKEN = '''def add(a, b):
    """Add two numbers."""
    return a - b


def mul(x, y):
    """Multiply.

    Args:
        a: first factor
        b: second factor
    """
    return x * y
'''


def plan(summary: str, edits: list[tuple[str, str, str]], report: str | None = None) -> dict[str, Any]:
    return {
        "summary": summary,
        "edits": [{"path": p, "search": s, "replace": r} for p, s, r in edits],
        "verify": [],
        "report": report,
    }


class ByModeLLM(ScriptedLLM):
    """Answers each mode from its own script, so the order in which modes run does not matter."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: dict[str, collections.deque[dict[str, Any]]] = collections.defaultdict(
            collections.deque
        )
        self.asked: list[tuple[str, str]] = []  # (mode, user prompt)

    def _next_step(self, body: dict[str, Any]) -> dict[str, Any]:
        system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
        mode = (
            "auto-doc"
            if "documentation" in system
            else "auto-plan"
            if "next actions" in system
            else "auto-debug"
        )
        with self._lock:
            self.asked.append((mode, user))
            script = self.scripts[mode]
            return script.popleft() if script else dict(self._default)


def start(tmp_path: Path, cfg: dict[str, Any], *args: str) -> Autod:
    cfg["state_dir"] = str(tmp_path / "state")
    config = write_config(tmp_path / "autod.yaml", cfg)
    return Autod(config, log_file=tmp_path / "state" / "logs" / "autod.jsonl", args=args).start()


def reflections(d: Autod, mode: str) -> list[dict[str, Any]]:
    return [r for r in d.reflections() if r["mode"] == mode]


def wait_mode(d: Autod, mode: str, n: int, timeout: float = 90) -> list[dict[str, Any]]:
    return d.wait_for(lambda _: (rs := reflections(d, mode))[n - 1 :] and rs, timeout, f"{n} {mode} cycles")


def test_auto_doc_fixes_stale_docstrings_refuses_code_changes_and_shares_an_edit_with_auto_debug(tmp_path):
    repo = make_calc_repo(tmp_path / "repo")
    calc = repo / "src" / "calc.py"
    calc.write_text(calc.read_text().replace("a - b", "a + b"))  # green at start
    geo = repo / "src" / "geo.py"
    geo.write_text(GEO)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "green")
    llm = ByModeLLM().start()
    doc_fix = plan("document depth, not height", [("src/geo.py", "height: the height", "depth: the depth")])
    doc_and_code = plan(
        "document length and simplify",
        [
            ("src/geo.py", "length: the length", "depth: the depth"),
            ("src/geo.py", "2 * (width + depth)", "2 * width + 2 * depth"),
        ],
    )
    llm.scripts["auto-doc"].extend([{"plan": doc_fix}, {"plan": doc_and_code}])
    cfg = base_config(
        repo, ranked=True, sources=WATCH,
        modes={"auto-debug": {"enabled": True}, "auto-doc": {"enabled": True}},
    )
    cfg["llm"]["base_url"] = llm.base_url
    d = start(tmp_path, cfg)
    try:
        d.wait_ready()  # the start-up check ran and the watcher is armed

        # 1. a stale docstring: only the docstring changes, the cycle is kept
        geo.write_text(GEO_STALE)
        (r1,) = wait_mode(d, "auto-doc", 1)
        assert r1["status"] == "fixed" and r1["kind"] == "files_changed", r1
        after = geo.read_text()
        assert after == GEO_STALE.replace("height: the height", "depth: the depth")
        assert only_docstrings_changed(GEO_STALE, after) and after != GEO_STALE
        assert [c["name"] for c in r1["checks"]] == ["tests"]
        doc_prompt = llm.asked[0][1]
        assert (
            "`area`: docstring does not match the signature; documents unknown height; misses depth"
            in doc_prompt
        )

        # 2. a plan that also changes code is refused whole: nothing written
        geo.write_text(GEO_PERIMETER)
        before = geo.read_bytes()
        r2 = wait_mode(d, "auto-doc", 2)[1]
        assert r2["status"] == "rejected" and "only docstrings" in r2["reason"], r2
        assert geo.read_bytes() == before

        # 3. one human edit, two modes: check_failed goes to auto-debug, files_changed to auto-doc
        llm.scripts["auto-debug"].append(
            {"plan": plan("add must add", [("src/calc.py", "return a - b", "return a + b")])}
        )
        llm.scripts["auto-doc"].append(
            {
                "plan": plan(
                    "document x and y",
                    [
                        (
                            "src/calc.py",
                            "a: first factor\n        b: second factor",
                            "x: first factor\n        y: second factor",
                        )
                    ],
                )
            }
        )
        calc.write_text(CALC_BROKEN)
        (debug,) = wait_mode(d, "auto-debug", 1)
        doc3 = wait_mode(d, "auto-doc", 3)[2]
        assert debug["status"] == "fixed" and debug["kind"] == "check_failed", debug
        assert doc3["status"] == "fixed" and doc3["kind"] == "files_changed", doc3
        assert debug["event_id"] != doc3["event_id"] and debug["cycle_id"] != doc3["cycle_id"]
        # each has its own cycle, one after the other: their log lines do not interleave
        order = [
            x["cycle_id"] for x in d.records() if x.get("cycle_id") in (debug["cycle_id"], doc3["cycle_id"])
        ]
        first = order[0]
        assert order == [first] * order.count(first) + [c for c in order if c != first]
        assert calc.read_text() == CALC_BROKEN.replace("a - b", "a + b").replace(
            "a: first", "x: first"
        ).replace("b: second", "y: second")
    finally:
        code = d.stop()
        llm.stop()
    assert code == 0


async def _one_cron_event(cfg: CronConfig) -> Event:
    events = CronSource(cfg, trigger=CronTrigger(second="*", timezone="UTC")).events()
    try:
        return await asyncio.wait_for(anext(events), 10)
    finally:
        await events.aclose()


REPORT_SECTIONS = [
    "## Recurring failures",
    "## Quarantined",
    "## Hot files",
    "## Lessons learned",
    "## TODO / FIXME",
    "## Next actions",
]


def assert_report(path: Path, actions_by: str) -> str:
    text = path.read_text()
    positions = [text.find(s) for s in REPORT_SECTIONS]
    assert -1 not in positions and positions == sorted(positions), text
    assert f"## Next actions ({actions_by})" in text
    return text


def test_auto_plan_writes_its_report_on_a_cron_event_and_on_autod_trigger(tmp_path, scripted_llm):
    repo = make_calc_repo(tmp_path / "repo")
    (repo / "src" / "notes.py").write_text("# FIXME: mul ignores overflow\n")
    cron = {"type": "cron", "name": "weekly-plan", "schedule": "0 7 * * mon", "mode": "auto-plan"}
    cfg = base_config(
        repo,
        sources=[cron],
        modes={"auto-debug": {"enabled": False}, "auto-plan": {"enabled": True, "schedule": None}},
    )
    cfg["checks"] = {}
    cfg["llm"]["base_url"] = scripted_llm.base_url
    event = asyncio.run(_one_cron_event(CronConfig.model_validate(cron)))
    (tmp_path / "state").mkdir()
    queue = EventQueue(tmp_path / "state" / "queue.db")
    assert queue.put(event).accepted
    queue.close()
    scripted_llm.push_plan(plan("two actions", [], "1. Resolve the FIXME in `src/notes.py`\n2. Test mul\n"))
    scripted_llm.push_plan(plan("one action", [], "1. Asked for by the operator\n"))
    d = start(tmp_path, cfg)
    try:
        (r1,) = d.wait_reflections(1)
        assert r1["status"] == "reported" and r1["kind"] == "schedule" and r1["mode"] == "auto-plan", r1
        text = assert_report(Path(r1["report_path"]), "planned by the LLM")
        assert "- `src/notes.py:1` FIXME: mul ignores overflow" in text
        assert "1. Resolve the FIXME in `src/notes.py`\n2. Test mul" in text
        assert "FIXME: mul ignores overflow" in json.dumps(scripted_llm.requests[0]["messages"])

        out = run_cli("trigger", "auto-plan", "--message", "what next?", "-c", str(d.config))
        assert out.returncode == 0 and "not running" not in out.stdout, out
        r2 = d.wait_reflections(2)[1]
        assert r2["status"] == "reported" and r2["kind"] == "manual", r2
        text = assert_report(Path(r2["report_path"]), "planned by the LLM")
        assert "1. Asked for by the operator" in text and "what next?" in json.dumps(scripted_llm.requests[1])
    finally:
        assert d.stop() == 0


def test_offline_the_fixer_fixes_lint_commits_only_clean_files_and_the_plan_is_derived_by_rules(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("import os\n\n# FIXME: handle negative sizes\n\n\ndef f():\n    return 1\n")
    (repo / "b.py").write_text("import os\n\n\ndef g():\n    return 2\n")
    (repo / ".gitignore").write_text("__pycache__/\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init")
    head = git(repo, "rev-parse", "HEAD").strip()
    (repo / "b.py").write_text("import os\n\n\ndef g():\n    return 2  # someone's work in progress\n")
    cfg = base_config(
        repo, modes={"auto-debug": {"enabled": True}, "auto-plan": {"enabled": True, "schedule": None}}
    )
    cfg["checks"] = {
        "lint": {"run": f"{RUFF} check --no-cache .", "when": ["start", "change"]},
        "lint-fix": {"run": f"{RUFF} check --no-cache --fix .", "fixer": True, "when": ["manual"]},
    }
    cfg["git"] = {"commit": True}
    cfg["state_dir"] = str(tmp_path / "state")
    config = write_config(tmp_path / "autod.yaml", cfg)
    queued = run_cli("trigger", "auto-plan", "-c", str(config))  # stored for the next start
    assert queued.returncode == 0 and "not running" in queued.stdout, queued
    out = run_cli("run", "--once", "-c", str(config), timeout=180)
    d = Autod(config, log_file=tmp_path / "state" / "logs" / "autod.jsonl")
    assert out.returncode == 0, out.stderr[-3000:]

    (fix,) = reflections(d, "auto-debug")
    assert fix["status"] == "fixed" and fix["planner"] == "rules", fix
    assert sorted(e["path"] for e in fix["edits"]) == ["a.py", "b.py"]
    assert "import os" not in (repo / "a.py").read_text() and "import os" not in (repo / "b.py").read_text()
    assert "someone's work in progress" in (repo / "b.py").read_text()
    # committed: only a.py, with the plan summary and the cycle trailer; b.py stays in the working tree
    assert fix["commit"] == git(repo, "rev-parse", "HEAD").strip() != head
    assert git(repo, "log", "-1", "--format=%s").strip() == fix["fix"]  # the fix, read from its diff
    assert git(repo, "log", "-1", "--format=%(trailers:key=Autod-Cycle,valueonly)").strip() == fix["cycle_id"]
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == ["a.py"]
    assert git(repo, "status", "--porcelain").split() == ["M", "b.py"]
    left = [x for x in d.records() if x.get("event") == "git.left_uncommitted"]
    assert left and left[0]["files"] == ["b.py"] and left[0]["cycle_id"] == fix["cycle_id"]

    (report,) = reflections(d, "auto-plan")
    assert report["status"] == "reported" and report["planner"] == "rules", report
    text = assert_report(Path(report["report_path"]), "derived by rules")
    assert "`a.py:" in text and "FIXME: handle negative sizes" in text
    assert "Resolve 1 FIXME/XXX markers in `a.py`" in text


def test_offline_a_fixer_that_fixes_nothing_runs_once_an_attempt_with_the_default_candidates(tmp_path):
    """The offline planner's plan is the fixers' output, the same whatever it is asked: the candidate
    search's several draws (n wide ones, and the focused ones on the failing test's suspects) would
    only run the fixers again. With the product's candidates defaults, one plan an attempt."""
    repo = make_calc_repo(tmp_path / "repo")  # a failing pytest test: its traceback names suspects
    cfg = base_config(repo, modes={"auto-debug": {"enabled": True}, "auto-plan": {"enabled": False}})
    del cfg["candidates"]  # the defaults an operator gets
    cfg["checks"]["noop-fix"] = {"run": "true", "fixer": True, "when": ["manual"]}
    cfg["state_dir"] = str(tmp_path / "state")
    config = write_config(tmp_path / "autod.yaml", cfg)
    out = run_cli("run", "--once", "-c", str(config), timeout=180)
    d = Autod(config, log_file=tmp_path / "state" / "logs" / "autod.jsonl")
    assert out.returncode == 1, out.stderr[-3000:]
    (r,) = reflections(d, "auto-debug")
    assert r["planner"] == "rules" and r["status"] == "no_change", r
    assert len(r["candidates"]) == r["attempts"] and {c["view"] for c in r["candidates"]} == {"wide"}, r
    assert len([x for x in d.records() if x.get("event") == "plan.planned"]) == r["attempts"]
