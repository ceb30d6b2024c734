"""Prometheus metrics: a real scrape of the loopback server, parsed with prometheus_client's parser."""

from __future__ import annotations

import asyncio
import socket
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from autod.config.listen import parse_listen
from autod.config.settings import ConfigError, load_config
from autod.metrics.observe import MeteredPlanner
from autod.metrics.registry import Metrics
from autod.metrics.server import MetricsServer


def families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def sample(fams: dict[str, Any], name: str, labels: dict[str, str] | None = None, suffix: str = "") -> float:
    fam = fams[name]
    for s in fam.samples:
        if s.name == name + suffix and all(s.labels.get(k) == v for k, v in (labels or {}).items()):
            return float(s.value)
    raise AssertionError(f"no sample {name}{suffix} {labels} in {fam.samples}")


RECORD = {
    "cycle_id": "c1",
    "mode": "auto-debug",
    "status": "fixed",
    "durations_ms": {"observe": 5, "plan": 1200, "act": 3000, "reflect": 40},
    "tokens": {"prompt": 900, "completion": 120},
    "edits": [{"path": "src/calc.py", "added": 1, "removed": 1}],
}


async def until(pred: Any, what: str, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not pred():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:  # loopback only
        return r.read().decode()


@pytest.mark.slow
def test_a_real_scrape_of_the_loopback_server_parses_and_counts_a_cycle():
    metrics = Metrics()
    metrics.cycle_finished(RECORD)
    metrics.check_ran("tests", exit_code=1, duration_ms=2500, sandbox="bwrap", timed_out=False, error=None)
    metrics.check_ran("lint", exit_code=127, duration_ms=0, sandbox="", timed_out=False, error="not found")
    server = MetricsServer(metrics, watch_s=0.05)

    async def go() -> str:
        task = asyncio.create_task(server.run(lambda: "127.0.0.1:0"))
        try:
            await until(lambda: server.status()["state"] == "serving", "the server to listen")
            return await asyncio.to_thread(scrape, server.status()["url"])
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    text = asyncio.run(go())
    fams = families(text)
    assert sample(fams, "autod_cycles", {"mode": "auto-debug", "status": "fixed"}, "_total") == 1
    assert sample(fams, "autod_cycle_duration_seconds", {"mode": "auto-debug"}, "_count") == 1
    cycle_s = sample(fams, "autod_cycle_duration_seconds", {"mode": "auto-debug"}, "_sum")
    assert cycle_s == pytest.approx(4.245)
    assert sample(fams, "autod_phase_duration_seconds", {"phase": "plan"}, "_sum") == pytest.approx(1.2)
    assert sample(fams, "autod_llm_tokens", {"kind": "prompt"}, "_total") == 900
    assert sample(fams, "autod_check_runs", {"check": "tests", "result": "fail"}, "_total") == 1
    assert sample(fams, "autod_check_runs", {"check": "lint", "result": "cannot_start"}, "_total") == 1
    assert sample(fams, "autod_check_duration_seconds", {"check": "tests", "sandbox": "bwrap"}, "_count") == 1
    assert fams["autod_queue_depth"].type == "gauge"


@pytest.mark.slow
def test_a_port_in_use_is_a_status_entry_and_the_server_binds_once_it_is_free():
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    server = MetricsServer(Metrics(), retry_min_s=0.05, watch_s=0.05)

    async def go() -> tuple[dict[str, Any], dict[str, Any]]:
        task = asyncio.create_task(server.run(lambda: f"127.0.0.1:{port}"))
        try:
            await until(lambda: server.status()["state"] == "failed", "the bind to fail")
            failed = server.status()
            busy.close()
            await until(lambda: server.status()["state"] == "serving", "the retry to bind")
            return failed, server.status()
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    failed, serving = asyncio.run(go())
    assert failed["error"] == "address in use" and failed["listen"] == f"127.0.0.1:{port}"
    assert serving["url"] == f"http://127.0.0.1:{port}/metrics"


def test_the_planner_seam_counts_llm_requests_by_outcome():
    from autod.errors import LLMUnavailable

    class Flaky:
        def __init__(self) -> None:
            self.calls = 0

        async def plan(self, request: Any) -> Any:
            self.calls += 1
            if self.calls == 1:
                raise LLMUnavailable("HTTP 503")
            return "a plan"

        endpoint = "http://127.0.0.1:1/v1"

    metrics = Metrics()
    planner = MeteredPlanner(Flaky(), metrics)

    async def go() -> None:
        with pytest.raises(LLMUnavailable):
            await planner.plan(None)
        assert await planner.plan(None) == "a plan"

    asyncio.run(go())
    fams = families(metrics.exposition().decode())
    assert sample(fams, "autod_llm_requests", {"outcome": "unavailable"}, "_total") == 1
    assert sample(fams, "autod_llm_requests", {"outcome": "ok"}, "_total") == 1
    assert sample(fams, "autod_llm_request_duration_seconds", {}, "_count") == 2
    assert planner.endpoint == "http://127.0.0.1:1/v1"  # the wrapped planner's attributes


@pytest.mark.parametrize("value", ["0.0.0.0:9464", "10.0.0.1:9464", "example.com:9464", "127.0.0.1", "::1:x"])
def test_metrics_listen_must_be_a_loopback_host_and_port(value):
    with pytest.raises(ValueError):
        parse_listen(value)


@pytest.mark.parametrize("value", ["127.0.0.1:9464", "[::1]:9464", "localhost:0", "127.0.0.2:1"])
def test_loopback_listen_addresses_are_accepted(value):
    host, _ = parse_listen(value)
    assert host in ("127.0.0.1", "::1", "127.0.0.2")


def test_a_public_metrics_address_is_a_config_error_naming_file_line_and_field(tmp_path: Path):
    cfg = tmp_path / "autod.yaml"
    cfg.write_text(f"workspace: {tmp_path}\nmetrics:\n  listen: 0.0.0.0:9464\n")
    with pytest.raises(ConfigError) as err:
        load_config(cfg)
    assert f"{cfg}:3: metrics.listen:" in str(err.value) and "loopback" in str(err.value)


def test_the_grafana_dashboard_uses_only_metrics_autod_exports():
    import json
    import re

    dashboard = json.loads(
        (Path(__file__).resolve().parents[2] / "deploy" / "grafana-autod.json").read_text()
    )
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    exprs.append(dashboard["templating"]["list"][1]["definition"])
    used = {m for e in exprs for m in re.findall(r"\bautod_[a-z_]+", e)}
    suffixes = {
        "counter": ["_total"],
        "histogram": ["_bucket", "_count", "_sum"],
        "gauge": [""],
        "info": ["_info"],
    }
    exported = {f.name + s for f in Metrics().registry.collect() for s in suffixes[f.type]}
    assert used and used <= exported, sorted(used - exported)
    assert {
        "autod_cycles_total",
        "autod_llm_requests_total",
        "autod_queue_depth",
        "autod_memory_items",
    } <= used


def test_replays_from_memory_are_counted_by_outcome_and_recalled_items_counted():
    metrics = Metrics()
    replayed = {**RECORD, "memory_used": ["ep1", "l2"], "candidates": [
        {"n": 1, "view": "replay", "replay_of": "ep1", "outcome": "rolled_back"},
        {"n": 2, "view": "wide", "outcome": "fixed"}]}
    metrics.cycle_finished(replayed)
    metrics.cycle_finished({**RECORD, "memory_used": ["ep1"], "candidates": [
        {"n": 1, "view": "replay", "replay_of": "ep1", "outcome": "fixed"}]})
    fams = families(metrics.exposition().decode())
    assert sample(fams, "autod_memory_replays", {"outcome": "fixed"}, "_total") == 1
    assert sample(fams, "autod_memory_replays", {"outcome": "rolled_back"}, "_total") == 1
    assert sample(fams, "autod_memory_recalled_items", None, "_total") == 3
