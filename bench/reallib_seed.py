"""Seed bugs into real libraries automatically, for bench_reallib: nobody picks or words them.

For each library (LIBRARIES: real pure-Python PyPI sdists whose own pytest suites pass in this venv
without extra dependencies), with a fixed RNG seed per library: shuffle every definition of the
library's code (functions and methods, innermost, and module- or class-level constants; never the
tests), take them in that order, draw a mutation operator among those that apply to the definition
and a site for it (bench/reallib_mutate.py), and keep the mutant only when the file still parses and
the library's suite, green before, now has between MIN_FAILING and MAX_FAILING failing tests. Each
kept bug is traced (bench/reallib_depth.py) for its depth: the call distance from the nearest failing
test to the mutated definition. At most half of a library's bugs may be at depth 1 while deeper ones
can still be found, so the set has varied depths. The list is written to bench/reallib_bugs.json,
committed, so every rerun measures the same bugs.

    python bench/reallib_seed.py              # (re)seed every library, ~30-60 min on 2 cores
    python bench/reallib_seed.py --only parse --per-library 10
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import reallib_mutate as mutate  # noqa: E402

BUGS_FILE = BENCH / "reallib_bugs.json"
SEED = 19  # the issue this bench answers; never changed to get a different set
MIN_FAILING, MAX_FAILING = 1, 20
PER_LIBRARY = 10
MAX_TRIES = 120  # mutants run per library, at most
MAX_DEPTH1_SHARE = 0.5


@dataclass(frozen=True)
class Library:
    """A real library and the check an operator would configure for it."""

    name: str  # on PyPI
    version: str
    package: str  # the library's code, relative to the sdist's top directory
    tests: str  # its test directory
    shape: str  # why it is in the set
    args: str = ""  # extra pytest arguments (`-o addopts=`: its addopts need pytest-cov)
    env: dict[str, str] = field(default_factory=dict)

    def command(self, python: str = sys.executable) -> str:
        return " ".join(x for x in (f"{python} -m pytest -q -p no:cacheprovider", self.args, self.tests) if x)


LIBRARIES = {
    lib.name: lib
    for lib in (
        Library("parse", "1.22.4", "parse", "tests",
                "one 1,100-line module: a Parser class whose methods build regexes through helpers; "
                "converters passed around as callables", args="-o addopts="),
        Library("semver", "3.1.2", "src/semver", "tests",
                "a Version class with operators through a comparator decorator; module-level constants",
                args="-o addopts="),
        Library("sqlparse", "0.6.1", "sqlparse", "tests",
                "deep call chains: format/parse -> filter stack -> lexer -> grouping functions on token "
                "lists whose type is only known at run time"),
        Library("pyflakes", "4.1.0", "pyflakes", "pyflakes/test",
                "an AST visitor that dispatches by getattr on node class names; tests go through a "
                "harness helper (self.flakes)"),
        Library("cachetools", "8.0.2", "src/cachetools", "tests",
                "cache classes over a base class, reached through decorators (cached, cachedmethod) "
                "and key functions", env={"PYTHONPATH": "src"}),
        Library("tabulate", "0.10.0", "tabulate", "test",
                "a 3,000-line module: module-level format tables (constants of namedtuples and "
                "lambdas), long functions, helpers called through those tables"),
    )
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- the library ----------------------------------------------------------------------------------
def sdist(lib: Library) -> Path:
    from bench_localize import fetch  # the same cache and pip download as bench_localize

    return fetch(lib.name, lib.version)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def extract(lib: Library, dest: Path) -> Path:
    from bench_localize import extract as untar

    dest.mkdir(parents=True, exist_ok=True)
    return untar(sdist(lib), dest)


def code_files(root: Path, lib: Library) -> list[str]:
    """The library's own Python files (relative to root), tests left out."""
    from autod.localize.frames import is_test_path

    out = []
    for p in sorted((root / lib.package).rglob("*.py")):
        rel = p.relative_to(root).as_posix()
        if not is_test_path(rel) and not rel.startswith(f"{lib.tests}/"):
            out.append(rel)
    return out


# -- running its suite ----------------------------------------------------------------------------
_COUNT = re.compile(r"(\d+) (failed|errors?|passed)\b")


