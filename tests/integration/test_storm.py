"""Event storm through the real sources of `autod run` (CI: 20,000 log lines; AUTOD_STORM_FULL=1: 100,000).

The daemon starts paused, so what the sources produce stays in the durable queue where the test
can read it: a build log receives a burst of error lines -- a few recurring failures (line numbers
varying) interleaved with rare unique ones -- while a burst of files is written under a watched
directory. The queue must coalesce (its depth never exceeds the number of distinct failures),
every distinct failure must reach it, and the daemon's RSS must stay bounded.
"""

from __future__ import annotations

import json
import os
import sqlite3
import string
import time
from pathlib import Path

import pytest
import yaml
from daemon import Autod, run_cli

pytestmark = pytest.mark.slow

FULL = os.environ.get("AUTOD_STORM_FULL") == "1"
LINES = 100_000 if FULL else 20_000
FILES = 10_000 if FULL else 2_000
RECURRING = ["alpha", "bravo", "charlie", "delta", "echo"]
UNIQUE = [f"uniq_{a}{b}" for a in string.ascii_lowercase[:8] for b in string.ascii_lowercase[:5]]  # 40


def error_line(name: str, line: int) -> str:
    return f"src/{name}.c:{line}:5: error: '{name}_value' undeclared (first use in this function)\n"


def storm_lines() -> list[str]:
    """LINES error lines: recurring failures everywhere, one unique failure every LINES/40 lines."""
    every = LINES // len(UNIQUE)
    out = []
    for i in range(LINES):
        if i % every == every // 2:
            out.append(error_line(UNIQUE[i // every], i % 900 + 1))
        else:
            out.append(error_line(RECURRING[i % len(RECURRING)], i % 900 + 1))
    return out


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def pending(queue_db: Path) -> list[tuple[str, str]]:
    """(summary + payload, fingerprint) of every pending event in the daemon's queue."""
    with sqlite3.connect(f"file:{queue_db}?mode=ro", uri=True, timeout=10) as db:
        rows = db.execute(
            "SELECT summary, payload, fingerprint FROM events WHERE status = 'pending'"
        ).fetchall()
    return [(f"{s}\n{p}", fp) for s, p, fp in rows]


def test_a_storm_of_log_errors_and_file_writes_coalesces_in_the_queue_and_loses_no_distinct_failure(
    tmp_path,
):
    ws = tmp_path / "repo"
    (ws / "src").mkdir(parents=True)
    build_log = ws / "build.log"
    build_log.write_text("")
    state = tmp_path / "state"
    cfg = {
        "workspace": str(ws),
        "state_dir": str(state),
        "modes": {"auto-debug": {"enabled": True}, "auto-plan": {"enabled": False}},
        "checks": {"ok": {"run": "true", "timeout_s": 30, "when": ["manual"]}},
        "sources": [
            {"type": "watch", "paths": ["src"], "settle_ms": 200},
            {"type": "logtail", "path": str(build_log), "from_start": True},
        ],
        "llm": {"base_url": None},
        "logging": {"level": "info"},
    }
    config = tmp_path / "autod.yaml"
    config.write_text(yaml.safe_dump(cfg))
    assert run_cli("pause", "-c", str(config)).returncode == 0  # stored for the next start
    d = Autod(config, log_file=state / "logs" / "autod.jsonl").start()
    try:
        # RSS from here is the storm's: the embedding model is loaded and every source is armed
        d.wait_for(lambda recs: any(r.get("event") == "memory.warmed" for r in recs), 120, "the model")
        d.wait_ready(timeout=120)
        before = rss_kb(d.proc.pid)
        lines = storm_lines()
        peak, max_depth = before, 0
        chunk = max(1, LINES // 20)
        with build_log.open("a") as log:
            for n, start in enumerate(range(0, LINES, chunk)):
                log.writelines(lines[start : start + chunk])
                log.flush()
                for j in range(FILES // 20):  # the save storm, interleaved with the log burst
                    (ws / "src" / f"f{n}_{j}.py").write_text(f"X = {j}\n")
                max_depth = max(max_depth, len(pending(state / "queue.db")))
                peak = max(peak, rss_kb(d.proc.pid))

        want = set(UNIQUE) | set(RECURRING)
        deadline = time.monotonic() + 120
        while True:
            rows = pending(state / "queue.db")
            max_depth = max(max_depth, len(rows))
            peak = max(peak, rss_kb(d.proc.pid))
            seen = {name for name in want if any(f"'{name}_value'" in text for text, _ in rows)}
            if seen == want or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        status = json.loads(run_cli("status", "--json", "-c", str(config)).stdout)
    finally:
        assert d.stop() == 0

    assert seen == want, f"failures that never reached the queue: {sorted(want - seen)}"
    assert len({fp for _, fp in rows}) == len(rows) == len(want)  # one pending event per distinct failure
    assert max_depth <= len(want)  # coalesced all along: never more rows than distinct failures
    assert status["paused"] is True
    watch = [s for s in status["sources"] if s["kind"] == "watch"]
    assert watch and watch[0]["events"] >= 1 and watch[0]["state"] == "running", status["sources"]
    growth_mb = (peak - before) / 1024
    assert growth_mb < 150, f"RSS grew {growth_mb:.0f} MB during the storm ({before} -> {peak} kB)"
