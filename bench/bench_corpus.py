"""Localization where nobody tuned it: sixteen more real libraries, side by side with a baseline.

The bugs: bench/corpus_bugs.json (bench/corpus_seed.py: mutation-seeded into twelve real PyPI libraries,
split before any rule was chosen into a `dev` half and a `held_out` half, and four more seeded after
every rule was, `fresh`) and bench/reallib_bugs.json (bench_reallib's six libraries, `old`). For each
bug, each side builds the auto-debug prompt the way bench_reallib's committed default does (the bug in
the repository's only commit, autod's defaults: a pytest check gets the coverage ranking; no model), in
a process of its own (bench/corpus_worker.py) whose `autod` is that side's: `baseline` is `git archive
REF autod/` (default: main), `autod` this checkout. The judgement is bench/corpus_hits.py's, the same
for both.

    python bench/bench_corpus.py                     # every set, both sides, ~2 h
    python bench/bench_corpus.py --cache /tmp/corpus # the same; each bug's tests run once for both sides
    python bench/bench_corpus.py --set dev --cache /tmp/corpus   # a tuning loop: seconds a bug
    python bench/bench_corpus.py --set held_out      # the held-out half alone (report it once)
    python bench/bench_corpus.py --set fresh         # the fresh set (measured once, 2026-11-30)
    python bench/bench_corpus.py --quick             # two bugs of each set

Prints one JSON document: per set and per library, each side's found-in-prompt rate (whole, or a long
definition's slice holding its signature and the slip), line hits, prompt tokens median and p90, the
focused view's top-3 rate, by site kind; the goal (held-out: >= 90 % at a median <= 8k tokens).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

GOAL_FOUND, GOAL_MEDIAN_TOKENS = 0.90, 8000
SETS = ("held_out", "dev", "old", "fresh")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def load(sets: list[str]) -> list[dict[str, Any]]:
    """The bugs of the named sets, each tagged with its set."""
    path = BENCH / "corpus_bugs.json"
    corpus = json.loads(path.read_text()) if path.exists() else {"libraries": {}}
    six = json.loads((BENCH / "reallib_bugs.json").read_text())
    out = []
    for name in sets:
        if name == "old":
            out += [{**b, "set": "old"} for lib in six["libraries"].values() for b in lib["bugs"]]
        else:
            out += [{**b, "set": name} for lib in corpus["libraries"].values() for b in lib["bugs"]
                    if lib.get("half") == name]
    return out


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))] if ordered else float("nan")


def baseline_tree(ref: str, dest: Path) -> Path:
    """`autod/` as of `ref`, extracted into dest (the baseline side's code)."""
    data = subprocess.run(["git", "archive", ref, "autod"], cwd=ROOT, capture_output=True, check=True).stdout
    dest.mkdir(parents=True, exist_ok=True)
    tar = dest / "autod.tar"
    tar.write_bytes(data)
    with tarfile.open(tar) as t:
        t.extractall(dest, filter="data")
    return dest


def run_side(
    name: str, tree: Path, bugs: list[dict[str, Any]], work: Path, args: argparse.Namespace
) -> list[dict[str, Any]]:
    src, out = work / f"{name}-bugs.json", work / f"{name}-rows.json"
    src.write_text(json.dumps(bugs))
    cmd = [sys.executable, str(BENCH / "corpus_worker.py"), "--tree", str(tree), "--bugs", str(src),
           "--out", str(out)]
    if args.cache:
        cmd += ["--cache", args.cache]
    if args.focus_k is not None:
        cmd += ["--focus-k", str(args.focus_k)]
    if args.diagnose and name == "autod":
        cmd.append("--diagnose")
    log(f"== {name} ({tree}) ==")
    subprocess.run(cmd, check=True)
    return json.loads(out.read_text())


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in rows if "error" not in r]
    if not ok:
        return {"bugs": 0}
    toks = [r["tokens"] for r in ok]
    out: dict[str, Any] = {
        "bugs": len(ok),
        "found": sum(r["found"] for r in ok),
        "found_rate": round(sum(r["found"] for r in ok) / len(ok), 3),
        "whole": sum(r["whole"] for r in ok),
        "sliced": sum(r["sliced"] for r in ok),
        "line_rate": round(sum(r["line"] for r in ok) / len(ok), 3),
        "tokens_median": statistics.median(toks),
        "tokens_p90": pct(toks, 90),
        "focus_top3_rate": round(sum((r.get("focus_rank") or 99) <= 3 for r in ok) / len(ok), 3),
        "localize_ms_median": statistics.median(r.get("localize_ms", 0) for r in ok),
    }
    return out


