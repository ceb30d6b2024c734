"""One side of bench_corpus: autod from a given tree builds the prompt of every bug; rows to a JSON file.

Run by bench/bench_corpus.py as a process of its own, so a side measures the code of its tree: `--tree
DIR` puts DIR's `autod` ahead of everything (the baseline is `git archive REF` of autod/ in a temporary
directory; this checkout's side is the checkout itself). The bench's own code (bug spans, hits, the
prompt through DebugMode) is this checkout's for both sides, so both are measured alike.

Per bug (the committed case: the bug is in the repository's only commit, so no diff, green revision or
history points at it, and autod's defaults, where a pytest check gets the coverage ranking): a fresh
tree from the library's sdist, the bug applied, the library's check run through autod's `run_check`,
the real `check_failed` event, and the prompt of `DebugMode.context` / `messages`.

`--cache DIR` keeps each bug's check output and the line recorder's result (keyed by the bug's
mutation, the recorder's own text and the test files it re-runs, so a changed recorder or another
choice of files runs again) and works in DIR/trees, the same paths every run: the tests of a bug
run once, for real, and every later side and run ranks that same evidence (a tuning loop in seconds
a bug; `localize_ms` then leaves the re-run out).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock


def _autod_from(tree: str) -> None:
    """Import `autod` from `tree` before anything imports it from elsewhere (the bench's sys.path)."""
    sys.path.insert(0, tree)
    import autod

    where = Path(autod.__file__).resolve()
    if not where.is_relative_to(Path(tree).resolve()):
        raise SystemExit(f"autod imported from {where}, not from {tree}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", required=True, help="the directory whose autod/ is measured")
    ap.add_argument("--bugs", required=True, help="a JSON file: the bugs to measure")
    ap.add_argument("--out", required=True, help="where the rows go (JSON)")
    ap.add_argument("--cache", help="keep check outputs and recorder results here (a tuning loop)")
    ap.add_argument("--diagnose", action="store_true", help="rebuild a miss's prompt at the largest budget")
    ap.add_argument("--focus-k", type=int, default=5, help="suspects measured (focus_rank, focus_chars)")
    args = ap.parse_args()
    _autod_from(args.tree)
    import structlog

    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    bugs = json.loads(Path(args.bugs).read_text())
    cache = Path(args.cache) if args.cache else None
    rows = asyncio.run(measure_all(bugs, cache, args.diagnose, args.focus_k))
    Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0


async def measure_all(
    bugs: list[dict[str, Any]], cache: Path | None, diagnose: bool, focus_k: int = 5
) -> list[dict[str, Any]]:
    bench = Path(__file__).resolve().parent
    sys.path.insert(1, str(bench))
    import corpus_hits
    from reallib_seed import extract

    libs = corpus_hits.libraries()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-corpus-") as tmp:
        work = cache / "trees" if cache else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        pristine: dict[str, Path] = {}
        for i, bug in enumerate(bugs, 1):
            lib = libs[bug["library"]]
            if lib.name not in pristine:
                dest = Path(tmp) / f"src-{lib.name}"
                pristine[lib.name] = extract(lib, dest)
            t0 = time.monotonic()
            row = await measure_bug(work, pristine[lib.name], lib, bug, cache, diagnose, focus_k)
            row["seconds"] = round(time.monotonic() - t0, 1)
            rows.append(row)
            got = "ERROR " + row["error"] if "error" in row else (
                f"found={int(row['found'])} line={int(row['line'])} tokens={row['tokens']} "
                f"at={row['position']}" + (f" ({row['miss']['why']})" if "miss" in row else ""))
            print(f"[{i}/{len(bugs)}] {bug['id']} {bug['qualname']}: {got}", file=sys.stderr, flush=True)
    return rows


async def measure_bug(
    work: Path, pristine: Path, lib: Any, bug: dict[str, Any], cache: Path | None, diagnose: bool,
    focus_k: int = 5,
) -> dict[str, Any]:
    import bench_localize
    import corpus_hits
    from bench_reallib import check_for
    from reallib_seed import apply_bug, fresh_tree

    from autod.checks.run import CheckResult, run_check
    from autod.config.settings import CheckConfig

    row: dict[str, Any] = {"id": bug["id"]}
    repo = fresh_tree(pristine, work / bug["id"])
    _, buggy = apply_bug(repo, bug)
    spans = corpus_hits.spans(buggy, bug)
    bench_localize.commit_all(repo, "import")  # the bug in the only commit
    check = check_for(lib)
    saved = cache / "checks" / f"{_key(bug)}.json" if cache else None
    if saved is not None and saved.exists():
        doc = json.loads(saved.read_text())
        result = CheckResult(doc["name"], doc["exit_code"], doc["output"], doc["duration_ms"])
    else:
        result = await run_check("tests", CheckConfig(**check), repo)
        if saved is not None and not result.ok and not result.error:
            saved.parent.mkdir(parents=True, exist_ok=True)
            saved.write_text(json.dumps({"name": result.name, "exit_code": result.exit_code,
                                         "output": result.output, "duration_ms": result.duration_ms}))
    if result.ok:
        return {**row, "error": "the library's tests pass with this bug"}
    if result.error:
        return {**row, "error": f"the check could not run: {result.error}"}
    state = work / f"{bug['id']}-state"
    shutil.rmtree(state, ignore_errors=True)
    views: dict[str, str] = {}
    with mock.patch.object(bench_localize, "run_check", _recorded(run_check, cache, _key(bug))):
        t0 = time.monotonic()
        prompt, code, used = await bench_localize.autod_prompt(repo, state, check, result, None, views=views,
                                                               focus_k=focus_k)
        row.update(corpus_hits.judge(prompt, code, used, bug, spans))
        row["localize_ms"] = int((time.monotonic() - t0) * 1000)  # with the coverage re-run (unless cached)
        row["focus_rank"] = corpus_hits.block_rank(views.get("focused", ""), spans)
        # each suspect's size in characters, in rank order, with the values shown beside it (its price)
        row["focus_chars"] = corpus_hits.block_sizes(views.get("focused", ""))
        # the value groups (each asked once): the one that holds the bug's value (None: none does)
        row["value_rank"] = corpus_hits.block_rank(views.get("values", ""), spans)
        row["value_groups"] = len(re.findall(r"(?m)^### ", views.get("values", "")))
        if diagnose and not row["found"]:
            diag = work / f"{bug['id']}-diag"
            _, dcode, dused = await bench_localize.autod_prompt(repo, diag, check, result, None,
                                                                budget=200_000)
            row["miss"] = corpus_hits.diagnose(dcode, dused, bug, spans)
    shutil.rmtree(repo, ignore_errors=True)
    return row


def _key(bug: dict[str, Any]) -> str:
    """A bug's cache name: its id and a digest of its mutation (a re-seeded list reuses ids)."""
    what = json.dumps([bug["file"], bug["line"], bug["old"], bug["new"]]).encode()
    return f"{bug['id']}-{hashlib.sha256(what).hexdigest()[:10]}"


def _recorded(run_check: Any, cache: Path | None, bug_id: str) -> Any:
    """`run_check` that keeps (and serves) the line recorder's result per bug when there is a cache."""
    from autod.checks.run import CheckResult

    async def run(name: str, check: Any, workspace: Any, **kw: Any) -> Any:
        flag = next((a for a in kw.get("extra_args") or () if str(a).startswith("--autod-spectrum=")), None)
        if cache is None or flag is None:
            return await run_check(name, check, workspace, **kw)
        out = Path(flag.split("=", 1)[1])
        plugin = next(out.glob("*.py"), None)
        # the recorder's text and what it re-runs (the failing tests' files), the output dir aside
        args = [str(a) for a in kw.get("extra_args") or () if a is not flag]
        text = (plugin.read_bytes() if plugin else b"") + "\0".join(args).encode()
        key = hashlib.sha256(text).hexdigest()[:12]
        saved = cache / "spectra" / f"{bug_id}-{key}.json"
        if saved.exists():
            shutil.copyfile(saved, out / "spectrum.json")
            return CheckResult(name, 1, "", 0)
        result = await run_check(name, check, workspace, **kw)
        if (out / "spectrum.json").exists():
            saved.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(out / "spectrum.json", saved)
        return result

    return run


if __name__ == "__main__":
    sys.exit(main())
