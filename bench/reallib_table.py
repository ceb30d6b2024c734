"""The real-library runs of bench_reallib (`--llm ... --keep DIR`), side by side: per bug, how often
autod and the oracle fixed it, over every run given (several seeds, runs in parts, older commits).

    python bench/reallib_table.py /srv/reallib /srv/or11 [--commit SHA...] > table.json

Each DIR holds the `partial.json` a run keeps (a run's final JSON works too). A bug's rate on a side
is its fixes over its runs on that side; the ratio the issue asks for is autod's summed rates over
the oracle's, over the bugs both sides ran (with one run each, fixed counts over fixed counts). Rows
name the commit and the `--set` they measured; `--commit` keeps only rows of the given commits.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def rows(source: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    path = source / "partial.json" if source.is_dir() else source
    doc = json.loads(path.read_text())
    doc = doc.get("model", doc)  # a final JSON has the rows under "model"
    found = [[r for r in doc.get(side) or [] if isinstance(r, dict) and r.get("bug")]
             for side in ("autod", "oracle")]
    return found[0], found[1]


def table(sources: list[Path], commits: set[str] | None = None) -> dict[str, Any]:
    runs: dict[str, dict[str, list[bool]]] = {}
    damaged: list[str] = []
    for source in sources:
        autod, oracle = rows(source)
        for side, found in (("autod", autod), ("oracle", oracle)):
            for r in found:
                if commits and str(r.get("commit") or "").removesuffix("+dirty") not in commits:
                    continue
                fixed = r.get("outcome") == "fixed" if side == "autod" else bool(r.get("fixed"))
                runs.setdefault(r["bug"], {"autod": [], "oracle": []})[side].append(fixed)
                if side == "autod" and r.get("outcome") == "damaged":
                    damaged.append(r["bug"])
    per_bug = {bug: {side: f"{sum(v)}/{len(v)}" for side, v in sides.items() if v}
               for bug, sides in sorted(runs.items())}
    both = [s for s in runs.values() if s["autod"] and s["oracle"]]
    rate = {side: round(sum(sum(s[side]) / len(s[side]) for s in both), 3) for side in ("autod", "oracle")}
    ever = {side: sorted(b for b, s in runs.items() if any(s[side])) for side in ("autod", "oracle")}
    return {
        "bugs": len(runs),
        "bugs_both_sides": len(both),
        "expected_fixes_on_both": rate,
        "autod_over_oracle": round(rate["autod"] / rate["oracle"], 3) if rate["oracle"] else None,
        "fixed_ever": ever,
        "damaged": damaged,
        "per_bug": per_bug,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="--keep directories (or final JSON files)")
    ap.add_argument("--commit", nargs="+", help="only rows measured at these commits (short SHAs)")
    args = ap.parse_args(argv)
    print(json.dumps(table(args.runs, set(args.commit) if args.commit else None), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
