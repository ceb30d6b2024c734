"""Faults from the LLM, each through `autod run`: nothing written outside the rules, the cycle
recorded with a reason naming the cause, the daemon alive for the next event; the circuit breaker.

One daemon serves every fault in turn: the scripted server's default answer is switched to the next
fault and `autod trigger auto-debug` queues the next event. Before and after each cycle the bytes
of the whole workspace (and of a directory outside it that a symlink points into) are compared.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from daemon import CALC_BUGGY, FIX_PLAN, Autod, base_config, run_cli, write_config
from llmserver import NOTHING_TO_DO

from autod.config.settings import load_config
from autod.control.socket import request

pytestmark = [pytest.mark.slow, pytest.mark.early]  # a minute or more: handed out first

HUGE = 6 * 1024 * 1024  # over the client's 4 MiB reply cap


def plan_with(*edits: dict[str, str]) -> dict[str, Any]:
    return {"plan": {**FIX_PLAN, "edits": list(edits)}}


def edit(path: str, search: str = "", replace: str = "pwned\n") -> dict[str, str]:
    return {"path": path, "search": search, "replace": replace}


# (name, default answer of the scripted server, reflection status, words the reason must contain)
FAULTS: list[tuple[str, dict[str, Any], str, tuple[str, ...]]] = [
    ("hang past the deadline", {"hang": 30}, "failed", ("deadline",)),
    ("burst of 500s", {"status": 500, "body": '{"error": "boom"}'}, "failed", ("500",)),
    (
        "truncated JSON body",
        {"raw": b'{"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": "{\\"su'},
        "failed",
        ("not json",),
    ),
    # the model's own slips are attempts ("rejected"), not outages ("failed"): the server did answer
    ("empty reply", {"text": ""}, "rejected", ("empty",)),
    # (the code reply form, the default: a block it cannot place is a slip; prose alone proposes no fix)
    ("unplaceable code", {"text": "Sure!\n```python\nprint('add')\n```"}, "rejected", ("no header",)),
    ("prose, no code", {"text": "Sure! You should make add() add. Hope this helps."}, "no_change", ()),
    (
        "huge reply",
        {"raw": b'{"choices": [{"message": {"content": "' + b"A" * HUGE + b'"}}]}'},
        "rejected",
        ("too large",),
    ),
    # nested past Python's recursion limit, a count past any count: a parse error and a number refused,
    # never an internal error, and the cycle's record is written (a usage of 2**63 overflowed SQLite)
    ("a body nested ten thousand deep", {"raw": b"[" * 10_000 + b"]" * 10_000}, "failed", ("not json",)),
    (
        "an error body nested ten thousand deep",
        {"status": 500, "body": '{"error": ' + "[" * 10_000 + "]" * 10_000 + "}"},
        "failed",
        ("500",),
    ),
    (
        "a usage count past any count",
        {"raw": json.dumps({"choices": [{"index": 0, "finish_reason": "stop", "message": {
            "role": "assistant", "content": "Sure!\n```python\nprint('add')\n```"}}],
            "usage": {"prompt_tokens": 2**63, "completion_tokens": 10**30}}).encode()},
        "rejected",
        ("no header",),
    ),
    (
        "search text not in the file",
        plan_with(edit("src/calc.py", "return a ** b", "return a + b")),
        "rejected",
        ("not found", "src/calc.py"),
    ),
    ("file that does not exist", plan_with(edit("src/nope.py", "x = 1")), "rejected", ("does not exist",)),
    ("broken syntax", plan_with(edit("src/calc.py", "return a - b", "return a +")), "rejected", ("syntax",)),
    (
        "dozens of edits past max_edits_per_cycle",
        plan_with(*[edit(f"src/new_{i}.py") for i in range(40)]),
        "rejected",
        ("40 edits", "cap"),
    ),
    ("dot-dot escape", plan_with(edit("src/../../outside/target.txt", "keep me")), "rejected", ("..",)),
    ("absolute path", plan_with(edit("OUTSIDE/target.txt", "keep me")), "rejected", ("absolute",)),
    ("symlink to outside", plan_with(edit("link/target.txt", "keep me")), "rejected", ("symlink",)),
    (
        "dot-git",
        plan_with(edit(".git/config", "[core]", "[core]\n\thooksPath = /tmp")),
        "rejected",
        (".git",),
    ),
    ("state dir", plan_with(edit(".autod/autod.pid")), "rejected", ("state dir",)),
    (".env", plan_with(edit(".env", "TOKEN=abc", "TOKEN=stolen")), "rejected", (".env", "denied")),
    ("id_rsa", plan_with(edit("keys/id_rsa", "PRIVATE", "MINE")), "rejected", ("id_rsa", "denied")),
    ("a created file next to a secret", plan_with(edit("keys/id_rsa.pub")), "rejected", ("denied",)),
]


def tree(root: Path, skip: tuple[str, ...] = ()) -> dict[str, bytes | str]:
    """Every path under root: file bytes, or the target of a symlink, or 'dir'."""
    out: dict[str, bytes | str] = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if any(rel == s or rel.startswith(s + "/") for s in skip):
            continue
        if p.is_symlink():
            out[rel] = "-> " + os.readlink(p)
        elif p.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = p.read_bytes()
    return out


def test_every_llm_fault_is_recorded_writes_nothing_and_the_daemon_serves_the_next_event(
    tmp_path, calc_repo, scripted_llm
):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "target.txt").write_text("keep me\n")
    (calc_repo / "link").symlink_to(outside)
    (calc_repo / ".env").write_text("TOKEN=abc\n")
    (calc_repo / "keys").mkdir()
    (calc_repo / "keys" / "id_rsa").write_text("PRIVATE KEY\n")
    # the absolute-path fault names the real outside dir
    faults = [
        (
            name,
            plan_with(edit(str(outside / "target.txt"), "keep me")) if name == "absolute path" else step,
            st,
            w,
        )
        for name, step, st, w in FAULTS
    ]

    cfg = base_config(
        calc_repo,
        modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}, "auto-plan": {"enabled": False}},
        llm={
            "base_url": scripted_llm.base_url,
            "timeout_s": 3,
            "request_timeout_s": 2,
            "max_retries": 2,
            "circuit_failures": 100,
        },
        # each fault's event is retried later (autod.runtime.retry): not within this test, which serves
        # one at a time
        limits={
            "min_interval_s": 0, "max_cycles_per_hour": 1000, "max_edits_per_cycle": 10, "retry_base_s": 3600
        },
    )
    cfg["state_dir"] = str(calc_repo / ".autod")  # inside the workspace: the state-dir rule must hold
    config = write_config(tmp_path / "autod.yaml", cfg)
    times: list[float] = []
    record = scripted_llm._record

    def timed(body: dict[str, Any], headers: dict[str, str], *path: str) -> None:
        times.append(time.monotonic())
        record(body, headers, *path)

    scripted_llm._record = timed  # type: ignore[method-assign]
    # .git/info/exclude: autod adds its state dir there at start-up (no plan can write under .git)
    skip = (
        ".autod", ".git/index", ".git/info/exclude", "__pycache__", "src/__pycache__", "tests/__pycache__"
    )
    scripted_llm.set_default(faults[0][1])
    before, before_out = tree(calc_repo, skip), tree(outside)
    d = Autod(config, log_file=calc_repo / ".autod" / "logs" / "autod.jsonl").start()
    try:
        for n, (name, step, status, words) in enumerate(faults, 1):
            if n > 1:
                scripted_llm.set_default(step)
                out = run_cli("trigger", "auto-debug", "--message", name, "-c", str(config))
                assert out.returncode == 0, (name, out.stderr)
            r = d.wait_reflections(n, timeout=60)[n - 1]
            assert r["status"] == status, (name, r)
            reason = (r.get("reason") or "").lower()
            assert all(w.lower() in reason for w in words), (name, r.get("reason"))
            assert r["edits"] == [], (name, r)
            assert tree(calc_repo, skip) == before, f"{name}: the workspace changed"
            assert tree(outside) == before_out, f"{name}: the outside dir changed"

        # 429 with Retry-After: the client waits as told, then the plan goes through
        scripted_llm.set_default({"plan": NOTHING_TO_DO})
        scripted_llm.push_status(429, '{"error": "slow down"}', {"Retry-After": "1"})
        first = len(times)
        assert run_cli("trigger", "auto-debug", "--message", "429", "-c", str(config)).returncode == 0
        n = len(faults) + 1
        r = d.wait_reflections(n)[n - 1]
        assert r["status"] == "no_change", r
        assert len(times) - first == 2
        assert times[first + 1] - times[first] >= 0.9  # Retry-After: 1 was honoured (a lower bound)
        retries = [x for x in d.records() if x.get("event") == "llm.retry" and x.get("status") == 429]
        assert retries and retries[-1]["delay_s"] == 1.0

        # still serving: a good plan fixes the bug
        scripted_llm.set_default({"plan": FIX_PLAN})
        assert run_cli("trigger", "auto-debug", "--message", "now fix", "-c", str(config)).returncode == 0
        r = d.wait_reflections(n + 1)[n]
        assert r["status"] == "fixed", r
        assert (calc_repo / "src" / "calc.py").read_text() == CALC_BUGGY.replace("a - b", "a + b")
        assert tree(outside) == before_out
        status = json.loads(run_cli("status", "--json", "-c", str(config)).stdout)
        # the events whose plans failed on the LLM wait for a retry; the refused plans' events are done;
        # the first outage's event is the start-up check's failure, resolved when the fix made it pass
        outages = [f for f in faults if f[2] == "failed"]
        assert status["running"] is True and status["queue"]["depth"] == len(outages) - 1, status["queue"]
        assert len(status["queue"]["retries"]) == len(outages) - 1
        assert any(c["status"] == "resolved" for c in status["last_cycles"]), status["last_cycles"]
    finally:
        assert d.stop() == 0
    assert "Traceback" not in d.stderr()


def test_circuit_breaker_opens_after_failed_plans_queues_events_and_a_good_plan_closes_it(
    tmp_path, calc_repo, scripted_llm
):
    cfg = base_config(
        calc_repo,
        modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}, "auto-plan": {"enabled": False}},
        llm={
            "base_url": scripted_llm.base_url,
            "timeout_s": 5,
            "request_timeout_s": 2,
            "max_retries": 0,
            "circuit_failures": 2,
            # room for the four CLI calls below on a loaded machine (8 s was not, beside a model
            # generating on both cores): the breaker must still be open when they are done
            "circuit_cooldown_s": 20,
        },
        limits={"min_interval_s": 0, "max_cycles_per_hour": 1000, "retry_base_s": 3600},  # retried later
    )
    cfg["state_dir"] = str(tmp_path / "state")
    config = write_config(tmp_path / "autod.yaml", cfg)
    scripted_llm.set_default({"status": 500, "body": "down"})
    d = Autod(config, log_file=tmp_path / "state" / "logs" / "autod.jsonl").start()

    def status() -> dict[str, Any]:
        out = run_cli("status", "--json", "-c", str(config))
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    try:
        d.wait_reflections(1)  # the start-up check failed: failed plan 1
        # a plain trigger starts the event waiting for its retry (issue 21), it does not queue another
        out = run_cli("trigger", "auto-debug", "-c", str(config))
        assert out.returncode == 0 and "started the waiting event" in out.stdout, out
        rs = d.wait_reflections(2)  # failed plan 2: the breaker opens
        assert [r["status"] for r in rs] == ["failed", "failed"]
        requests_when_open = len(scripted_llm.requests)
        # while it is open (its cooldown running), through the control socket: a CLI process a call
        # would take seconds of it on a busy machine (the CLI's trigger is shown working above)
        settings = load_config(config)
        for i in range(3):
            assert request(settings, "trigger", mode="auto-debug", message=f"queued {i}").get("ok")
        s = request(settings, "status")
        assert s["llm"]["circuit"]["state"] == "open", s["llm"]
        assert s["queue"]["depth"] >= 3, s["queue"]  # events keep queueing while cycles pause
        d.wait_for(
            lambda recs: [x for x in recs if x.get("reason") == "LLM circuit breaker open"], 10, "wait"
        )
        assert len(d.reflections()) == 2 and len(scripted_llm.requests) == requests_when_open

        # after the cooldown it half-opens; the next plan is good and closes it
        scripted_llm.set_default({"plan": NOTHING_TO_DO})
        rs = d.wait_reflections(5, timeout=60)
        assert [r["status"] for r in rs[2:]] == ["no_change"] * 3
        s = status()
        assert s["llm"]["circuit"]["state"] == "closed" and s["llm"]["circuit"]["consecutive_failures"] == 0
        # the event whose plans failed on the outage is not lost: it waits for its retry (once)
        assert s["queue"]["depth"] == 1 and len(s["queue"]["retries"]) == 1, s["queue"]
        assert s["queue"]["retries"][0]["retries"] == 2, s["queue"]
        assert all("500" in r["last_error"] for r in s["queue"]["retries"]), s["queue"]["retries"]
    finally:
        assert d.stop() == 0
