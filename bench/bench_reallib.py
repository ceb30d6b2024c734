"""Real libraries, bugs seeded by a program: does the prompt hold the buggy function, and what does
the model then fix, next to what it could fix if it were handed the function (issue 19).

The bugs (bench/reallib_bugs.json) were seeded automatically into real PyPI libraries by
bench/reallib_seed.py (random definitions, random mutation operators, fixed seed; kept when the
library's own suite then fails 1-20 tests), each with its depth: the call distance from the nearest
failing test to the mutated definition.

Localization (no model), per bug: the library's tests run through autod's check runner
(`autod.checks.run.run_check`, the check an operator would configure: `python -m pytest -q <tests>`),
the output becomes autod's real `check_failed` event (`autod.checks.source.failure_event`), and the
auto-debug prompt is built by the real `DebugMode().context()` / `messages()`:
  - committed (the headline): the bug is in the repository's only commit, so there is no diff, no
    green revision and no history to point at it (a failure that arrives with the code, as in CI);
    with autod's default config (no `coverage:` key on the check), `coverage: true` and
    `coverage: false`;
  - uncommitted: the pristine tree committed and green, the bug in the working tree (default config).
A bug's function is hit when its whole definition (decorators included; a constant's whole
statement) is in the prompt's code line for line; its line is hit when the mutated lines are. A miss
is diagnosed by building the same prompt with the largest budget autod accepts: reached but ranked
below what the budget held, shown only in part (a definition too long to show whole), or not reached.

End to end (--llm URL --model NAME; never in CI, a CPU model takes minutes a bug): `autod run --once`
on a throwaway repository per bug, then the model's ceiling on the same bug (an oracle handed the
buggy function whole, the same number of candidates). See bench/reallib_e2e.py.

    python bench/bench_reallib.py                        # localization, every bug (~20-40 min)
    python bench/bench_reallib.py --quick                # 3 bugs, default config only (python -m bench)
    python bench/bench_reallib.py --gguf /work/llm/qwen.gguf --gguf-python /work/llm/venv/bin/python
    python bench/bench_reallib.py --llm http://127.0.0.1:8087/v1 --model qwen --only parse-03
    python bench/bench_reallib.py --llm URL --model qwen --no-localization --keep DIR --resume
        # all 60 bugs in parts (~15 h on 2 vCPUs): stop it any time, run it again to go on; each row
        # names the autod commit it measured
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import statistics
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

import overrides  # noqa: E402
import reallib_mutate as mutate  # noqa: E402
from bench_localize import (  # noqa: E402
    _raised_in_tests_only,
    autod_prompt,
    commit_all,
    contains_run,
    pct,
    qwen_tokens,
)
from reallib_seed import LIBRARIES, Library, apply_bug, extract, fresh_tree, load_bugs  # noqa: E402

from autod.checks.run import run_check  # noqa: E402
from autod.config.settings import CheckConfig, LocalizeConfig  # noqa: E402
from autod.localize.render import LONG  # noqa: E402

GOAL_FUNC = 0.90
GOAL_MEDIAN_TOKENS = 8000
CHECK_TIMEOUT_S = 300
DIAGNOSE_BUDGET = 200_000  # the largest localize.budget_tokens autod's config accepts
# committed variants: the check's coverage key (None: not set, autod's default holds)
COMMITTED = {"default": None, "coverage_on": True, "coverage_off": False}
FOCUS_MEASURED = 5  # blocks of the focused view measured (autod shows localize.focus_definitions)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def check_for(lib: Library, coverage: bool | None = None) -> dict[str, Any]:
    """The check an operator would configure for the library (`coverage` only when set)."""
    check: dict[str, Any] = {"run": lib.command(), "timeout_s": CHECK_TIMEOUT_S, "when": ["start"]}
    if lib.env:
        check["env"] = dict(lib.env)
    if coverage is not None:
        check["coverage"] = coverage
    return check


# -- what the bug is ------------------------------------------------------------------------------
def bug_spans(buggy: str, bug: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(the mutated lines, the whole mutated definition's lines) in the buggy file."""
    lines = buggy.splitlines()
    first = bug["line"]
    if bug["new"]:
        mutated = lines[first - 1 : first - 1 + len(bug["new"])]
        anchor = first
    else:  # a removed branch: the nearest non-blank line before where it stood
        anchor = first - 1
        while anchor > 1 and not lines[anchor - 1].strip():
            anchor -= 1
        mutated = lines[anchor - 1 : anchor]
    spans = [t for t in mutate.targets(buggy) if t.qualname == bug["qualname"]]
    inside = [t for t in spans if t.start <= anchor <= t.end] or spans
    if not inside:
        raise ValueError(f"{bug['id']}: {bug['qualname']} not found in the buggy file")
    t = min(inside, key=lambda t: t.end - t.start)
    return [ln for ln in mutated if ln.strip()], lines[t.start - 1 : t.end]


