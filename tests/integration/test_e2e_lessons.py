"""Lessons keep their polarity through `autod run`: an operator's rejection of a plan for a failure
that an earlier cycle fixed becomes a lesson of its own; the success lesson's text and counters stay.
"""

from __future__ import annotations

import json
import signal

import pytest
from daemon import CALC_BUGGY, FIX_PLAN, Autod, base_config, run_cli, write_config

pytestmark = pytest.mark.slow

# A long, specific plan summary makes the success lesson and the rejection lesson near-duplicates
# (cosine ~0.96 with the local model, over the 0.92 merge threshold): before polarity, the
# rejection was merged into the success lesson and rewrote it.
SUMMARY = (
    "add must add, not subtract: calc.add returned a - b, so test_add saw -1 instead of 5; return a + b "
    "in src/calc.py so that add adds its operands as test_add expects"
)


def cli_json(config, *args):
    out = run_cli(*args, "--json", "-c", str(config))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_rejected_plan_for_a_fixed_failure_leaves_the_success_lesson_intact(
    tmp_path, calc_repo, scripted_llm
):
    plan = {**FIX_PLAN, "summary": SUMMARY}
    scripted_llm.push_plan(plan)  # the first cycle fixes the bug
    scripted_llm.push_plan(plan)  # the same failure again: the same plan, held for approval
    cfg = base_config(calc_repo, sources=[{"type": "watch", "paths": ["src"], "settle_ms": 100}])
    cfg["llm"]["base_url"] = scripted_llm.base_url
    cfg["state_dir"] = str(tmp_path / "state")
    config = write_config(tmp_path / "autod.yaml", cfg)
    d = Autod(config, log_file=tmp_path / "state/logs/autod.jsonl").start()
    try:
        assert d.wait_reflections(1)[0]["status"] == "fixed"
        cfg["limits"]["require_confirmation"] = True
        write_config(config, cfg)
        d.signal(signal.SIGHUP)
        d.wait_for(lambda recs: any(r.get("event") == "config.reloaded" for r in recs), 60, "the reload")
        (calc_repo / "src" / "calc.py").write_text(CALC_BUGGY)  # someone breaks it again
        assert d.wait_reflections(2)[1]["status"] == "pending_approval"
        [proposal] = cli_json(config, "proposals")  # `proposals --json` is the list itself
        out = run_cli("reject", proposal["id"], "--reason", "we review this file by hand", "-c", str(config))
        assert out.returncode == 0, out.stderr
        hits = cli_json(config, "memory", "search", SUMMARY, "--tier", "N2", "-k", "5")["hits"]
    finally:
        assert d.stop() == 0
    success = [h for h in hits if "Outcome: it worked" in h["text"]]
    rejection = [h for h in hits if "The operator rejected the plan" in h["text"]]
    assert len(success) == 1 and len(rejection) == 1, [h["text"] for h in hits]
    assert success[0]["id"] != rejection[0]["id"]
    meta = success[0]["metadata"]
    assert (meta["uses"], meta["successes"], meta["polarity"], meta["status"]) == (1, 1, "success", "fixed")
    assert rejection[0]["metadata"]["polarity"] == "failure" and rejection[0]["metadata"]["successes"] == 0
