"""End to end, issue 22: `autod run` as a process with a scripted LLM on 127.0.0.1, a real webhook
receiver that is down for a while (and the daemon restarted in between), `autod undo`, a real scrape of
the metrics, a metrics port in use, and branch delivery verified on the mirror with real bwrap and
pushed to a bare repository, the operator's dirty working tree untouched."""

from __future__ import annotations

import json
import socket
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from daemon import CALC_BUGGY, FIX_PLAN, Autod, base_config, run_cli, write_config
from prometheus_client.parser import text_string_to_metric_families
from webhookreceiver import Receiver, free_port

pytestmark = pytest.mark.slow

TOKEN = "hook-token-5d41402abc4b2a76"
FIXED = CALC_BUGGY.replace("a - b", "a + b")


def start(
    tmp_path: Path, repo: Path, llm_url: str, env: dict[str, str] | None = None, **overrides: Any
) -> Autod:
    cfg = base_config(repo, **overrides)
    cfg["llm"]["base_url"] = llm_url
    cfg["checks"]["tests"]["coverage"] = False  # one plan and one check run a cycle: quick
    cfg.setdefault("candidates", {"n": 1})
    cfg["state_dir"] = str(tmp_path / "state")
    config = write_config(tmp_path / "autod.yaml", cfg)
    return Autod(config, log_file=tmp_path / "state" / "logs" / "autod.jsonl", env=env).start()


def cli(d: Autod, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, "-c", str(d.config), env=d.env)


def status(d: Autod) -> dict[str, Any]:
    return json.loads(cli(d, "status", "--json").stdout)


def metric(text: str, name: str, **labels: str) -> float:
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    raise AssertionError(f"no {name} {labels}")


def test_notifications_reach_a_receiver_down_across_a_restart_once_each_and_undo_is_told(
    tmp_path, calc_repo, scripted_llm
):
    rx = Receiver()  # its port is reserved, nothing listens yet: the receiver is down
    port = free_port()
    scripted_llm.push_plan(FIX_PLAN)
    overrides: dict[str, Any] = {
        "notify": {
            "webhooks": [
                {"name": "ops", "url": rx.url, "events": ["fixed", "undone"], "token_env": "HOOK_TOKEN"}
            ],
            "retry_base_s": 0.2,
            "retry_max_s": 0.5,
        },
        "metrics": {"listen": f"127.0.0.1:{port}"},
    }
    env = {"HOOK_TOKEN": TOKEN}
    d = start(tmp_path, calc_repo, scripted_llm.base_url, env, **overrides)
    try:
        (r,) = d.wait_reflections(1)
        assert r["status"] == "fixed", r
        d.wait_for(
            lambda recs: any(x["event"] == "webhook.unreachable" for x in recs), 30, "the receiver down"
        )
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:  # a real scrape
            text = resp.read().decode()
        assert metric(text, "autod_cycles_total", mode="auto-debug", status="fixed") == 1
        assert metric(text, "autod_llm_requests_total", outcome="ok") == 1
        assert metric(text, "autod_notifications_total", webhook="ops", outcome="queued") == 1
        printed = cli(d, "metrics")  # the same exposition on the command line
        assert printed.returncode == 0 and metric(printed.stdout, "autod_queue_depth") >= 0
        ops = status(d)["webhooks"][0]
        assert ops["state"] == "down" and ops["queued"] == 1
    finally:
        assert d.stop() == 0
    assert (calc_repo / "src" / "calc.py").read_text() == FIXED

    d = start(tmp_path, calc_repo, scripted_llm.base_url, env, **overrides)  # restarted, receiver still down
    try:
        d.wait_for(lambda recs: sum(x["event"] == "daemon.started" for x in recs) == 2, 60, "the restart")
        (calc_repo / "src" / "calc.py").write_text(FIXED + "# reviewed\n")  # a later human edit
        refused = cli(d, "undo", r["cycle_id"], "--reason", "wrong approach")
        assert refused.returncode == 1 and "src/calc.py (changed since autod wrote it)" in refused.stderr
        assert (calc_repo / "src" / "calc.py").read_text() == FIXED + "# reviewed\n"  # nothing written
        (calc_repo / "src" / "calc.py").write_text(FIXED)  # the human takes their edit back
        done = cli(d, "undo", r["cycle_id"][:8], "--reason", "wrong approach")
        assert done.returncode == 0, done.stderr
        assert (calc_repo / "src" / "calc.py").read_text() == CALC_BUGGY
        undo = d.wait_for(
            lambda recs: [x for x in recs if x.get("status") == "undone"], 30, "the undo record"
        )
        assert "wrong approach" in undo[0]["lesson"] and undo[0]["phase"] == "reflect"
        rx.start()  # the receiver comes back
        got = rx.wait_for(2)
        d.wait_for(lambda recs: sum(x["event"] == "webhook.sent" for x in recs) == 2, 30, "both sent")
        assert status(d)["webhooks"][0]["sent"] == 2
    finally:
        assert d.stop() == 0
        rx.stop()
    keys = [g["headers"]["Idempotency-Key"] for g in got]
    assert sorted(keys) == sorted([f"{r['cycle_id']}:fixed", f"{undo[0]['cycle_id']}:undone"])
    assert len(rx.accepted()) == 2  # each once
    assert all(g["headers"]["Authorization"] == f"Bearer {TOKEN}" for g in got)
    assert TOKEN not in d.log_file.read_text() and TOKEN not in d.stderr()
    history = json.loads(run_cli("history", "--json", "-c", str(d.config)).stdout)
    assert [h["status"] for h in history[:2]] == ["undone", "fixed"]