def hits(code: str, bug_lines: list[str], func_lines: list[str]) -> tuple[bool, bool]:
    lines = [ln.rstrip() for ln in code.splitlines()]
    diff_lines = [ln[1:].rstrip() if ln[:1] in "+- " else ln for ln in lines]
    line_hit = bool(bug_lines) and (contains_run(lines, bug_lines) or contains_run(diff_lines, bug_lines))
    return line_hit, contains_run(lines, func_lines)


# -- the prompt, through autod's real mode ------------------------------------------------------------
def position(used: list[dict[str, Any]], bug: dict[str, Any]) -> int | None:
    """1-based position of the bug's definition among the code entries shown (outline left out)."""
    code = [e for e in used if e.get("lines") not in ("outline", "diff")]
    for i, e in enumerate(code, 1):
        if e.get("path") == bug["file"] and e.get("symbol") == bug["qualname"]:
            return i
    return None


async def diagnose(
    repo: Path, state_dir: Path, check: dict[str, Any], result: Any, bug: dict[str, Any],
    bug_lines: list[str], func_lines: list[str],
) -> dict[str, Any]:
    """Why a function was missed: the same prompt with the largest budget autod accepts."""
    _, code, used = await autod_prompt(repo, state_dir, check, result, None, budget=DIAGNOSE_BUDGET)
    line_hit, func_hit = hits(code, bug_lines, func_lines)
    at = position(used, bug)
    n = len([e for e in used if e.get("lines") not in ("outline", "diff")])
    if at is None:
        why = "not reached"
    elif len(func_lines) > LONG:
        why = f"reached, too long to be shown whole ({len(func_lines)} lines > {LONG})"
    elif func_hit:
        why = "reached, ranked below what the budget held"
    else:
        why = "reached, shown only in part"
    return {"why": why, "position_unbounded": at, "of": n, "line_hit_unbounded": line_hit}


# -- one bug ------------------------------------------------------------------------------------------
async def measure_bug(work: Path, pristine: Path, bug: dict[str, Any], variants: list[str]) -> dict[str, Any]:
    lib = LIBRARIES[bug["library"]]
    row: dict[str, Any] = {k: bug.get(k) for k in ("id", "library", "file", "qualname", "kind", "operator",
                                                    "note", "depth", "failing_count")}
    repo = fresh_tree(pristine, work / bug["id"])
    green = commit_all(repo, "pristine")
    _, buggy = apply_bug(repo, bug)
    bug_lines, func_lines = bug_spans(buggy, bug)
    row["definition_lines"] = len(func_lines)
    result = await run_check("tests", CheckConfig(**check_for(lib)), repo)
    if result.ok:
        return {**row, "error": "the library's tests pass with this bug (the check did not catch it)"}
    if result.error:
        return {**row, "error": f"the check could not run: {result.error}"}
    row["check_s"] = round(result.duration_ms / 1000, 1)
    row["raised_in_test_only"] = _raised_in_tests_only(result.output)
    out: dict[str, Any] = {}
    if "uncommitted" in variants:
        state_dir = work / f"{bug['id']}-uncommitted-state"
        prompt, code, used = await autod_prompt(repo, state_dir, check_for(lib), result, green)
        out["uncommitted"] = _variant(prompt, code, used, bug, bug_lines, func_lines, 0)
    shutil.rmtree(repo / ".git")  # the bug in the only commit: no diff, no green revision, no history
    commit_all(repo, "import")
    for name, cov in COMMITTED.items():
        if name not in variants:
            continue
        state_dir = work / f"{bug['id']}-{name}-state"
        check = check_for(lib, cov)
        t0 = time.monotonic()
        views: dict[str, str] = {}
        prompt, code, used = await autod_prompt(repo, state_dir, check, result, None, views=views,
                                                focus_k=FOCUS_MEASURED)
        v = _variant(prompt, code, used, bug, bug_lines, func_lines, int((time.monotonic() - t0) * 1000))
        # the focused view (what candidates.focused draws see): where the bug's definition is in it
        v.update(focus_view(views.get("focused", ""), bug_lines, func_lines))
        # the value groups (one draw each): whether the bug sits in one of them
        v["value_rank"] = focus_view(views.get("values", ""), bug_lines, func_lines)["focus_rank"]
        v["value_suspects"] = re.findall(r"(?m)^### (.+)$", views.get("values", ""))
        if not v["function"]:
            v["miss"] = await diagnose(repo, work / f"{bug['id']}-{name}-diag", check, result, bug,
                                       bug_lines, func_lines)
        out[name] = v
    row["variants"] = out
    shutil.rmtree(repo, ignore_errors=True)
    return row


