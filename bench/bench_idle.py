"""Idle cost of a running daemon: CPU %, RSS, threads and fds of `autod run` doing nothing.

`autod run` starts on a small git repository with a watch source, a logtail source, a cron source
and a check (`true`, at start and on change), no LLM. Once it is up and its start-up check has
run, /proc/<pid>/stat (utime + stime) and /proc/<pid>/status are sampled over the window (60 s;
`--quick`: 15 s). In the same window, side by side: the same daemon with only watch + cron, and
with no source at all (what each source costs), a bare `python -c "time.sleep()"` process and a
process running only `watchfiles.awatch` on the same tree (the floors).

    python bench/bench_idle.py [--quick] [--seconds N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

GOAL_CPU_PERCENT = 0.2
VARIANTS = {  # daemon name -> the source types it keeps (the check is always configured)
    "autod": {"watch", "logtail", "cron"},
    "autod_watch_cron_only": {"watch", "cron"},
    "autod_no_sources": set(),
}
TICKS = os.sysconf("SC_CLK_TCK")
AWATCH = (
    "import asyncio, sys, watchfiles\n"
    "async def main():\n"
    "    async for _ in watchfiles.awatch(sys.argv[1]):\n"
    "        pass\n"
    "asyncio.run(main())\n"
)


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process itself (its threads included), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # fields 14 and 15 of stat(5)


def status(pid: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key == "VmRSS":
            out["rss_mb"] = round(int(value.split()[0]) / 1024, 1)
        elif key == "Threads":
            out["threads"] = int(value)
    out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return out


def make_repo(root: Path) -> Path:
    ws = root / "repo"
    (ws / "src").mkdir(parents=True)
    (ws / "tests").mkdir()
    for i in range(50):
        (ws / "src" / f"mod{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n")
    (ws / "build.log").write_text("build started\n")
    (ws / ".gitignore").write_text(".autod/\nbuild.log\n")
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=b", "-c", "user.email=b@x", "commit", "-qm", "i"],
    ):
        subprocess.run(["git", "-C", str(ws), *args], check=True, capture_output=True)
    return ws


def config(ws: Path, state: Path) -> dict[str, Any]:
    return {
        "workspace": str(ws),
        "state_dir": str(state),
        "modes": {"auto-debug": {"enabled": True}, "auto-plan": {"enabled": False}},
        "checks": {"ok": {"run": "true", "timeout_s": 30, "when": ["start", "change"]}},
        "sources": [
            {"type": "watch", "paths": ["src", "tests"]},
            {"type": "logtail", "path": str(ws / "build.log")},
            {"type": "cron", "schedule": "*/30 * * * *", "mode": "auto-debug"},
        ],
        "llm": {"base_url": None},
        "logging": {"level": "info"},
    }


def wait_started(log_file: Path, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    """Until the daemon logged that it started and its start-up check ran."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"autod exited {proc.returncode} before it started")
        text = log_file.read_text(errors="replace") if log_file.exists() else ""
        if '"daemon.started"' in text and '"check.ran"' in text:
            return
        time.sleep(0.2)
    raise SystemExit("timed out waiting for autod to start")


def sample(pids: dict[str, int], seconds: float) -> dict[str, Any]:
    """CPU % over the window and the RSS/threads/fds at its start and end, for each process."""
    start = {name: (cpu_seconds(pid), status(pid)) for name, pid in pids.items()}
    t0 = time.monotonic()
    peak = {name: s["rss_mb"] for name, (_, s) in start.items()}
    while time.monotonic() - t0 < seconds:
        time.sleep(1.0)
        for name, pid in pids.items():
            peak[name] = max(peak[name], status(pid)["rss_mb"])
    wall = time.monotonic() - t0
    out = {}
    for name, pid in pids.items():
        cpu0, s0 = start[name]
        cpu = cpu_seconds(pid) - cpu0
        s1 = status(pid)
        out[name] = {
            "cpu_percent": round(100 * cpu / wall, 3),
            "cpu_seconds": round(cpu, 3),
            "rss_mb": s1["rss_mb"],
            "peak_rss_mb": peak[name],
            "threads": int(s1["threads"]),
            "fds": int(s1["fds"]),
            "fds_at_start": int(s0["fds"]),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a 15 s window instead of 60 s")
    parser.add_argument("--seconds", type=float, default=None, help="the sampling window")
    args = parser.parse_args()
    seconds = args.seconds or (15.0 if args.quick else 60.0)
    env = {**os.environ, "ORT_DISABLE_TELEMETRY": "1"}
    env.pop("NOTIFY_SOCKET", None)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ws = make_repo(root)
        daemons = {}  # the full setup, and two lighter ones that say what each source costs
        for name, keep in VARIANTS.items():
            cfg = config(ws, root / f"state-{name}")
            cfg["sources"] = [s for s in cfg["sources"] if s["type"] in keep]
            cfg_path = root / f"{name}.yaml"
            cfg_path.write_text(yaml.safe_dump(cfg))
            daemons[name] = cfg_path
        procs = {
            name: subprocess.Popen(
                [sys.executable, "-m", "autod.cli.main", "run", "-c", str(path)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                cwd=root,
            )
            for name, path in daemons.items()
        }
        procs["bare_python_sleep"] = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(100000)"]
        )
        procs["raw_awatch"] = subprocess.Popen([sys.executable, "-c", AWATCH, str(ws)])
        try:
            t0 = time.monotonic()
            for name in daemons:
                wait_started(root / f"state-{name}" / "logs" / "autod.jsonl", procs[name])
            startup_s = round(time.monotonic() - t0, 2)
            time.sleep(3.0)  # let start-up work (model load, first batch flush, check) settle
            figures = sample({name: p.pid for name, p in procs.items()}, seconds)
        finally:
            for p in procs.values():
                p.terminate()
            for p in procs.values():
                try:
                    p.wait(60)
                except subprocess.TimeoutExpired:
                    p.kill()
    autod = figures["autod"]
    print(
        json.dumps(
            {
                "benchmark": "idle",
                "profile": "quick" if args.quick else "full",
                "window_s": seconds,
                "sources": [
                    "watch (src, tests)",
                    "logtail (poll 0.25 s)",
                    "cron */30",
                    "check at start and on change",
                ],
                "startup_s_all_daemons": startup_s,
                "autod": autod,
                "autod_watch_cron_only": figures["autod_watch_cron_only"],
                "autod_no_sources": figures["autod_no_sources"],
                "baseline_bare_python": figures["bare_python_sleep"],
                "baseline_raw_awatch": figures["raw_awatch"],
                "goal_cpu_percent": GOAL_CPU_PERCENT,
                "goal_met": autod["cpu_percent"] < GOAL_CPU_PERCENT,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
