"""Run every benchmark in bench/ as a subprocess and print one JSON document with all their results.

    python -m bench                  # every bench_*.py with --quick (minutes on 2 cores)
    python -m bench --full           # the full profiles (much longer)
    python bench/run_all.py --only cycle idle

A benchmark that fails or prints no JSON is reported in the document with its exit code and the
tail of its stderr; the others still run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
STDERR_TAIL = 4000


def discover() -> dict[str, Path]:
    """name -> script for every bench/bench_NAME.py, in name order."""
    return {p.stem.removeprefix("bench_"): p for p in sorted(BENCH_DIR.glob("bench_*.py"))}


def parse_json(stdout: str) -> Any:
    """The benchmark's JSON document (the whole stdout, else its last line that parses)."""
    text = stdout.strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    for line in reversed(text.splitlines()):
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            continue
    raise ValueError("no JSON document on stdout")


def run_one(script: Path, *, full: bool, timeout_s: float) -> dict[str, Any]:
    """Run one benchmark; never raises: a failure is described in the returned dict."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    env.setdefault("ORT_DISABLE_TELEMETRY", "1")
    cmd = [sys.executable, str(script), *([] if full else ["--quick"])]
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return {"ok": False, "error": f"timed out after {timeout_s:.0f} s", "stderr_tail": err[-STDERR_TAIL:]}
    elapsed = round(time.monotonic() - start, 1)
    if proc.returncode != 0:
        return {
            "ok": False,
            "error": f"exit code {proc.returncode}",
            "elapsed_s": elapsed,
            "stderr_tail": proc.stderr[-STDERR_TAIL:],
        }
    try:
        result = parse_json(proc.stdout)
    except ValueError as exc:
        return {
            "ok": False,
            "error": str(exc),
            "elapsed_s": elapsed,
            "stderr_tail": proc.stderr[-STDERR_TAIL:],
        }
    return {"ok": True, "elapsed_s": elapsed, "result": result}


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    info: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["mem_total_mb"] = round(int(line.split()[1]) / 1024)
                break
    except OSError:
        pass
    info["load_avg_1m_at_start"] = round(os.getloadavg()[0], 2)
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    profile = parser.add_mutually_exclusive_group()
    profile.add_argument("--quick", action="store_true", help="small profiles (the default)")
    profile.add_argument("--full", action="store_true", help="the full profiles")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these (e.g. cycle idle)")
    parser.add_argument(
        "--timeout", type=float, default=None, help="seconds per benchmark (default 900/3600)"
    )
    args = parser.parse_args(argv)

    scripts = discover()
    if args.only:
        unknown = sorted(set(args.only) - set(scripts))
        if unknown:
            parser.error(f"no such benchmark: {', '.join(unknown)} (have: {', '.join(scripts)})")
        scripts = {name: scripts[name] for name in args.only}
    timeout_s = args.timeout or (3600.0 if args.full else 900.0)
    doc: dict[str, Any] = {
        "profile": "full" if args.full else "quick",
        "machine": machine(),
        "benchmarks": {},
    }
    for name, script in scripts.items():
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        outcome = run_one(script, full=args.full, timeout_s=timeout_s)
        if outcome.pop("ok"):
            doc["benchmarks"][name] = outcome["result"]
            doc.setdefault("elapsed_s", {})[name] = outcome["elapsed_s"]
        else:
            doc["benchmarks"][name] = {"failed": True, **outcome}
    doc["failed"] = sorted(n for n, r in doc["benchmarks"].items() if isinstance(r, dict) and r.get("failed"))
    print(json.dumps(doc, indent=2))
    return 1 if doc["failed"] else 0


if __name__ == "__main__":
    if __package__ in (None, ""):
        sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
