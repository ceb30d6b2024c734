"""Seed bugs into twelve more real libraries, for localization measured where nobody tuned it.

The libraries (LIBRARIES) are pure-Python PyPI sdists whose own pytest suites pass offline in autod's
dev venv, none of them installed there (an installed copy would shadow the tree under test). They
are split into two halves fixed before any localization rule was chosen (HALF, drawn with
`random.Random("issue-37 split")` within two strata, libraries with a definition over 150 lines and
the others): rules are chosen on `dev`; `held_out` is measured and reported, never tuned on. A third
set, `fresh` (FRESH), was chosen and seeded after every rule was (2026-11-30) and measured once.

Per library, with a fixed RNG seed: every target (bench/reallib_mutate.targets: functions, innermost,
and module- or class-level constants) is classed by where it sits (bench/corpus_mutate.site_kind:
long, class_level, helper, constant, function); targets are drawn round-robin over those classes
(QUOTA each at most) so the hard places are in the set, an operator is drawn among those that apply
(the least used so far in this library first, so each library gets several kinds), and the mutant
is kept when the file parses and the library's suite, green before, then fails 1 to 20 tests. Each
kept bug is traced for its depth (bench/reallib_depth.py). The list is written to
bench/corpus_bugs.json, committed, so every rerun measures the same bugs.

    python bench/corpus_seed.py                    # every library (~1 h on 2 cores)
    python bench/corpus_seed.py --only tinydb      # one library again; the others' bugs are kept
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
for extra in (ROOT, BENCH):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import corpus_mutate as mutate  # noqa: E402
from reallib_seed import (  # noqa: E402
    MAX_DEPTH1_SHARE,
    Library,
    extract,
    log,
    run_suite,
    sdist,
    sha256,
    try_mutant,
)

BUGS_FILE = BENCH / "corpus_bugs.json"
SEED = 37  # never changed to get a different set
PER_LIBRARY = 8
MAX_TRIES = 48  # mutants run per library, at most
QUOTA = {"long": 2, "class_level": 2, "helper": 2, "constant": 1, "function": 8}
KIND_TRIES = 14  # mutants run per site kind and library, at most (class-level slips often survive) ...
TRIES_PER_BUG = 3  # ... or this many per bug of its quota, if more

LIBRARIES = {
    lib.name: lib
    for lib in (
        Library("configobj", "5.0.9", "src", "src/tests",
                "an INI-style config parser: a 165-line _parse and a 205-line validate; a Section dict "
                "subclass", args="-o addopts=", env={"PYTHONPATH": "src"}),
        Library("isodate", "0.7.2", "src/isodate", "tests",
                "ISO 8601 parsing through module-level regex tables and a Duration class with operators",
                args="-o addopts=", env={"PYTHONPATH": "src"}),
        Library("pathspec", "1.1.1", "pathspec", "tests",
                "gitignore pattern matching: pattern classes registered by name, a long regex "
                "translation", args="-o addopts="),
        Library("simpleeval", "1.0.8", "simpleeval.py", "tests",
                "one module: an expression evaluator dispatching on AST node types through a dict "
                "of handlers; class-level defaults", args="-o addopts="),
        Library("voluptuous", "0.16.0", "voluptuous", "voluptuous/tests",
                "schema validation compiled to closures; a 176-line _compile_mapping; validators as "
                "classes", args="-o addopts="),
        Library("xmltodict", "1.0.4", "xmltodict.py", "tests",
                "one module: a SAX handler class and a 171-line parse()", args="-o addopts="),
        Library("docstring-parser", "0.18.0", "docstring_parser", "docstring_parser/tests",
                "parsers per docstring style; a 180-line epydoc parse, a 169-line numpydoc compose",
                args="-o addopts="),
        Library("pyasn1", "0.6.5", "pyasn1", "tests",
                "ASN.1 types and BER/DER codecs: decoders of 220-360 lines, class-level tag sets and "
                "type maps", args="-o addopts="),
        Library("pycparser", "3.12", "pycparser", "tests",
                "a C parser: a lexer, a recursive-descent parser and a generator over AST node "
                "classes", args="-o addopts="),
        Library("semantic-version", "2.10.0", "semantic_version", "tests",
                "a Version class and several spec grammars over class-level regexes",
                args="-o addopts="),
        Library("tinydb", "4.9.0", "tinydb", "tests",
                "a document store: tables, queries built from operator overloads, middlewares",
                args="-o addopts="),
        Library("webcolors", "25.10.0", "src/webcolors", "tests",
                "colour names and conversions over module-level tables, small helpers everywhere",
                args="-o addopts=", env={"PYTHONPATH": "src"}),
        # the fresh set: chosen and seeded after every localization rule was (2026-11-30), measured once
        Library("boltons", "26.2.0", "boltons", "tests",
                "many small utility modules: caches, iterators, data structures as dict/list subclasses",
                args="-o addopts="),
        Library("inflection", "0.5.1", "inflection", "test_inflection.py",
                "one module of string inflections driven by module-level regex rule tables",
                args="-o addopts="),
        Library("more-itertools", "11.2.1", "more_itertools", "tests",
                "a 5,000-line module of generator functions and iterator classes; unittest-style tests",
                args="-o addopts="),
        Library("toolz", "1.2.0", "toolz", "toolz/tests",
                "functional helpers: curry as a class with descriptors, dict and sequence utilities",
                args="-o addopts="),
    )
}
DEV = ("configobj", "isodate", "pathspec", "simpleeval", "voluptuous", "xmltodict")
HELD_OUT = ("docstring-parser", "pyasn1", "pycparser", "semantic-version", "tinydb", "webcolors")
# installed in autod's dev venv, so never seeded: idna (httpx needs it); jmespath's suite does not collect
FRESH = ("boltons", "inflection", "more-itertools", "toolz")
HALF = {**dict.fromkeys(DEV, "dev"), **dict.fromkeys(HELD_OUT, "held_out"), **dict.fromkeys(FRESH, "fresh")}


def code_files(root: Path, lib: Library) -> list[str]:
    """The library's own Python files (relative to root), tests left out; `package` may be one module."""
    from autod.localize.frames import is_test_path

    top = root / lib.package
    paths = [top] if top.is_file() else sorted(top.rglob("*.py"))
    out = []
    for p in paths:
        rel = p.relative_to(root).as_posix()
        if not is_test_path(rel) and not rel.startswith(f"{lib.tests}/"):
            out.append(rel)
    return out


