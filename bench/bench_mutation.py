"""Mutation testing of the safety-critical modules with mutmut: which changes do their tests not notice?

Runs mutmut 3 (in the `[dev]` extras) over each module below with only that module's unit tests, in a
scratch copy of the tree (mutmut writes its `mutants/` there, never in the checkout). mutmut
mutates inside functions and methods (comparisons, boolean operators, constants, strings, returned
values, arguments; not module-level constants or class attributes), then runs, for each mutant,
the module's tests that called the mutated function. A mutant is killed when a test fails, survives
when they all pass, times out when they run past mutmut's CPU limit, and has no tests when none of
the module's tests calls its function.

    python bench/bench_mutation.py                          # every module, about half an hour
    python bench/bench_mutation.py --only autod/checks/outcome.py --max-mutants 50
    python bench/bench_mutation.py --baseline HEAD~3        # the same mutants, the tests at HEAD~3 too
    python bench/bench_mutation.py --save after.json        # then: --compare after.json next time
    python bench/bench_mutation.py --quick                  # 25 mutants a module (`python -m bench` runs it)

Prints one JSON document: per module the counts, every surviving mutant (line, the original and the
mutated source), and with `--baseline`/`--compare` a before / after table per module and the mutants
each side killed that the other did not. docs/MUTATION.md says how it relates to the CI pass over the guards.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# module -> the unit tests that are its own (tests/unit/...). mutmut then picks, per mutant, the
# ones among these that call the mutated function.
MODULES: dict[str, list[str]] = {
    "autod/act/edits.py": ["test_edits.py", "test_definition_edit.py", "test_search.py"],
    "autod/act/definition.py": ["test_definition_edit.py", "test_quotes.py"],
    "autod/act/judges.py": ["test_judges.py", "test_protected_files.py"],
    "autod/act/reach.py": ["test_judges.py"],
    "autod/act/search.py": ["test_search.py", "test_edits.py"],
    "autod/act/atomic.py": ["test_journal.py", "test_undo.py"],
    "autod/atomicfile.py": ["test_atomicfile.py", "test_journal.py", "test_undo.py"],
    "autod/act/journal.py": ["test_journal.py", "test_undo.py"],
    "autod/act/imports.py": ["test_imports.py"],
    "autod/act/quotes.py": ["test_quotes.py"],
    "autod/act/linediff.py": ["test_linediff.py"],
    "autod/safety/boundary.py": ["test_boundary.py", "test_protected_files.py", "test_edits.py"],
    "autod/safety/protected.py": ["test_protected_files.py", "test_own_files.py"],
    "autod/safety/secretforms.py": ["test_redaction.py"],
    "autod/safety/filemodes.py": ["test_filemodes.py", "test_own_files.py", "test_journal.py"],
    "autod/safety/termsafe.py": ["test_termsafe.py"],
    "autod/checks/sandbox.py": ["test_sandbox.py", "test_sandbox_mounts.py", "test_checks.py"],
    "autod/checks/mounts.py": ["test_sandbox_mounts.py", "test_sandbox.py"],
    "autod/checks/outcome.py": ["test_outcome.py", "test_judge.py"],
    "autod/checks/pertest.py": ["test_pertest.py"],
    "autod/act/allowance.py": ["test_allowance.py"],
    "autod/safety/saferead.py": ["test_saferead.py"],
    "autod/cycle/limits.py": ["test_limits.py"],
}
QUICK_MAX_MUTANTS = 25
ROOM_TIMEOUT_S = 1800
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no_tests", 33: "no_tests", 34: "skipped"}
STATUS.update(dict.fromkeys((36, 24, -24, 152, 255), "timeout"))
COUNTED = ("killed", "survived", "timeout", "no_tests", "other")


def mutmut_bin() -> str:
    beside = Path(sys.executable).parent / "mutmut"
    found = str(beside) if beside.exists() else shutil.which("mutmut")
    if not found:
        raise SystemExit("mutmut not found: pip install -e '.[dev]'")
    return found


def scratch_tree(dest: Path, tests_ref: str | None) -> None:
    """Copy the working tree's files (tracked and new, as they are now) to dest; with tests_ref,
    tests/ comes from that git revision instead."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for rel in filter(None, out.split("\0")):
        if tests_ref and rel.startswith("tests/"):
            continue
        src = ROOT / rel
        if src.is_file() and not src.is_symlink():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    if tests_ref:
        archive = subprocess.run(
            ["git", "archive", tests_ref, "tests"], cwd=ROOT, capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    (dest / "pyproject.toml").write_text((dest / "pyproject.toml").read_text() + "\n")
    (dest / "pyproject.base").write_text((dest / "pyproject.toml").read_text())


def configure(tree: Path, module: str) -> None:
    """The [tool.mutmut] section for one module: mutate only it, select only its tests."""
    # Everything else the tests may read beside them (config/, docs/, README.md...); relative names:
    # mutmut copies each to mutants/NAME.
    also = sorted(
        {p.name for p in tree.iterdir()} - {"autod", "tests", "mutants", "pyproject.base", "mutmut.log"}
    )
    if any("/" in name or name in ("", ".", "..") for name in also):
        raise SystemExit(f"refusing to copy {also} into mutants/")
    section = {
        "source_paths": ["autod"],
        "only_mutate": [module],
        "pytest_add_cli_args_test_selection": [f"tests/unit/{t}" for t in MODULES[module]],
        # -n 0: the project's addopts start xdist workers, under which mutmut's trampolines
        # report every mutant as an error; one process is what a mutant's run needs
        "pytest_add_cli_args": ["-p", "no:cacheprovider", "-q", "-n", "0"],
        "also_copy": also,
        "use_git_change_detection": False,
    }
    lines = ["[tool.mutmut]"] + [f"{k} = {json.dumps(v)}" for k, v in section.items()]
    (tree / "pyproject.toml").write_text((tree / "pyproject.base").read_text() + "\n".join(lines) + "\n")


def list_mutants(module: str) -> dict[str, dict[str, Any]]:
    """Every mutant mutmut makes of module (run inside a configured tree): its line and the change."""
    from mutmut.mutation.file_mutation import mutate_file_contents

    source = Path(module).read_text()
    mutated = mutate_file_contents(module, source)
    code = mutated.code.split("\n")
    spans = mutated.line_span_by_function_name
    defs: dict[str, int] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            defs[f"x_{node.name}"] = node.lineno
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef):
                    defs[f"x\u01c1{node.name}\u01c1{sub.name}"] = sub.lineno

    def block(key: str) -> list[str]:
        span = spans[key]
        seg = code[max(0, span.start - 1) : span.end + 2]
        start = next(i for i, line in enumerate(seg) if f"def {key}(" in line)
        body = seg[start:]
        body[0] = body[0].replace(key, "F", 1)
        return body

    dotted = module.removesuffix(".py").replace("/", ".")
    found: dict[str, dict[str, Any]] = {}
    for name in mutated.mutant_names:
        base = name.rpartition("__mutmut_")[0]
        orig, mut = block(f"{base}__mutmut_orig"), block(name)
        ops = [
            op
            for op in difflib.SequenceMatcher(None, orig, mut, autojunk=False).get_opcodes()
            if op[0] != "equal"
        ]
        # mutmut's names: x_FUNCTION, or x\u01c1CLASS\u01c1METHOD
        shown = ".".join(base.split("\u01c1")[1:]) if "\u01c1" in base else base.removeprefix("x_")
        entry: dict[str, Any] = {"function": shown}
        if ops:
            _, i1, i2, j1, j2 = ops[0]
            entry["line"] = defs.get(base, 0) + i1
            entry["original"] = "\n".join(s.strip() for s in orig[i1:i2])
            entry["mutated"] = "\n".join(s.strip() for s in mut[j1:j2])
        found[f"{dotted}.{name}"] = entry
    return found


