"""Cycle overhead without the LLM and without check time, next to the raw cost of what a cycle must do.

In process: real ``Cycle`` with real ``State``, real ``ResilientMemory`` over chromadb (local
embeddings), real act and journal, on a temporary git workspace. The planner at the Planner seam
answers instantly with an edit that bumps a counter; the only check is ``true``, and its measured
duration is subtracted. So ``overhead = cycle wall time - check time`` is everything autod itself
spends on one cycle.

The floor is measured in the same run on the same store: one query embedding, three raw
``collection.query`` calls, one atomic file write (temp + fsync + rename + dir fsync), one sqlite
commit (WAL, synchronous=FULL) -- and, composed from measured unit costs, everything a cycle cannot
avoid (3 embeddings, 4 queries, 2 store writes, 2 fsynced file writes, 4 commits, one ``git diff``).

End to end (separately): ``autod run`` as a subprocess with a scripted LLM on 127.0.0.1; cycles are
triggered over the control socket and read back from the reflection records, so the HTTP round
trip to the LLM counts.

    python bench/bench_cycle.py            # 200 cycles in process, 60 end to end
    python bench/bench_cycle.py --quick    # 40 and 15
    python bench/bench_cycle.py --metrics  # the same in-process cycles without and with the Prometheus
                                           # metrics (issue 22), interleaved, side by side
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the scripted loopback LLM used by the end-to-end part

import yaml  # noqa: E402

from autod.config.settings import Settings, load_config  # noqa: E402
from autod.events import Event, EventKind, fingerprint  # noqa: E402
from autod.plan import Edit, Plan  # noqa: E402
from autod.planner import PlanRequest, PlanResult, TokenUsage  # noqa: E402

GOAL_MS = 150
WARMUP = 5
COUNTER = "src/counter.py"


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return round(ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))], 2)


def summary(values: list[float]) -> dict[str, float]:
    return {"p50": pct(values, 50), "p95": pct(values, 95), "mean": round(statistics.fmean(values), 2)}


def make_workspace(root: Path) -> Path:
    """A small git repository: a counter the plans bump, a module the failure excerpt points into."""
    ws = root / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / COUNTER).write_text("N = 0\n")
    (ws / "src" / "calc.py").write_text(
        "def add(a, b):\n    return a - b\n\n\ndef total(xs):\n    return sum(add(x, 0) for x in xs)\n"
    )
    (ws / ".gitignore").write_text(".autod/\n")
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=b", "-c", "user.email=b@x", "commit", "-qm", "i"],
    ):
        subprocess.run(["git", "-C", str(ws), *args], check=True, capture_output=True)
    return ws


def config_doc(ws: Path, state: Path, llm_url: str | None) -> dict[str, Any]:
    return {
        "workspace": str(ws),
        "state_dir": str(state),
        "modes": {
            "auto-debug": {"enabled": True, "max_attempts_per_cycle": 1},
            "auto-plan": {"enabled": False},
        },
        "checks": {"ok": {"run": "true", "timeout_s": 30, "when": ["manual"]}},
        "llm": {"base_url": llm_url, "model": "bench", "timeout_s": 30, "request_timeout_s": 10},
        "limits": {"min_interval_s": 0, "max_cycles_per_hour": 10000, "max_edits_per_day": 100000},
        "logging": {"level": "info"},
    }


def bump_plan(i: int) -> Plan:
    return Plan(
        summary=f"bump the counter to {i + 1}",
        edits=[Edit(path=COUNTER, search=f"N = {i}", replace=f"N = {i + 1}")],
        verify=["ok"],
    )


class CounterPlanner:
    """The Planner seam answered instantly: each plan bumps the counter by one."""

    def __init__(self) -> None:
        self.n = 0

    async def plan(self, request: PlanRequest) -> PlanResult:
        plan = bump_plan(self.n)
        self.n += 1
        return PlanResult(plan, TokenUsage(0, 0))


def failure_event(i: int) -> Event:
    """A check failure with a traceback into src/calc.py; five recurring failures, like a real repo."""
    k = i % 5
    excerpt = (
        "Traceback (most recent call last):\n"
        '  File "src/calc.py", line 6, in total\n'
        "    return sum(add(x, 0) for x in xs)\n"
        '  File "src/calc.py", line 2, in add\n'
        "    return a - b\n"
        f"AssertionError: case_{k} expected the sum\n"
    )
    return Event(
        source="check:ok",
        kind=EventKind.CHECK_FAILED,
        summary=f"check ok failed: AssertionError case_{k}",
        payload={"check": "ok", "excerpt": excerpt, "failures": 1, "exit_code": 1},
        fingerprint=fingerprint("check_failed", "ok", f"case_{k}"),
    )


# -- in process ----------------------------------------------------------------------------------
async def in_process(root: Path, n: int) -> dict[str, Any]:
    from autod import logs
    from autod.cycle.limits import CircuitBreaker, Gate
    from autod.cycle.phases import Cycle, CycleDeps
    from autod.memory.resilient import ResilientMemory
    from autod.modes import ModeEnv
    from autod.modes.debug import DebugMode
    from autod.ownwrites import OwnWrites
    from autod.stores.state import State

    ws = make_workspace(root)
    cfg_path = root / "autod.yaml"
    cfg_path.write_text(yaml.safe_dump(config_doc(ws, root / "state", None)))
    settings = load_config(cfg_path)
    logs.configure_logging(level="info", file=settings.log_file, stderr=False)  # the real log lines
    state = State(settings.state_path / "state.db")
    memory = await ResilientMemory.start(settings.memory, settings.state_path, workspace=settings.workspace)
    assert await memory.wait_open(60), memory.summary()

    async def run_check(name: str) -> Any:
        from autod.checks.run import run_check as rc

        return await rc(name, settings.checks[name], settings.workspace, settings=settings)

    breaker = CircuitBreaker(settings.llm.circuit_failures, settings.llm.circuit_cooldown_s)
    env = ModeEnv(settings=settings, state=state, memory=memory, run_check=run_check)
    deps = CycleDeps(
        env=env,
        gate=Gate(settings.limits, state, breaker),
        planner=CounterPlanner(),
        planner_name="llm",
        own_writes=OwnWrites(),
        breaker=breaker,
    )
    mode = DebugMode()
    # Back to back: each cycle also pays for the memory writes the previous one deferred (the
    # throughput-bound case). Then settled: the background writer catches up between cycles,
    # as it does when cycles are min_interval_s (default 5 s) and an LLM call apart.
    back_to_back: list[float] = []
    for i in range(WARMUP + n):
        t0 = time.perf_counter()
        r = await Cycle(deps, mode, failure_event(10_000 + i)).run()
        if i >= WARMUP:
            back_to_back.append((time.perf_counter() - t0) * 1000 - sum(c["duration_ms"] for c in r.checks))
    background: list[float] = []
    overhead: list[float] = []
    wall: list[float] = []
    checks: list[float] = []
    phases: dict[str, list[float]] = {"observe": [], "plan": [], "act_minus_check": [], "reflect": []}
    statuses: dict[str, int] = {}
    for i in range(WARMUP + n):
        tf = time.perf_counter()
        await memory.flush()  # the previous cycle's deferred episode, lesson and observation
        background.append((time.perf_counter() - tf) * 1000)
        t0 = time.perf_counter()
        r = await Cycle(deps, mode, failure_event(i)).run()
        ms = (time.perf_counter() - t0) * 1000
        statuses[r.status] = statuses.get(r.status, 0) + 1
        if r.status != "fixed":
            raise SystemExit(f"cycle {i} ended {r.status}: {r.reason}")
        if i < WARMUP:
            continue
        check_ms = float(sum(c["duration_ms"] for c in r.checks))
        wall.append(ms)
        checks.append(check_ms)
        overhead.append(ms - check_ms)
        d = r.durations_ms
        phases["observe"].append(d.get("observe", 0))
        phases["plan"].append(d.get("plan", 0))
        phases["act_minus_check"].append(d.get("act", 0) - check_ms)
        phases["reflect"].append(d.get("reflect", 0))
    floor = await measure_floor(memory, settings, n_samples=max(20, n // 2))
    await memory.close()
    state.close()
    return {
        "cycles": n,
        "warmup_cycles": WARMUP,
        "statuses": statuses,
        "overhead_ms": summary(overhead),
        "overhead_is": "one cycle once the background memory writer has caught up (cycles apart in time)",
        "background_memory_write_ms": summary(background[WARMUP:]),
        "back_to_back_overhead_ms": summary(back_to_back),
        "wall_ms": summary(wall),
        "check_ms": summary(checks),
        "phases_ms_p50": {k: pct(v, 50) for k, v in phases.items()},
        "phases_ms_p95": {k: pct(v, 95) for k, v in phases.items()},
        "floor": floor,
        "overhead_over_floor_p50": round(pct(overhead, 50) / floor["cycle_io_ms"], 2),
        "goal_ms": GOAL_MS,
        "goal_met_p50": pct(overhead, 50) <= GOAL_MS,
        "goal_met_p95": pct(overhead, 95) <= GOAL_MS,
    }


async def metrics_ab(root: Path, n: int) -> dict[str, Any]:
    """In-process cycles alternately without and with every metric update a daemon makes (the planner
    and mode wrappers, the check counter, the dispatcher's observer), on one store and workspace, so
    drift hits both alike. Also the raw cost of one cycle's metric updates."""
    from autod import logs
    from autod.cycle.limits import CircuitBreaker, Gate
    from autod.cycle.phases import Cycle, CycleDeps
    from autod.memory.resilient import ResilientMemory
    from autod.metrics.observe import CycleMetrics, MeteredPlanner, TimedMode, check_ran
    from autod.metrics.registry import Metrics
    from autod.modes import ModeEnv
    from autod.modes.debug import DebugMode
    from autod.ownwrites import OwnWrites
    from autod.stores.state import State

    ws = make_workspace(root)
    cfg_path = root / "autod.yaml"
    cfg_path.write_text(yaml.safe_dump(config_doc(ws, root / "state", None)))
    settings = load_config(cfg_path)
    logs.configure_logging(level="info", file=settings.log_file, stderr=False)
    state = State(settings.state_path / "state.db")
    memory = await ResilientMemory.start(settings.memory, settings.state_path, workspace=settings.workspace)
    assert await memory.wait_open(60), memory.summary()
    metrics = Metrics()
    metered = {"on": False}

    async def run_check(name: str, **kw: Any) -> Any:
        from autod.checks.run import run_check as rc

        result = await rc(name, settings.checks[name], settings.workspace, settings=settings, **kw)
        if metered["on"]:
            check_ran(metrics, result)
        return result

    breaker = CircuitBreaker(settings.llm.circuit_failures, settings.llm.circuit_cooldown_s)
    env = ModeEnv(settings=settings, state=state, memory=memory, run_check=run_check)
    planner = CounterPlanner()
    gate = Gate(settings.limits, state, breaker)
    common = {"env": env, "gate": gate, "planner_name": "llm", "own_writes": OwnWrites(), "breaker": breaker}
    plain = (CycleDeps(planner=planner, **common), DebugMode())
    metered_deps = CycleDeps(planner=MeteredPlanner(planner, metrics), **common)
    with_metrics = (metered_deps, TimedMode(DebugMode(), metrics))
    observer = CycleMetrics(metrics)
    ms: dict[str, list[float]] = {"without_metrics": [], "with_metrics": []}
    for i in range(2 * (WARMUP + n)):
        on = i % 2 == 1
        metered["on"] = on
        deps, mode = with_metrics if on else plain
        await memory.flush()  # settled, as in the main in-process figure
        t0 = time.perf_counter()
        cycle = Cycle(deps, mode, failure_event(i))
        r = await cycle.run()
        if on:
            await observer.cycle_finished(cycle)  # what the dispatcher does right after
        took = (time.perf_counter() - t0) * 1000 - sum(c["duration_ms"] for c in r.checks)
        if r.status != "fixed":
            raise SystemExit(f"cycle {i} ended {r.status}: {r.reason}")
        if i >= 2 * WARMUP:
            ms["with_metrics" if on else "without_metrics"].append(took)
    record = r.record()
    updates = 20_000
    t0 = time.perf_counter()
    for _ in range(updates):
        metrics.cycle_finished(record)
        metrics.check_ran("ok", exit_code=0, duration_ms=3, sandbox="bwrap", timed_out=False, error=None)
    per_cycle_us = (time.perf_counter() - t0) / updates * 1e6
    await memory.close()
    state.close()
    a, b = summary(ms["without_metrics"]), summary(ms["with_metrics"])
    return {
        "cycles_each": n,
        "overhead_ms": {"without_metrics": a, "with_metrics": b},
        "difference_ms": {k: round(b[k] - a[k], 2) for k in a},
        "metric_updates_per_cycle_us": round(per_cycle_us, 1),
        "scrape_bytes": len(metrics.exposition()),
    }


def side_by_side(ab: dict[str, Any]) -> str:
    """The A/B figures as a small table for a person."""
    a, b = ab["overhead_ms"]["without_metrics"], ab["overhead_ms"]["with_metrics"]
    lines = [f"{'cycle overhead (ms)':<22}{'without metrics':>17}{'with metrics':>15}{'difference':>12}"]
    for k in ("p50", "p95", "mean"):
        lines.append(f"{k:<22}{a[k]:>17.2f}{b[k]:>15.2f}{b[k] - a[k]:>+12.2f}")
    lines.append(f"one cycle's metric updates: {ab['metric_updates_per_cycle_us']} us"
                 f" ({ab['cycles_each']} cycles each, interleaved)")
    return "\n".join(lines)


def _timed(fn: Any, samples: int) -> float:
    """p50 milliseconds of fn()."""
    out = []
    for _ in range(samples):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return pct(out, 50)


async def measure_floor(memory: Any, settings: Settings, n_samples: int) -> dict[str, Any]:
    """Raw unit costs on the same store, embedder, disk and repository, and two sums of them."""
    from autod.memory import Tier

    raw = memory._store  # the ChromaMemory under the resilient wrapper
    embedder, cols = raw._embedder, raw._cols  # the raw parts under the store: that is the floor
    text = "check ok failed: AssertionError case_1\nTraceback ... src/calc.py line 2 in add"
    vector = embedder.embed([text])[0]
    tmp = Path(tempfile.mkdtemp(dir=settings.state_path))

    def embed() -> None:
        embedder.embed([text])

    def three_queries() -> None:
        for tier in (Tier.N0, Tier.N1, Tier.N2):
            col = cols[tier]
            col.query(
                query_embeddings=[vector],
                n_results=max(1, min(8, col.count())),
                include=["documents", "metadatas", "distances"],
            )

    def one_query() -> None:
        cols[Tier.N1].query(query_embeddings=[vector], n_results=5, include=["metadatas", "distances"])

    counter = iter(range(10**9))

    def chroma_add() -> None:
        i = next(counter)
        cols[Tier.N1].add(ids=[f"floor-{i}"], embeddings=[vector], documents=[text], metadatas=[{"f": 1}])

    target = tmp / "file.py"
    target.write_text("N = 0\n")

    def atomic_write() -> None:
        part = tmp / ".file.py.tmp"
        with open(part, "wb") as f:
            f.write(b"N = 1\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(part, target)
        dfd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    con = sqlite3.connect(tmp / "floor.db", isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")

    def sqlite_commit() -> None:
        con.execute("INSERT INTO t (v) VALUES (?)", ("x" * 200,))

    def git_diff() -> None:
        subprocess.run(
            ["git", "-C", str(settings.workspace), "diff", "--no-color", "HEAD"],
            capture_output=True,
            check=True,
        )

    def true_spawn() -> None:
        subprocess.run(["true"], check=True)

    u = {
        "embed_ms": _timed(embed, n_samples),
        "three_queries_ms": _timed(three_queries, n_samples),
        "query_ms": _timed(one_query, n_samples),
        "store_add_ms": _timed(chroma_add, n_samples),
        "atomic_write_ms": _timed(atomic_write, n_samples),
        "sqlite_commit_ms": _timed(sqlite_commit, n_samples),
        "git_diff_ms": _timed(git_diff, n_samples),
        "spawn_true_ms": _timed(true_spawn, n_samples),
    }
    con.close()
    shutil.rmtree(tmp, ignore_errors=True)
    minimal = u["embed_ms"] + u["three_queries_ms"] + u["atomic_write_ms"] + u["sqlite_commit_ms"]
    cycle_io = (
        3 * u["embed_ms"]
        + u["three_queries_ms"]
        + u["query_ms"]
        + 2 * u["store_add_ms"]
        + 2 * u["atomic_write_ms"]
        + 4 * u["sqlite_commit_ms"]
        + u["git_diff_ms"]
    )
    return {
        "units": u,
        "minimal_ms": round(minimal, 2),
        "minimal_is": "1 embedding + 3 queries + 1 atomic write + 1 sqlite commit",
        "cycle_io_ms": round(cycle_io, 2),
        "cycle_io_is": "3 embeddings + 4 queries + 2 store adds + 2 atomic writes + 4 commits + git diff",
        "items_in_store": {str(t): cols[t].count() for t in (Tier.N0, Tier.N1, Tier.N2)},
    }


# -- end to end through `autod run` ---------------------------------------------------------------
def read_reflections(log_file: Path) -> list[dict[str, Any]]:
    out = []
    if not log_file.exists():
        return out
    for line in log_file.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if rec.get("phase") == "reflect" and "status" in rec:
            out.append(rec)
    return out


def wait_for(pred: Any, timeout: float, proc: subprocess.Popen[bytes], what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        if proc.poll() is not None:
            raise SystemExit(f"autod exited {proc.returncode} while waiting for {what}")
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")


def end_to_end(root: Path, n: int) -> dict[str, Any]:
    from llmserver import ScriptedLLM

    from autod.control.socket import request

    ws = make_workspace(root)
    llm = ScriptedLLM().start()
    try:
        cfg_path = root / "autod.yaml"
        cfg_path.write_text(yaml.safe_dump(config_doc(ws, root / "state", llm.base_url)))
        settings = load_config(cfg_path)
        env = {**os.environ, "ORT_DISABLE_TELEMETRY": "1"}
        env.pop("NOTIFY_SOCKET", None)
        proc = subprocess.Popen(
            [sys.executable, "-m", "autod.cli.main", "run", "-c", str(cfg_path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=root,
        )
        try:
            sock = settings.state_path / "autod.sock"
            wait_for(sock.exists, 120, proc, "the control socket")
            overhead, phases, totals = (
                [],
                {"observe": [], "plan": [], "act_minus_check": [], "reflect": []},
                [],
            )
            for i in range(WARMUP + n):
                llm.push_plan(bump_plan(i).model_dump())
                reply = request(settings, "trigger", mode="auto-debug", message=f"bench {i}")
                if not reply.get("ok"):
                    raise SystemExit(f"trigger refused: {reply}")
                recs = wait_for(
                    lambda i=i: (r := read_reflections(settings.log_file))[i:] and r,
                    60,
                    proc,
                    f"reflection {i}",
                )
                r = recs[i]
                if r["status"] != "fixed":
                    raise SystemExit(f"end-to-end cycle {i} ended {r['status']}: {r.get('reason')}")
                if i < WARMUP:
                    continue
                d = r["durations_ms"]
                check_ms = sum(c["duration_ms"] for c in r["checks"])
                total = sum(d.values())
                totals.append(total)
                overhead.append(total - check_ms)
                phases["observe"].append(d.get("observe", 0))
                phases["plan"].append(d.get("plan", 0))
                phases["act_minus_check"].append(d.get("act", 0) - check_ms)
                phases["reflect"].append(d.get("reflect", 0))
        finally:
            proc.terminate()
            proc.wait(60)
    finally:
        llm.stop()
    return {
        "cycles": n,
        "overhead_ms": summary(overhead),
        "phase_sum_ms": summary(totals),
        "phases_ms_p50": {k: pct(v, 50) for k, v in phases.items()},
        "includes": "the HTTP round trip to a loopback LLM that answers at once, plus the JSON log writes",
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="40 cycles in process, 15 end to end")
    parser.add_argument("--no-e2e", action="store_true", help="skip the `autod run` part")
    parser.add_argument("--metrics", action="store_true", help="only: cycles without and with metrics, A/B")
    args = parser.parse_args()
    n, n_e2e = (40, 15) if args.quick else (200, 60)
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    if args.metrics:
        with tempfile.TemporaryDirectory() as tmp:
            ab = asyncio.run(metrics_ab(Path(tmp), n))
        print(side_by_side(ab), file=sys.stderr)
        print(json.dumps({"benchmark": "cycle", "profile": "metrics_ab", "metrics_ab": ab}, indent=2))
        return
    doc: dict[str, Any] = {
        "benchmark": "cycle",
        "profile": "quick" if args.quick else "full",
        "goal_ms": GOAL_MS,
    }
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "a").mkdir()
        doc["in_process"] = asyncio.run(in_process(Path(tmp) / "a", n))
        if not args.no_e2e:
            (Path(tmp) / "b").mkdir()
            doc["end_to_end"] = end_to_end(Path(tmp) / "b", n_e2e)
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
