"""Memory that pays, through `autod run`, a loopback LLM that records prompts and the real bwrap: what an
earlier cycle learned reaches the prompts that fix (the suspects' own), and a failure fixed before is
fixed again by replaying the kept change, with no model call."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from daemon import CALC_BUGGY, FIX_PLAN, Autod, base_config, start_autod, write_config

pytestmark = pytest.mark.slow

WATCH = [{"type": "watch", "paths": ["src", "tests"], "settle_ms": 200}]


def whole(summary: str, source: str) -> dict:
    edit = {"path": "src/calc.py", "symbol": "add", "replace": source}
    return {**FIX_PLAN, "summary": summary, "edits": [edit]}


def start(tmp_path: Path, repo: Path, llm_url: str, **overrides: object) -> Autod:
    cfg = base_config(repo, ranked=True, sources=WATCH, **overrides)
    return start_autod(tmp_path, cfg, llm_url)


def test_the_second_cycles_first_request_a_suspects_prompt_carries_the_first_cycles_lesson(
    tmp_path, calc_repo, scripted_llm, real_bwrap
):
    """Cycle 1 tries two wrong ideas (rolled back); the same failure again: the first request of cycle 2,
    the suspect's focused prompt, tells what was tried and that it did not work."""
    scripted_llm.push_plan(whole("multiply the operands", "def add(a, b):\n    return a * b\n"))
    scripted_llm.push_plan(whole("multiply the operands", "def add(a, b):\n    return a * b\n"))
    # the human's save merges into the failure waiting for its retry: a backoff shorter than the
    # default's 30 s, still long enough for the next plan to be queued before the retry asks for it
    d = start(tmp_path, calc_repo, scripted_llm.base_url, candidates={"n": 1, "focused": 1},
              modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}},
              limits={"min_interval_s": 0, "retry_base_s": 3, "retry_max_s": 6})
    try:
        (r1,) = d.wait_reflections(1)
        assert r1["status"] == "rolled_back" and "did NOT work" in r1["lesson"], r1
        first_cycle = len(scripted_llm.requests)
        d.wait_ready()  # the watcher is armed (recall waits for the lesson's write by itself)
        scripted_llm.push_plan(whole("add must add", "def add(a, b):\n    return a + b\n"))
        test_file = calc_repo / "tests" / "test_calc.py"
        test_file.write_text(test_file.read_text() + "\n# touched by a human\n")
        r2 = d.wait_reflections(2)[1]
        assert r2["fingerprint"] == r1["fingerprint"] and r2["status"] == "fixed", r2
        assert r2["memory_used"], "the second cycle recalled nothing"
        assert r2["candidates"][0]["view"] == "focused:1"
        prompt = scripted_llm.requests[first_cycle]["messages"][1]["content"]
        assert "The bug is most likely in this definition, `add` in `src/calc.py`" in prompt
        memory = prompt.split("What autod remembers of similar failures:")[1].split("The bug is")[0]
        assert "multiply the operands" in memory and "did not work" in memory, prompt
        assert len(memory) < 1200  # a line an item, not the wide prompt's episodes with their diffs
    finally:
        assert d.stop() == 0


def test_a_failure_fixed_before_is_fixed_again_by_replaying_the_kept_change_with_no_model_call(
    tmp_path, calc_repo, scripted_llm, real_bwrap
):
    """Cycle 1 asks the model and keeps its fix; the bug comes back (a bad merge): cycle 2 replays the
    kept change, verified on the mirror, before any localization, and asks the model nothing."""
    scripted_llm.push_plan(whole("add must add", "def add(a, b):\n    return a + b\n"))
    d = start(tmp_path, calc_repo, scripted_llm.base_url,
              modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}})
    calc = calc_repo / "src" / "calc.py"
    try:
        (r1,) = d.wait_reflections(1)
        assert r1["status"] == "fixed" and "return a + b" in calc.read_text(), r1
        assert len(scripted_llm.requests) == 1
        d.wait_ready()  # the watcher is armed (recall waits for the episode's write by itself)
        calc.write_text(CALC_BUGGY)  # the bug is back
        r2 = d.wait_reflections(2)[1]
        assert r2["status"] == "fixed", r2
        assert "return a + b" in calc.read_text()
        assert len(scripted_llm.requests) == 1, "the second fix asked the model"
        assert [(c["view"], c["outcome"]) for c in r2["candidates"]] == [("replay", "fixed")]
        assert r2["candidates"][0]["replay_of"] in r2["memory_used"]
        assert r2["tokens"] == {"prompt": 0, "completion": 0}
        assert r2["context"] == []  # nothing localized: the replay was tried before any prompt was built
        assert r2["attempts"] == 1
    finally:
        assert d.stop() == 0