def pick(names: list[str], limit: int | None) -> list[str]:
    """At most limit names, spread evenly over the module (so every function can be sampled)."""
    if not limit or limit >= len(names):
        return names
    step = len(names) / limit
    return [names[int(i * step)] for i in range(limit)]


def run_module(
    tree: Path, module: str, limit: int | None, jobs: int, names: list[str] | None = None
) -> dict[str, Any]:
    """mutmut over one module in tree; the counts, and per mutant its status."""
    shutil.rmtree(tree / "mutants", ignore_errors=True)
    configure(tree, module)
    start = time.monotonic()
    if names is None:
        listed = subprocess.run(
            [sys.executable, __file__, "--list-mutants", module],
            cwd=tree,
            capture_output=True,
            text=True,
            check=True,
        )
        mutants = json.loads(listed.stdout)
        names = pick(sorted(mutants, key=_order), limit)
    else:
        mutants = {}
    argv = [mutmut_bin(), "run", "--max-children", str(jobs)]
    if limit:
        argv += names
    log = tree / "mutmut.log"
    with log.open("w") as out:
        try:
            proc = subprocess.run(
                argv, cwd=tree, stdout=out, stderr=subprocess.STDOUT, timeout=ROOM_TIMEOUT_S
            )
            failed = proc.returncode != 0 and f"mutmut exit code {proc.returncode}"
        except subprocess.TimeoutExpired:
            failed = f"timed out after {ROOM_TIMEOUT_S} s"
    meta_file = tree / "mutants" / f"{module}.meta"
    codes = json.loads(meta_file.read_text())["exit_code_by_key"] if meta_file.exists() else {}
    status = {n: STATUS.get(codes.get(n), "other") for n in names}
    result: dict[str, Any] = {
        "tests": MODULES[module],
        "mutants": len(names),
        **{k: sum(1 for s in status.values() if s == k) for k in COUNTED},
        "elapsed_s": round(time.monotonic() - start, 1),
        "status": status,
        "info": mutants,
    }
    if failed:
        result["error"] = failed
        result["log_tail"] = log.read_text(errors="replace")[-3000:]
    return result


