"""`autod memory ...` reads safely while the daemon is down and asks the daemon while it runs."""

from __future__ import annotations

import json

import pytest
from daemon import FIX_PLAN, Autod, base_config, run_cli, write_config

pytestmark = pytest.mark.slow


def test_memory_cli_through_the_daemon_and_without_it(tmp_path, calc_repo, scripted_llm):
    scripted_llm.push_plan(FIX_PLAN)
    cfg = base_config(calc_repo)
    cfg["llm"]["base_url"] = scripted_llm.base_url
    cfg["state_dir"] = str(tmp_path / "state")
    config = write_config(tmp_path / "autod.yaml", cfg)
    d = Autod(config, log_file=tmp_path / "state/logs/autod.jsonl").start()
    try:
        d.wait_reflections(1)
        # while the daemon owns the store, the CLI asks it over the socket (no second writer)
        stats = run_cli("memory", "stats", "--json", "-c", str(config))
        assert stats.returncode == 0, stats.stderr
        tiers = json.loads(stats.stdout)["stats"]["tiers"]
        assert tiers["n2"]["count"] >= 1 and tiers["n1"]["count"] >= 1
        hits = run_cli("memory", "search", "add must add", "--tier", "N2", "--json", "-c", str(config))
        assert hits.returncode == 0, hits.stderr
        found = json.loads(hits.stdout)["hits"]
        assert found and found[0]["tier"] == "n2" and "add must add" in found[0]["text"]
        human = run_cli("memory", "search", "add must add", "-c", str(config))
        assert "n2" in human.stdout and "[auto-debug] Failure" in human.stdout
    finally:
        assert d.stop() == 0
    # daemon down: a read-only open under the owner lock
    stats = run_cli("memory", "stats", "--json", "-c", str(config))
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["stats"]["tiers"]["n2"]["count"] >= 1
    dry = run_cli("memory", "prune", "--dry-run", "--json", "-c", str(config))
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["dry_run"] is True