def run_suite(
    root: Path, lib: Library, *, timeout_s: float, extra: list[str] | None = None,
    env: dict[str, str] | None = None, nodeids: list[str] | None = None,
) -> dict[str, Any]:
    """Run the library's tests (or some of them) the way its check does: counts and failing ids."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", "--maxfail=30",
           *lib.args.split(), *(extra or []), *(nodeids or [lib.tests])]
    full_env = {**os.environ, **lib.env, **(env or {})}
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=root, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"timeout": True, "seconds": round(time.monotonic() - started, 1)}
    counts = {"failed": 0, "errors": 0, "passed": 0}
    tail = "\n".join(out.splitlines()[-3:])
    for n, what in _COUNT.findall(tail):
        counts["errors" if what.startswith("error") else what] += int(n)
    return {
        "rc": proc.returncode, **counts, "failing": failing_ids(out),
        "collection_error": "ERROR collecting" in out or "Interrupted" in out,
        "seconds": round(time.monotonic() - started, 1), "output": out,
    }


def failing_ids(output: str) -> list[str]:
    """Test ids of the FAILED/ERROR lines of pytest's short summary (not a test's own log lines); a
    failed subtest (`SUBFAILED(a=2, b=3) tests/t.py::T::test_x - ...`, pytest 9) names its test."""
    _, banner, summary = output.rpartition("short test summary info")
    ids = []
    for ln in summary.splitlines() if banner else []:
        m = _SUMMARY_LINE.match(ln)
        if m:
            test = m.group(1).split(" - ")[0].strip()
            if "::" in test or test.endswith(".py"):
                ids.append(test)
    return list(dict.fromkeys(ids))


_SUMMARY_LINE = re.compile(r"(?:FAILED|ERROR|SUBFAIL(?:ED)?(?:\[.*?\])?(?: ?\(.*?\))?) (\S.*)$")


def trace_depth(root: Path, lib: Library, rel: str, target: mutate.Target, failing: list[str],
                timeout_s: float) -> dict[str, Any]:
    """The nearest failing test's call distance to the target, from a profiled re-run of those tests."""
    with tempfile.TemporaryDirectory(prefix="reallib-depth-") as tmp:
        out = Path(tmp) / "depth.jsonl"
        name = target.qualname.rsplit(".", 1)[-1]
        spec = {"file": os.path.realpath(root / rel), "start": target.start, "end": target.end,
                "name": name, "kind": target.kind}
        pypath = os.pathsep.join(filter(None, [str(BENCH), lib.env.get("PYTHONPATH", "")]))
        env = {"REALLIB_DEPTH_TARGET": json.dumps(spec), "REALLIB_DEPTH_OUT": str(out),
               "REALLIB_DEPTH_TESTS": str(root / lib.tests), "PYTHONPATH": pypath}
        run_suite(root, lib, timeout_s=timeout_s, extra=["-p", "reallib_depth"], env=env,
                  nodeids=failing[:5])
        rows = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
    found = [r for r in rows if r.get("depth") is not None]
    if not found:
        return {"depth": None, "depth_via": None, "chain": []}
    best = min(found, key=lambda r: (r["via"] != "test", r["depth"]))
    return {"depth": best["depth"], "depth_via": best["via"], "chain": best["chain"],
            "traced_test": best["test"]}


# -- seeding ----------------------------------------------------------------------------------------
def seed_library(lib: Library, work: Path, want: int, max_tries: int) -> dict[str, Any]:
    root = extract(lib, work / lib.name)
    base = run_suite(root, lib, timeout_s=900)
    if base.get("timeout") or base["failed"] or base["errors"] or not base["passed"]:
        tail = base.get("output", "")[-800:]
        raise SystemExit(f"{lib.name}: its suite does not pass before any bug: {tail}")
    timeout_s = max(30.0, 3 * base["seconds"] + 15)
    log(f"{lib.name}: suite green, {base['passed']} passed in {base['seconds']} s")
    rng = random.Random(f"{SEED}:{lib.name}")
    pool = []
    for rel in code_files(root, lib):
        text = (root / rel).read_text(encoding="utf-8")
        pool += [(rel, t) for t in mutate.targets(text)]
    rng.shuffle(pool)
    kept: list[dict[str, Any]] = []
    overflow: list[dict[str, Any]] = []
    tally: dict[str, int] = {}
    tries = 0
    for rel, target in pool:
        if tries >= max_tries or len(kept) >= want:
            break
        path = root / rel
        text = path.read_text(encoding="utf-8")
        options = mutate.sites(text, target)
        if not options:
            continue
        op = rng.choice(sorted(options))
        site = rng.choice(options[op])
        new = mutate.apply(text, site)
        if new is None:
            tally["does not parse or changes nothing"] = tally.get("does not parse or changes nothing", 0) + 1
            continue
        tries += 1
        verdict, res, depth = try_mutant(root, lib, rel, text, new, target, timeout_s)
        tally[verdict] = tally.get(verdict, 0) + 1
        log(f"  [{tries}] {rel}::{target.qualname} {site.note}: {verdict}"
            + (f", depth {depth.get('depth')}" if depth else ""))
        if verdict != "kept":
            continue
        line, old_lines, new_lines = mutate.changed_lines(text, new)
        bug = {
            "library": lib.name, "file": rel, "qualname": target.qualname, "kind": target.kind,
            "operator": site.operator, "note": site.note, "line": line, "old": old_lines, "new": new_lines,
            "failing_count": len(res["failing"]), "failing_tests": res["failing"][:20], **depth,
        }
        depth1 = sum(1 for b in kept if b["depth"] == 1)
        if bug["depth"] == 1 and depth1 + 1 > MAX_DEPTH1_SHARE * want:
            overflow.append(bug)  # enough shallow ones: keep looking for deeper
            continue
        kept.append(bug)
    kept += overflow[: max(0, want - len(kept))]
    for i, bug in enumerate(kept, 1):
        bug["id"] = f"{lib.name}-{i:02d}"
    return {"library": lib.name, "tries": tries, "outcomes": tally, "baseline_passed": base["passed"],
            "suite_seconds": base["seconds"], "bugs": kept}