def _order(name: str) -> tuple[str, int]:
    base, _, num = name.rpartition("__mutmut_")
    return base, int(num) if num.isdigit() else 0


def report(module: dict[str, Any]) -> dict[str, Any]:
    """The JSON a module shows: counts, survivors with their lines, functions no test calls."""
    info, status = module.pop("info"), module.pop("status")
    module["survivors"] = [
        {"mutant": n.rpartition(".")[2], **info.get(n, {})}
        for n in sorted(status, key=_order)
        if status[n] == "survived"
    ]
    untested: dict[str, int] = {}
    for n, s in status.items():
        if s == "no_tests":
            fn = info.get(n, {}).get("function", n)
            untested[fn] = untested.get(fn, 0) + 1
    module["untested_functions"] = untested
    return module


def compare(after: dict[str, dict[str, Any]], before: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Before / after per module (killed, survived), and the mutants whose fate changed."""
    table = []
    changed: dict[str, dict[str, list[str]]] = {}
    for module, a in after.items():
        b = before.get(module)
        if not b:
            continue
        table.append(
            {
                "module": module,
                "before": {k: b.get(k) for k in ("mutants", "killed", "survived", "timeout", "no_tests")},
                "after": {k: a.get(k) for k in ("mutants", "killed", "survived", "timeout", "no_tests")},
            }
        )
        sa, sb = a.get("status", {}), b.get("status", {})
        now_killed = sorted((n for n in sa if sa[n] == "killed" and sb.get(n) == "survived"), key=_order)
        now_survive = sorted((n for n in sa if sa[n] == "survived" and sb.get(n) == "killed"), key=_order)
        if now_killed or now_survive:
            changed[module] = {"killed_now": now_killed, "survive_now": now_survive}
    return {"table": table, "changed": changed}


def render(table: list[dict[str, Any]]) -> str:
    rows = [f"{'module':32} {'before k/s/t/u':>18} {'after k/s/t/u':>18}"]
    for r in table:
        fmt = "{killed}/{survived}/{timeout}/{no_tests}"
        rows.append(f"{r['module']:32} {fmt.format(**r['before']):>18} {fmt.format(**r['after']):>18}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--only", nargs="+", metavar="MODULE", help="modules to run (paths as in MODULES, or a suffix)"
    )
    ap.add_argument(
        "--max-mutants", type=int, default=None, help="at most this many mutants a module, spread evenly"
    )
    ap.add_argument("--quick", action="store_true", help=f"--max-mutants {QUICK_MAX_MUTANTS}")
    ap.add_argument(
        "--jobs", type=int, default=1, help="mutants tested at once (default 1: the machine is shared)"
    )
    ap.add_argument(
        "--baseline", metavar="REF", help="also run the same mutants against tests/ at this git revision"
    )
    ap.add_argument("--compare", metavar="FILE", help="a document an earlier run saved: the before side")
    ap.add_argument("--save", metavar="FILE", help="write the document, with every mutant's status, here too")
    ap.add_argument("--list-mutants", metavar="ROOM", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.list_mutants:
        print(json.dumps(list_mutants(args.list_mutants)))
        return 0
    modules = list(MODULES)
    if args.only:
        modules = [r for r in MODULES if any(r == o or r.endswith("/" + o.lstrip("/")) for o in args.only)]
        if not modules:
            ap.error(f"no such module: {' '.join(args.only)} (have: {', '.join(MODULES)})")
    limit = args.max_mutants or (QUICK_MAX_MUTANTS if args.quick else None)
    started = time.monotonic()
    after: dict[str, dict[str, Any]] = {}
    before: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="autod-bench-mutation-") as tmp:
        tree = Path(tmp) / "now"
        tree.mkdir()
        scratch_tree(tree, None)
        base_tree = None
        if args.baseline:
            base_tree = Path(tmp) / "base"
            base_tree.mkdir()
            scratch_tree(base_tree, args.baseline)
        for module in modules:
            print(f"mutation: {module} ...", file=sys.stderr, flush=True)
            after[module] = run_module(tree, module, limit, args.jobs)
            if base_tree is not None:
                names = list(after[module]["status"])
                names_or_all = names if limit else None
                before[module] = run_module(base_tree, module, limit, args.jobs, names=names_or_all)
    if args.compare:
        saved = json.loads(Path(args.compare).read_text())
        before = saved.get("modules") or saved["rooms"]  # files saved before the rename say "rooms"
    doc: dict[str, Any] = {
        "benchmark": "mutation",
        "tool": "mutmut " + _version(),
        "max_mutants_per_module": limit,
        "elapsed_s": round(time.monotonic() - started, 1),
    }
    if before:
        doc.update(compare(after, before))
        doc["before"] = f"tests at {args.baseline}" if args.baseline else args.compare
        print(render(doc["table"]), file=sys.stderr)
    saved = {module: {**r, "status": dict(r["status"])} for module, r in after.items()}
    doc["totals"] = {k: sum(r[k] for r in after.values()) for k in ("mutants", *COUNTED)}
    doc["modules"] = {module: report(r) for module, r in after.items()}
    print(json.dumps(doc, indent=2))
    if args.save:
        for module, r in saved.items():
            r.pop("info", None)
            doc["modules"][module]["status"] = r["status"]
        Path(args.save).write_text(json.dumps(doc, indent=2) + "\n")
    return 1 if any("error" in r for r in after.values()) else 0


def _version() -> str:
    from importlib.metadata import version

    return version("mutmut")


if __name__ == "__main__":
    raise SystemExit(main())