def focus_view(focused: str, bug_lines: list[str], func_lines: list[str]) -> dict[str, Any]:
    """The bug's definition among the focused view's top FOCUS_MEASURED blocks: its rank (None: not
    there), whether autod's default focus holds it, and that default view's size."""
    blocks = [b for b in re.split(r"(?m)^(?=### )", focused) if b.strip()]

    def flat(lines: list[str]) -> list[str]:  # a class attribute is shown dedented beside its reader
        return [ln.strip() for ln in lines]

    rank = next((i for i, b in enumerate(blocks, 1)
                 if hits("\n".join(flat(b.splitlines())), flat(bug_lines), flat(func_lines))[1]), None)
    k = LocalizeConfig().focus_definitions
    return {"focus_rank": rank, "focus": rank is not None and rank <= k,
            "focus_tokens": len("".join(blocks[:k])) // 4}


def _variant(prompt: str, code: str, used: list[dict[str, Any]], bug: dict[str, Any],
             bug_lines: list[str], func_lines: list[str], ms: int) -> dict[str, Any]:
    line_hit, func_hit = hits(code, bug_lines, func_lines)
    return {"function": func_hit, "line": line_hit, "tokens": len(prompt) // 4, "chars": len(prompt),
            "position": position(used, bug), "localize_ms": ms, "prompt": prompt}


# -- summary --------------------------------------------------------------------------------------------
def depth_bucket(depth: Any) -> str:
    return "unknown" if depth is None else str(depth) if depth < 3 else "3+"


def summarize(rows: list[dict[str, Any]], name: str) -> dict[str, Any]:
    vs = [(r, r["variants"][name]) for r in rows if name in r.get("variants", {})]
    if not vs:
        return {}
    toks = [v["tokens"] for _, v in vs]
    out: dict[str, Any] = {
        "bugs": len(vs),
        "function_hits": sum(v["function"] for _, v in vs),
        "function_hit_rate": round(sum(v["function"] for _, v in vs) / len(vs), 3),
        "line_hit_rate": round(sum(v["line"] for _, v in vs) / len(vs), 3),
        "tokens_median": statistics.median(toks),
        "tokens_p90": pct(toks, 90),
    }
    if any("focus" in v for _, v in vs):  # the focused view: the top definitions alone
        out["focus_hit_rate"] = round(sum(bool(v.get("focus")) for _, v in vs) / len(vs), 3)
        out["focus_tokens_median"] = statistics.median(v.get("focus_tokens", 0) for _, v in vs)
        out["focus_hit_rate_by_k"] = {
            k: round(sum((v.get("focus_rank") or 99) <= k for _, v in vs) / len(vs), 3)
            for k in range(1, FOCUS_MEASURED + 1)
        }
        # a focused draw at the default: a suspect's (or a value shown beside it) or a value suspect's
        out["focus_or_value_hit_rate"] = round(
            sum(bool(v.get("focus") or v.get("value_rank")) for _, v in vs) / len(vs), 3)
    qt = [v["qwen_tokens"] for _, v in vs if "qwen_tokens" in v]
    if qt:
        out["qwen_tokens_median"], out["qwen_tokens_p90"] = statistics.median(qt), pct(qt, 90)
    by_depth: dict[str, list[int]] = {}
    for r, v in vs:
        by_depth.setdefault(depth_bucket(r.get("depth")), [0, 0])
        by_depth[depth_bucket(r.get("depth"))][0] += v["function"]
        by_depth[depth_bucket(r.get("depth"))][1] += 1
    out["by_depth"] = {k: f"{a}/{b}" for k, (a, b) in sorted(by_depth.items())}
    ms = [v["localize_ms"] for _, v in vs if v.get("localize_ms")]
    if ms:
        out["localize_ms_median"] = statistics.median(ms)
    out["misses"] = [
        {"bug": r["id"], "depth": r.get("depth"), "definition": f"{r['file']}::{r['qualname']}",
         "lines": r.get("definition_lines"), "line_hit": v["line"], **v.get("miss", {})}
        for r, v in vs if not v["function"]
    ]
    return out


def report(rows: list[dict[str, Any]], variants: list[str]) -> dict[str, Any]:
    ok = [r for r in rows if "variants" in r]
    overall = {name: summarize(ok, name) for name in variants}
    per_library = {
        lib: {name: {k: v for k, v in summarize([r for r in ok if r["library"] == lib], name).items()
                     if k != "misses"} for name in variants}
        for lib in dict.fromkeys(r["library"] for r in ok)
    }
    return {"overall": overall, "per_library": per_library}


# -- main -------------------------------------------------------------------------------------------------
def pick(bugs: list[dict[str, Any]], args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.only:  # in the order given (a run stopped early has done the first ones)
        by_id = {b["id"]: b for b in bugs}
        return [by_id[i] for i in dict.fromkeys(args.only) if i in by_id]
    if args.library:
        bugs = [b for b in bugs if b["library"] in args.library]
    if args.quick:  # three bugs from three libraries, always the same ones
        libs = list(dict.fromkeys(b["library"] for b in bugs))[:3]
        return [next(b for b in bugs if b["library"] == lib) for lib in libs]
    if args.per_library:  # the first N of every library, round by round: a stopped run still spans them
        by_lib: dict[str, list[dict[str, Any]]] = {}
        for b in bugs:
            by_lib.setdefault(b["library"], []).append(b)
        return [lib[k] for k in range(args.per_library) for lib in by_lib.values() if k < len(lib)]
    return bugs[: args.limit] if args.limit else bugs


async def localization(bugs: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    variants = ["default"] if args.quick or args.default_only else [*COMMITTED, "uncommitted"]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-reallib-") as tmp:
        work = Path(tmp)
        pristine = {name: extract(LIBRARIES[name], work / f"src-{name}")
                    for name in dict.fromkeys(b["library"] for b in bugs)}
        for i, bug in enumerate(bugs, 1):
            where = f"{bug['file']}::{bug['qualname']}"
            log(f"[{i}/{len(bugs)}] {bug['id']} {where} (depth {bug.get('depth')}) ...")
            row = await measure_bug(work, pristine[bug["library"]], bug, variants)
            rows.append(row)
            shown = [f"{k}={int(v['function'])}{int(v['line'])}/{v['tokens']}"
                     + (f" ({v['miss']['why']})" if "miss" in v else "")
                     for k, v in row.get("variants", {}).items()]
            log("    " + ", ".join(shown) + (f" ERROR {row['error']}" if "error" in row else ""))
    if args.gguf:
        flat = [(r, k) for r in rows for k in r.get("variants", {})]
        counts = qwen_tokens([r["variants"][k]["prompt"] for r, k in flat], args.gguf, args.gguf_python)
        for (r, k), n in zip(flat, counts or [], strict=False):
            r["variants"][k]["qwen_tokens"] = n
    if args.dump:
        Path(args.dump).write_text(json.dumps(rows, indent=1))
    for r in rows:
        for v in r.get("variants", {}).values():
            v.pop("prompt", None)
    summary = report(rows, variants)
    head = summary["overall"].get("default", {})
    return {
        "variants": variants,
        "goal": {"function_hit_rate": GOAL_FUNC, "median_prompt_tokens": GOAL_MEDIAN_TOKENS},
        "met_default": bool(head) and head["function_hit_rate"] >= GOAL_FUNC
        and head["tokens_median"] <= GOAL_MEDIAN_TOKENS,
        **summary,
        "errors": [{"bug": r["id"], "error": r["error"]} for r in rows if "error" in r],
        "per_bug": rows,
    }


def depth_table(bugs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, dict[str, int]] = {}
    for b in bugs:
        lib = out.setdefault(b["library"], {})
        lib[depth_bucket(b.get("depth"))] = lib.get(depth_bucket(b.get("depth")), 0) + 1
    return out


def main(argv: list[str] | None = None) -> int:
    import structlog

    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))  # stdout is the JSON
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", "--selftest", action="store_true", help="3 bugs, default config, no model")
    ap.add_argument("--only", nargs="+", metavar="BUG",
                    help="bug ids (reallib_bugs.json; corpus_bugs.json with --corpus)")
    ap.add_argument("--corpus", choices=("dev", "held_out", "fresh"),
                    help="the corpus's bugs of that half (corpus_bugs.json) in place of reallib_bugs.json: "
                         "with --llm, autod and the oracle on libraries the rules were not chosen on")
    ap.add_argument("--library", nargs="+", help="only these libraries' bugs")
    ap.add_argument("--limit", type=int, help="the first N bugs")
    ap.add_argument("--per-library", type=int, metavar="N",
                    help="the first N bugs of every library, one of each library per round")
    ap.add_argument("--default-only", action="store_true", help="localization: autod's defaults only")
    ap.add_argument("--gguf", help="a GGUF model whose tokenizer counts the prompts too")
    ap.add_argument("--gguf-python", default=sys.executable, help="a python with llama_cpp installed")
    ap.add_argument("--dump", help="write every prompt to this JSON file")
    ap.add_argument("--llm", metavar="URL", help="end to end and the oracle against this server")
    ap.add_argument("--model", default="local", help="the model name sent to --llm")
    ap.add_argument("--no-localization", action="store_true", help="with --llm: only the model runs")
    ap.add_argument("--no-e2e", action="store_true", help="with --llm: only the oracle")
    ap.add_argument("--no-oracle", action="store_true", help="with --llm: only autod")
    ap.add_argument("--keep", metavar="DIR", help="with --llm: keep the repositories (and traces) here")
    ap.add_argument("--resume", action="store_true",
                    help="with --llm --keep DIR: skip the bugs DIR/partial.json has (a long run in parts)")
    ap.add_argument("--set", action="append", type=overrides.parse, default=[], metavar="KEY=VALUE",
                    help="with --llm: one autod setting off its default (YAML), e.g. llm.reply_form=code")
    args = ap.parse_args(argv)
    if args.resume and not (args.llm and args.keep):
        ap.error("--resume needs --llm and --keep DIR (where the stopped run left partial.json)")
    overrides.SET[:] = args.set
    started = time.monotonic()
    if args.corpus:  # the corpus's libraries join this bench's (one table: every helper looks there)
        import corpus_seed

        LIBRARIES.update(corpus_seed.LIBRARIES)
        all_bugs = corpus_seed.load_bugs(args.corpus)
    else:
        all_bugs = load_bugs()
    bugs = pick(all_bugs, args)
    if args.only and (unknown := set(args.only) - {b["id"] for b in bugs}):
        ap.error(f"unknown bug(s): {', '.join(sorted(unknown))}")
    doc: dict[str, Any] = {
        "bench": "reallib",
        "libraries": {n: f"{lib.name}=={lib.version}" for n, lib in LIBRARIES.items()},
        "bugs": len(bugs),
        "depths": depth_table(bugs),
    }
    if not (args.llm and args.no_localization):
        doc["localization"] = asyncio.run(localization(bugs, args))
    if args.llm:
        from reallib_e2e import model_runs

        doc["model"] = model_runs(bugs, args)
    doc["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