def try_mutant(root: Path, lib: Library, rel: str, text: str, new: str, target: mutate.Target,
               timeout_s: float) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Write the mutant, run the library's suite (and, for a kept one, the call depth), put the file
    back whatever happens: (verdict, the suite's result, depth)."""
    path = root / rel
    path.write_text(new, encoding="utf-8")
    try:
        res = run_suite(root, lib, timeout_s=timeout_s)
        verdict = _verdict(res)
        depth = (trace_depth(root, lib, rel, _retarget(new, target), res["failing"], timeout_s)
                 if verdict == "kept" else {})
    finally:
        path.write_text(text, encoding="utf-8")
    return verdict, res, depth


def _retarget(new_text: str, target: mutate.Target) -> mutate.Target:
    """The target's span in the mutated file (a removed branch shortens it)."""
    for t in mutate.targets(new_text):
        if t.qualname == target.qualname and abs(t.start - target.start) <= 2:
            return t
    return target


def _verdict(res: dict[str, Any]) -> str:
    if res.get("timeout"):
        return "hangs"
    if res["collection_error"]:
        return "breaks collection"
    n = res["failed"] + res["errors"]
    if n == 0:
        return "survives"
    if n < MIN_FAILING or n > MAX_FAILING or len(res["failing"]) > MAX_FAILING:
        return f"fails more than {MAX_FAILING} tests"
    return "kept"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="libraries to (re)seed; the others' bugs are kept")
    ap.add_argument("--per-library", type=int, default=PER_LIBRARY)
    ap.add_argument("--max-tries", type=int, default=MAX_TRIES)
    args = ap.parse_args()
    doc = json.loads(BUGS_FILE.read_text()) if BUGS_FILE.exists() else {"libraries": {}}
    names = args.only or list(LIBRARIES)
    with tempfile.TemporaryDirectory(prefix="reallib-seed-") as tmp:
        for name in names:
            lib = LIBRARIES[name]
            started = time.monotonic()
            res = seed_library(lib, Path(tmp), args.per_library, args.max_tries)
            res["seconds"] = round(time.monotonic() - started, 1)
            doc["libraries"][name] = {"version": lib.version, "sdist_sha256": sha256(sdist(lib)),
                                      **{k: v for k, v in res.items() if k != "library"}}
            log(f"{name}: kept {len(res['bugs'])} of {res['tries']} mutants run ({res['outcomes']})")
            doc.update(seed=SEED, min_failing=MIN_FAILING, max_failing=MAX_FAILING)
            BUGS_FILE.write_text(json.dumps(doc, indent=1) + "\n")


# -- using the list -----------------------------------------------------------------------------------
def load_bugs() -> list[dict[str, Any]]:
    doc = json.loads(BUGS_FILE.read_text())
    return [b for name in LIBRARIES for b in doc["libraries"].get(name, {}).get("bugs", [])]


def apply_bug(root: Path, bug: dict[str, Any]) -> tuple[str, str]:
    """Seed the bug into the tree at root: (pristine text, buggy text) of its file."""
    path = root / bug["file"]
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    at = bug["line"] - 1
    if lines[at : at + len(bug["old"])] != bug["old"]:
        raise ValueError(f"{bug['id']}: {bug['file']}:{bug['line']} is not the text the bug was seeded in")
    buggy = "".join([*lines[:at], *bug["new"], *lines[at + len(bug["old"]) :]])
    path.write_text(buggy, encoding="utf-8")
    return text, buggy


def fresh_tree(pristine: Path, dest: Path) -> Path:
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(pristine, dest, ignore=shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache"))
    return dest


if __name__ == "__main__":
    main()