def test_branch_delivery_verified_on_the_mirror_pushed_and_a_metrics_port_in_use(
    tmp_path, calc_repo, scripted_llm, real_bwrap
):
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    subprocess.run(["git", "-C", str(calc_repo), "remote", "add", "origin", str(remote)], check=True)
    (calc_repo / "NOTES.md").write_text("operator's notes, uncommitted\n")
    (calc_repo / ".gitignore").write_text((calc_repo / ".gitignore").read_text() + "NOTES.md\n")
    before = {p: (calc_repo / p).read_bytes() for p in ("src/calc.py", "NOTES.md", ".gitignore")}
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    scripted_llm.push_plan(FIX_PLAN)
    d = start(
        tmp_path,
        calc_repo,
        scripted_llm.base_url,
        modes={"auto-debug": {"enabled": True, "delivery": "branch"}, "auto-plan": {"enabled": False}},
        delivery={"push": "origin"},
        metrics={"listen": f"127.0.0.1:{busy.getsockname()[1]}"},
    )
    try:
        (r,) = d.wait_reflections(1)
        assert r["status"] == "fixed", r
        line = next(x for x in d.records() if x["event"] == "metrics.bind_failed")
        assert line["reason"] == "address in use" and line["level"] == "error"
        s = status(d)
        assert s["metrics"]["state"] == "failed" and s["metrics"]["error"] == "address in use"
        text = cli(d, "status").stdout
        assert "metrics: NOT SERVING" in text and "delivery: auto-debug -> branch (push to origin)" in text
        branch = r["delivery"]["branch"]
        assert r["delivery"]["outcome"] == "delivered" and r["delivery"]["push"]["ok"] is True
        assert branch in text
    finally:
        assert d.stop() == 0
        busy.close()
    # the working tree is as the operator left it: the fix is on the branch, here and on the remote
    assert {p: (calc_repo / p).read_bytes() for p in before} == before
    show = subprocess.run(
        ["git", "-C", str(remote), "show", f"{branch}:src/calc.py"], capture_output=True, text=True
    )
    assert show.stdout == FIXED
    assert r["checks"][0]["name"] == "tests" and r["checks"][0]["exit_code"] == 0
    history = run_cli("history", "-c", str(d.config)).stdout
    assert f"branch={branch}" in history