def by(rows: list[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(str(r.get(key)), []).append(r)
    return {k: summarize(v) for k, v in sorted(groups.items())}


def brief(s: dict[str, Any]) -> str:
    if not s.get("bugs"):
        return "-"
    return (f"{s['found']}/{s['bugs']} ({s['found_rate']:.0%}), "
            f"median {s['tokens_median']:.0f} / p90 {s['tokens_p90']:.0f}")


def report(bugs: list[dict[str, Any]], sides: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    meta = {b["id"]: b for b in bugs}
    tagged = {side: [{**{k: meta[r["id"]].get(k) for k in ("set", "library", "site_kind", "operator", "depth",
                                                           "file", "qualname")}, **r} for r in rows]
              for side, rows in sides.items()}
    out: dict[str, Any] = {"sets": {}}
    for name in dict.fromkeys(b["set"] for b in bugs):
        entry: dict[str, Any] = {}
        for side, rows in tagged.items():
            mine = [r for r in rows if r["set"] == name]
            entry[side] = {"total": summarize(mine), "per_library": by(mine, "library"),
                           "by_site_kind": by(mine, "site_kind"), "by_operator": by(mine, "operator")}
        auto = [r for r in tagged.get("autod", []) if r["set"] == name]
        entry["misses"] = [{k: r.get(k) for k in ("id", "site_kind", "operator", "file", "qualname",
                                                  "definition_lines", "line", "position", "tokens", "miss")}
                           for r in auto if "error" not in r and not r["found"]]
        entry["side_by_side"] = {side: brief(entry[side]["total"]) for side in tagged}
        out["sets"][name] = entry
    held = out["sets"].get("held_out", {}).get("autod", {}).get("total", {})
    out["goal"] = {"set": "held_out", "found_rate": GOAL_FOUND, "median_tokens": GOAL_MEDIAN_TOKENS,
                   "met": bool(held.get("bugs")) and held["found_rate"] >= GOAL_FOUND
                   and held["tokens_median"] <= GOAL_MEDIAN_TOKENS}
    out["errors"] = [{"side": s, "bug": r["id"], "error": r["error"]}
                     for s, rows in sides.items() for r in rows if "error" in r]
    out["per_bug"] = {side: rows for side, rows in tagged.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", nargs="+", choices=SETS, default=list(SETS), help="which bugs (default: all)")
    ap.add_argument("--only", nargs="+", metavar="BUG", help="these bug ids")
    ap.add_argument("--library", nargs="+", help="only these libraries' bugs")
    ap.add_argument("--baseline", default="main", metavar="REF", help="the baseline revision")
    ap.add_argument("--no-baseline", action="store_true", help="this checkout's side alone")
    ap.add_argument("--cache", metavar="DIR", help="keep check outputs and recorder results (tuning only)")
    ap.add_argument("--diagnose", action="store_true", help="why each miss of this side missed")
    ap.add_argument("--focus-k", type=int, metavar="K", help="suspects measured per bug (default 5)")
    ap.add_argument("--quick", action="store_true", help="two bugs of each set")
    args = ap.parse_args(argv)
    started = time.monotonic()
    bugs = load(args.set)
    if args.only:
        bugs = [b for b in bugs if b["id"] in args.only]
    if args.library:
        bugs = [b for b in bugs if b["library"] in args.library]
    if args.quick:
        bugs = [b for s in args.set for b in [x for x in bugs if x["set"] == s][:2]]
    with tempfile.TemporaryDirectory(prefix="bench-corpus-") as tmp:
        work = Path(tmp)
        trees: dict[str, Path] = {}
        if not args.no_baseline:
            try:
                trees["baseline"] = baseline_tree(args.baseline, work / "baseline")
            except subprocess.CalledProcessError as exc:  # no such revision here: this side alone, said so
                why = exc.stderr.decode(errors="replace").strip()
                log(f"no baseline: git archive {args.baseline} failed ({why})")
                args.no_baseline = True
        trees["autod"] = ROOT
        sides = {name: run_side(name, tree, bugs, work, args) for name, tree in trees.items()}
    doc = {"bench": "corpus", "baseline": None if args.no_baseline else args.baseline, "bugs": len(bugs),
           **report(bugs, sides), "seconds": round(time.monotonic() - started, 1)}
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