def test_a_failure_daemon_a_fixed_is_replayed_by_daemon_b_on_its_own_clone_with_no_model_call(
    tmp_path, calc_repo, real_bwrap
):
    """Two daemons share one `chroma run` server (a fleet): A asks its model and keeps the fix; B meets
    the same failure on its own clone and replays A's fix from the shared lesson: B's model is never
    asked."""
    from chromaserver import ChromaServer
    from llmserver import ScriptedLLM

    clone = tmp_path / "clone-b"
    subprocess.run(["git", "clone", "-q", str(calc_repo), str(clone)], check=True)
    server = ChromaServer(tmp_path / "chroma-work")
    (tmp_path / "chroma-work").mkdir()
    server.start()
    daemons: list[Autod] = []
    try:
        with ScriptedLLM() as llm_a, ScriptedLLM() as llm_b:
            llm_a.push_plan(whole("add must add", "def add(a, b):\n    return a + b\n"))
            memory = {"url": server.url, "timeout_s": 10, "open_wait_s": 30}
            for name, repo, llm in (("a", calc_repo, llm_a), ("b", clone, llm_b)):
                cfg = base_config(repo, ranked=True, memory=memory, llm={"base_url": llm.base_url},
                                  modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}})
                cfg["state_dir"] = str(tmp_path / f"state-{name}")
                cfg["checks"]["tests"]["when"] = ["start"]
                if name == "b":
                    # B starts only once A's lesson is on the server
                    (r_a,) = daemons[0].wait_reflections(1)
                    assert r_a["status"] == "fixed", r_a
                    deadline = time.monotonic() + 60  # a hang guard: the lesson's write is deferred
                    while not [x for x in _items(server, "mem_n2") if x.get("replay")]:
                        assert time.monotonic() < deadline, "A's lesson never reached the server"
                        time.sleep(0.5)
                config = write_config(tmp_path / f"{name}.yaml", cfg)
                daemons.append(Autod(config, log_file=tmp_path / f"state-{name}/logs/autod.jsonl").start())
            (r_b,) = daemons[1].wait_reflections(1)
            assert r_b["status"] == "fixed", r_b
            assert "return a + b" in (clone / "src" / "calc.py").read_text()
            assert [(c["view"], c["outcome"]) for c in r_b["candidates"]] == [("replay", "fixed")]
            assert len(llm_b.requests) == 0 and len(llm_a.requests) == 1
    finally:
        for d in daemons:
            assert d.stop() == 0
        server.stop()


def _items(server: object, collection: str) -> list[dict]:
    try:
        return server.items(collection)  # type: ignore[attr-defined]
    except Exception:  # the collection is created by the first write
        return []


def test_a_replay_that_no_longer_fixes_is_a_rejected_candidate_never_in_the_tree_and_the_model_is_asked(
    tmp_path, calc_repo, scripted_llm, real_bwrap
):
    """The bug comes back, but the test now wants another answer: the replayed fix fails on the mirror
    (recorded, never written into the tree), and the model's fix is drawn after it."""
    scripted_llm.push_plan(whole("add must add", "def add(a, b):\n    return a + b\n"))
    d = start(tmp_path, calc_repo, scripted_llm.base_url,
              modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}})
    calc, test_file = calc_repo / "src" / "calc.py", calc_repo / "tests" / "test_calc.py"
    try:
        (r1,) = d.wait_reflections(1)
        assert r1["status"] == "fixed", r1
        d.wait_ready()  # the watcher is armed (recall waits for the episode's write by itself)
        scripted_llm.push_plan(whole("add one more", "def add(a, b):\n    return a + b + 1\n"))
        test_file.write_text(test_file.read_text().replace("add(2, 3) == 5", "add(2, 3) == 6"))
        calc.write_text(CALC_BUGGY)
        r2 = d.wait_reflections(2)[1]
        assert r2["status"] == "fixed", r2
        assert [(c["view"], c["outcome"]) for c in r2["candidates"]] == [("replay", "rolled_back"),
                                                                         ("wide", "fixed")]
        assert "return a + b + 1" in calc.read_text()
        assert len(scripted_llm.requests) == 2
        runs = [x for x in d.records() if x.get("event") == "act.applied"]
        assert len(runs) == 2  # the tree got cycle 1's fix and the model's, never the failed replay
    finally:
        assert d.stop() == 0