def seed_library(lib: Library, work: Path, want: int, max_tries: int) -> dict[str, Any]:
    root = extract(lib, work / lib.name)
    base = run_suite(root, lib, timeout_s=900)
    if base.get("timeout") or base["failed"] or base["errors"] or not base["passed"]:
        tail = base.get("output", "")[-800:]
        raise SystemExit(f"{lib.name}: its suite does not pass before any bug: {tail}")
    timeout_s = max(30.0, 3 * base["seconds"] + 15)
    log(f"{lib.name}: suite green, {base['passed']} passed in {base['seconds']} s")
    rng = random.Random(f"{SEED}:{lib.name}")
    files = code_files(root, lib)
    texts = {rel: (root / rel).read_text(encoding="utf-8") for rel in files}
    calls = mutate.call_counts(list(texts.values()))
    pools: dict[str, list[tuple[str, mutate.Target]]] = {k: [] for k in QUOTA}
    for rel, text in texts.items():
        for t in mutate.targets(text):
            pools[mutate.site_kind(t, calls)].append((rel, t))
    for pool in pools.values():
        rng.shuffle(pool)
    kept: list[dict[str, Any]] = []
    overflow: list[dict[str, Any]] = []
    tally: dict[str, int] = {}
    ops_used: dict[str, int] = {}
    kind_tries = dict.fromkeys(QUOTA, 0)
    kind_kept = dict.fromkeys(QUOTA, 0)
    tries = 0
    order = list(QUOTA)
    turn = 0
    while tries < max_tries and len(kept) < want:
        open_kinds = [k for k in order if pools[k] and kind_kept[k] < QUOTA[k]
                      and kind_tries[k] < max(KIND_TRIES, TRIES_PER_BUG * QUOTA[k])]
        if not open_kinds:
            break
        kind = open_kinds[turn % len(open_kinds)]
        turn += 1
        rel, target = pools[kind].pop()
        path = root / rel
        text = path.read_text(encoding="utf-8")
        options = mutate.sites(text, target)
        if not options:
            continue
        least = min(ops_used.get(op, 0) for op in options)
        op = rng.choice(sorted(o for o in options if ops_used.get(o, 0) == least))
        site = rng.choice(options[op])
        new = mutate.apply(text, site)
        if new is None:
            continue
        tries += 1
        kind_tries[kind] += 1
        verdict, res, depth = try_mutant(root, lib, rel, text, new, target, timeout_s)
        tally[verdict] = tally.get(verdict, 0) + 1
        log(f"  [{tries}] {kind} {rel}::{target.qualname} {site.note}: {verdict}"
            + (f", depth {depth.get('depth')}" if depth else ""))
        if verdict != "kept":
            continue
        line, old_lines, new_lines = mutate.base.changed_lines(text, new)
        bug = {
            "library": lib.name, "half": HALF[lib.name], "file": rel, "qualname": target.qualname,
            "kind": target.kind, "site_kind": kind, "definition_lines": target.end - target.start + 1,
            "operator": site.operator, "note": site.note, "line": line, "old": old_lines, "new": new_lines,
            "failing_count": len(res["failing"]), "failing_tests": res["failing"][:20], **depth,
        }
        depth1 = sum(1 for b in kept if b["depth"] == 1)
        if bug["depth"] == 1 and depth1 + 1 > MAX_DEPTH1_SHARE * want:
            overflow.append(bug)  # enough shallow ones: keep looking for deeper
            continue
        ops_used[site.operator] = ops_used.get(site.operator, 0) + 1
        kind_kept[kind] += 1
        kept.append(bug)
    kept += overflow[: max(0, want - len(kept))]
    for i, bug in enumerate(kept, 1):
        bug["id"] = f"{lib.name}-{i:02d}"
    return {"library": lib.name, "half": HALF[lib.name], "tries": tries, "outcomes": tally,
            "baseline_passed": base["passed"], "suite_seconds": base["seconds"], "bugs": kept}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="libraries to (re)seed; the others' bugs are kept")
    ap.add_argument("--per-library", type=int, default=PER_LIBRARY)
    ap.add_argument("--max-tries", type=int, default=MAX_TRIES)
    ap.add_argument("--out", default=str(BUGS_FILE), help="the bug list to update")
    args = ap.parse_args()
    out = Path(args.out)
    doc = json.loads(out.read_text()) if out.exists() else {"libraries": {}}
    with tempfile.TemporaryDirectory(prefix="corpus-seed-") as tmp:
        for name in args.only or list(LIBRARIES):
            lib = LIBRARIES[name]
            started = time.monotonic()
            res = seed_library(lib, Path(tmp), args.per_library, args.max_tries)
            res["seconds"] = round(time.monotonic() - started, 1)
            doc["libraries"][name] = {"version": lib.version, "sdist_sha256": sha256(sdist(lib)),
                                      **{k: v for k, v in res.items() if k != "library"}}
            log(f"{name}: kept {len(res['bugs'])} of {res['tries']} mutants run ({res['outcomes']})")
            doc.update(seed=SEED, dev=list(DEV), held_out=list(HELD_OUT), fresh=list(FRESH))
            out.write_text(json.dumps(doc, indent=1) + "\n")


def load_bugs(half: str | None = None) -> list[dict[str, Any]]:
    doc = json.loads(BUGS_FILE.read_text())
    return [b for name in LIBRARIES for b in doc["libraries"].get(name, {}).get("bugs", [])
            if half is None or HALF[name] == half]


if __name__ == "__main__":
    main()
