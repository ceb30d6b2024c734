"""What the draws of bench_reallib's runs (`--llm ... --keep DIR`) did, by kind, and the echo figures
the draw order uses (autod.candidates.order), fitted from them.

    python bench/reallib_draws.py /work/runs/devc /work/runs/p08 [--library configobj ...] > draws.json

Per kind of draw (a suspect's greedy or sampled draw, its pointed question, a value group, the wide
prompt): how many, how many fixed, how many gave the code back, the tokens they generated. Then, per
suspect of each cycle's first attempt, what its sampled draws did after its greedy one:

- `greedy_echo`: the share of suspects' greedy draws that gave the code back (`echo` in the record);
- `echo_after_echo` / `echo_after_change`: the share of a suspect's later draws (samples and its
  pointed question) that proposed nothing new (no edit, the code as it is, a change already tried:
  the draws the search draws again), after a greedy draw that gave the code back / changed something.

Each share is given with its counts and Laplace's estimate, (k + 1) / (n + 2). Rules are fitted on
the corpus's dev half and the old six; the held-out half's runs are reported, not fitted on
(`--library` picks the rows).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reallib_table import rows  # a --keep directory's rows, as the table reads them

NOTHING_NEW = ("no_change", "duplicate", "unchanged")


def kind(c: dict[str, Any]) -> str:
    view = str(c.get("view") or "wide")
    base = view.partition(":")[0]
    if base in ("focused", "wide"):
        return f"{base} {'greedy' if c.get('temperature') == 0 else 'sampled'}"
    return base


def share(k: int, n: int) -> dict[str, Any]:
    return {"of": n, "k": k, "laplace": round((k + 1) / (n + 2), 3)}


def fit(sources: list[Path], libraries: set[str] | None = None) -> dict[str, Any]:
    kinds: dict[str, Counter[str]] = {}
    greedy = Counter[str]()
    after = {"echo": Counter[str](), "change": Counter[str]()}
    bugs = 0
    for source in sources:
        for r in rows(source)[0]:  # autod's side
            if libraries and r["bug"].rsplit("-", 1)[0] not in libraries:
                continue
            bugs += 1
            first: dict[str, bool] = {}  # suspect -> its greedy draw gave the code back
            for c in r.get("candidates") or []:
                if c.get("part") or c.get("view") == "replay":
                    continue  # no model draw
                k = kinds.setdefault(kind(c), Counter())
                k["draws"] += 1
                k["fixed"] += c.get("outcome") == "fixed"
                k["echo"] += bool(c.get("echo"))
                k["tokens"] += int(c.get("reply_tokens") or 0)
                if c.get("attempt", 1) != 1:
                    continue
                kind_, _, number = str(c.get("view") or "").partition(":")
                if kind_ not in ("focused", "pointed"):
                    continue
                if kind_ == "focused" and c.get("temperature") == 0 and number not in first:
                    first[number] = bool(c.get("echo"))
                    greedy["draws"] += 1
                    greedy["echo"] += first[number]
                elif number in first:
                    side = after["echo" if first[number] else "change"]
                    side["draws"] += 1
                    side["redrawn"] += c.get("outcome") in NOTHING_NEW
                    side["fixed"] += c.get("outcome") == "fixed"
    return {
        "bugs": bugs,
        "by_kind": {k: dict(v) for k, v in sorted(kinds.items())},
        "greedy_echo": share(greedy["echo"], greedy["draws"]),
        "echo_after_echo": share(after["echo"]["redrawn"], after["echo"]["draws"]),
        "echo_after_change": share(after["change"]["redrawn"], after["change"]["draws"]),
        "fixed_after_echo": share(after["echo"]["fixed"], after["echo"]["draws"]),
        "fixed_after_change": share(after["change"]["fixed"], after["change"]["draws"]),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="--keep directories (or final JSON files)")
    ap.add_argument("--library", nargs="+", help="only these libraries' bugs")
    args = ap.parse_args(argv)
    print(json.dumps(fit(args.runs, set(args.library) if args.library else None), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
