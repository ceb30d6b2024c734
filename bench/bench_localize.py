"""Does the prompt hold the code that is wrong? Localization on real libraries with seeded bugs.

Fetches the sdists of two real pure-Python libraries with pip (see bench/localize_bugs.py), seeds
each bug, runs the library's own tests through autod's check runner to get the real failure, turns
it into autod's real `check_failed` event, and builds the auto-debug prompt through the real mode
and localize code (no LLM). Each bug is measured
  - committed: the bug is in the repository's only commit, so the diff is empty and there is no
    green revision (a failure reported by a CI log);
  - uncommitted: the pristine tree is committed and green, the bug is in the working tree;
with and without the coverage ranking (`coverage: true` on the check), next to main's context
code (bench/localize_baseline.py, a frozen copy) on the same events, in the same run.

A bug's line is "hit" when the buggy line is in the prompt's code (sources or diff); its function is
hit when the whole enclosing definition (function, method, or the statement of a constant) is there
line for line. Tokens are autod's estimate (4 characters a token); with --gguf (a model file) and
--gguf-python (a python with llama_cpp), the same prompts are also counted with that model's tokenizer.

    python bench/bench_localize.py                      # all bugs, JSON on stdout
    python bench/bench_localize.py --quick              # 8 bugs, no coverage variant
    python bench/bench_localize.py --gguf /work/llm/qwen.gguf --gguf-python /work/llm/venv/bin/python
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import localize_baseline as baseline  # noqa: E402
import yaml  # noqa: E402
from localize_bugs import BUGS, HELD_OUT, LIBRARIES  # noqa: E402

from autod.checks.run import run_check  # noqa: E402
from autod.checks.source import failure_event  # noqa: E402
from autod.config.llm import LocalizeConfig  # noqa: E402
from autod.config.settings import load_config  # noqa: E402
from autod.localize import focus  # noqa: E402
from autod.localize.context import localize  # noqa: E402
from autod.modes import ModeEnv  # noqa: E402
from autod.modes import debug as debug_mode  # noqa: E402
from autod.modes.debug import DebugMode  # noqa: E402
from autod.stores.state import State  # noqa: E402

GOAL_FUNC = 0.90
GOAL_MEDIAN_TOKENS = 8000
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "autod-bench" / "sdists"
GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@example.com",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@example.com",
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- fetching -------------------------------------------------------------------------------------
def fetch(name: str, version: str) -> Path:
    """The library's sdist, downloaded once with pip into the cache."""
    CACHE.mkdir(parents=True, exist_ok=True)
    found = sorted(CACHE.glob(f"{name.replace('-', '_')}-{version}.tar.gz")) + sorted(
        CACHE.glob(f"{name}-{version}.tar.gz")
    )
    if not found:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-binary",
                ":all:",
                "--no-deps",
                f"{name}=={version}",
                "-d",
                str(CACHE),
            ],
            check=True,
        )
        found = sorted(CACHE.glob(f"*{version}.tar.gz"))
        found = [p for p in found if p.name.lower().startswith(name.replace("-", "_").lower())]
    return found[0]


def extract(sdist: Path, dest: Path) -> Path:
    with tarfile.open(sdist) as tar:
        tar.extractall(dest, filter="data")
    (top,) = [p for p in dest.iterdir() if p.is_dir()]
    return top


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=GIT_ENV
    ).stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    if not (repo / ".git").exists():
        git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message, "--no-verify")
    return git(repo, "rev-parse", "HEAD")


# -- what the bug is ------------------------------------------------------------------------------
def buggy_spans(text: str, new: str, start: int) -> tuple[list[str], list[str]]:
    """(the buggy lines, the lines of the whole definition enclosing them) in the buggy file.

    `start` is where the replacement begins (the buggy text may also occur elsewhere in the file).
    """
    first = text.count("\n", 0, start) + 1
    last = first + new.count("\n")
    lines = text.splitlines()
    bug = [ln for ln in lines[first - 1 : last] if ln.strip()]
    tree = ast.parse(text)
    best: ast.AST | None = None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            ok = node.lineno <= first and (node.end_lineno or 0) >= last
            if ok and (best is None or node.lineno >= best.lineno):  # type: ignore[attr-defined]
                best = node
    if best is None:  # a module-level or class-level statement: the statement is the definition
        for node in ast.walk(tree):
            if isinstance(node, ast.stmt) and not isinstance(node, ast.ClassDef | ast.Module):
                ok = node.lineno <= first and (node.end_lineno or 0) >= last
                if ok and (best is None or node.lineno >= best.lineno):  # type: ignore[attr-defined]
                    best = node
    assert best is not None
    lo = min([best.lineno, *(d.lineno for d in getattr(best, "decorator_list", []))])  # type: ignore[attr-defined]
    return bug, lines[lo - 1 : best.end_lineno]  # type: ignore[attr-defined]


def _gutterless(text: str) -> list[str]:
    """Lines of a prompt section with main's `  123> ` gutters removed, right-stripped."""
    import re

    gutter = re.compile(r"^\s*\d+[> ] ?")
    return [gutter.sub("", ln, count=1).rstrip() for ln in text.splitlines()]


def contains_run(haystack: list[str], needle: list[str]) -> bool:
    """The needle's non-blank lines appear consecutively (ignoring blank lines) in the haystack."""
    want = [ln.rstrip() for ln in needle if ln.strip()]
    have = [ln for ln in haystack if ln.strip()]
    if not want:
        return False
    return any(ln == want[0] and have[i : i + len(want)] == want for i, ln in enumerate(have))


def hits(code_text: str, bug: list[str], func: list[str], *, gutter: bool) -> tuple[bool, bool]:
    lines = _gutterless(code_text) if gutter else [ln.rstrip() for ln in code_text.splitlines()]
    diff_lines = [ln[1:].rstrip() if ln[:1] in "+- " else ln for ln in lines]
    line_hit = contains_run(lines, bug) or contains_run(diff_lines, bug)
    return line_hit, contains_run(lines, func)


# -- prompts ----------------------------------------------------------------------------------------
async def autod_prompt(
    repo: Path, state_dir: Path, check: dict[str, Any], result: Any, last_green: str | None,
    budget: int | None = None, views: dict[str, str] | None = None, focus_k: int | None = None,
) -> tuple[str, str, list[dict[str, Any]]]:
    """(whole prompt, its code sections, the record's context entries) through DebugMode, with
    autod's defaults but the workspace, the state dir, the one check and (given) the budget.
    `views`, when given, receives the focused view's suspects (candidates.focused) under "focused", a
    block each, `focus_k` of them (default: autod's)."""
    cfg: dict[str, Any] = {
        "workspace": str(repo),
        "state_dir": str(state_dir),
        "checks": {"tests": check},
        "modes": {"auto-plan": {"enabled": False}},
    }
    if budget is not None:
        cfg.setdefault("localize", {})["budget_tokens"] = budget
    if focus_k is not None:
        cfg.setdefault("localize", {})["focus_definitions"] = focus_k
    path = state_dir.parent / f"{state_dir.name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    settings = load_config(path)
    state = State(settings.state_path / "state.db")
    try:
        if last_green:
            state.set_kv("last_green_rev", last_green)

        async def run(name: str, **extra: Any) -> Any:
            c = settings.checks[name]
            if extra.get("run"):
                c = c.model_copy(update={"run": extra.pop("run")})
            return await run_check(name, c, settings.workspace, settings=settings, **extra)

        env = ModeEnv(settings=settings, state=state, memory=None, run_check=run)
        event = failure_event(result)
        mode = DebugMode()
        found: list[Any] = []

        async def kept(*args: Any, **kwargs: Any) -> Any:  # what localization found, for the views
            found.append(await localize(*args, **kwargs))
            return found[-1]

        with mock.patch.object(debug_mode, "localize", kept):
            context = await mode.context(event, env, [])
        messages = mode.messages(event, context, [])
        prompt = "\n\n".join(m["content"] for m in messages)
        code = f"{context.get('sources', '')}\n\n{context.get('diff', '')}"
        if views is not None:
            suspects = getattr(context, "focused", None) or []  # one prompt each, in rank order
            # each suspect with the values its prompt shows beside it (a bug in one is found there)
            views["focused"] = "\n\n".join(
                f"### {x['path']} · {x['symbol']} \n```python\n{x['code']}\n```"
                + (f"\n```python\n{x['values']}\n```" if x.get("values") else "")
                for x in suspects if not x.get("read_by"))
            # the value groups autod's defaults ask about (the values its default suspects read)
            d = LocalizeConfig()
            top = found[0].suspects[: d.focus_definitions] if found else []
            every = {v.path for s in top for v in s.values}
            views["values"] = "\n\n".join(
                f"### {', '.join(v.symbol for v in g.values)} (read by {g.read_by})\n"
                f"```python\n{focus.render_values(g)}\n```"
                for g in focus.value_suspects(top, d.focus_values, every))
        return prompt, code, list(getattr(context, "used", []))
    finally:
        state.close()


async def baseline_prompt(repo: Path, result: Any, last_green: str | None) -> tuple[str, str]:
    event = failure_event(result)
    context = await baseline.context(event, repo, last_green)
    prompt = "\n\n".join(m["content"] for m in baseline.messages(event, context))
    return prompt, f"{context.get('sources', '')}\n\n{context.get('diff', '')}"


# -- one bug ----------------------------------------------------------------------------------------
async def measure_bug(
    work: Path, pristine: Path, bug: tuple[str, ...], tests: str, coverage: bool
) -> dict[str, Any]:
    lib, bid, rel, old, new, kind = bug
    row: dict[str, Any] = {"library": lib, "bug": bid, "kind": kind, "file": rel}
    repo = work / bid
    if repo.exists():
        shutil.rmtree(repo)
    shutil.copytree(pristine, repo, ignore=shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache"))
    target = repo / rel
    text = target.read_text()
    if text.count(old) != 1:
        return {**row, "error": f"search text occurs {text.count(old)} times"}
    buggy = text.replace(old, new)
    bug_lines, func_lines = buggy_spans(buggy, new, text.index(old))
    check = {"run": f"{sys.executable} -m pytest -q -p no:cacheprovider {tests}", "timeout_s": 120}
    from autod.config.settings import CheckConfig

    cfg = CheckConfig(**check)
    # uncommitted: pristine committed and green, the bug in the working tree
    green = commit_all(repo, "pristine")
    target.write_text(buggy)
    result = await run_check("tests", cfg, repo)
    if result.ok:
        return {**row, "error": "the library's tests do not catch this bug"}
    row["failing_tests"] = [
        ln.split(" - ")[0][7:] for ln in result.output.splitlines() if ln.startswith("FAILED ")
    ][:5]
    row["raised_in_test_only"] = _raised_in_tests_only(result.output)
    variants: dict[str, Any] = {}
    for label, last_green in (("uncommitted", green), ("committed", None)):
        if label == "committed":  # the bug in the only commit: no diff, no green revision, no history hint
            shutil.rmtree(repo / ".git")
            commit_all(repo, "import")
        for cov in (False, True) if coverage else (False,):
            state_dir = work / f"{bid}-{label}-{int(cov)}-state"
            t0 = time.monotonic()
            prompt, code, used = await autod_prompt(
                repo, state_dir, {**check, "coverage": cov}, result, last_green
            )
            ms = int((time.monotonic() - t0) * 1000)
            line_hit, func_hit = hits(code, bug_lines, func_lines, gutter=False)
            variants[f"autod_{label}{'_coverage' if cov else ''}"] = {
                "line": line_hit,
                "function": func_hit,
                "chars": len(prompt),
                "tokens": len(prompt) // 4,
                "ms": ms,
                "context": len(used),
                "prompt": prompt,
            }
        prompt, code = await baseline_prompt(repo, result, last_green)
        line_hit, func_hit = hits(code, bug_lines, func_lines, gutter=True)
        variants[f"baseline_{label}"] = {
            "line": line_hit,
            "function": func_hit,
            "chars": len(prompt),
            "tokens": len(prompt) // 4,
            "prompt": prompt,
        }
    row["variants"] = variants
    return row


def _raised_in_tests_only(output: str) -> bool:
    """True when no traceback frame of the failure lies outside the test files (an assertion)."""
    from autod.localize.frames import is_test_path, parse_frames

    frames = [f for f in parse_frames(output) if not f.path.startswith(("/", "<"))]
    return bool(frames) and all(is_test_path(f.path) for f in frames)


# -- summary ----------------------------------------------------------------------------------------
def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))] if ordered else float("nan")


def qwen_tokens(prompts: list[str], gguf: str, python: str) -> list[int] | None:
    script = (
        "import json, sys, llama_cpp\n"
        "m = llama_cpp.Llama(model_path=sys.argv[1], vocab_only=True, verbose=False)\n"
        "texts = json.load(sys.stdin)\n"
        "print(json.dumps([len(m.tokenize(t.encode(), add_bos=False, special=True)) for t in texts]))\n"
    )
    try:
        out = subprocess.run(
            [python, "-c", script, gguf],
            input=json.dumps(prompts),
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        ).stdout
        return json.loads(out.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
        log(f"tokenizer unavailable: {exc}")
        return None


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in rows if "variants" in r]
    names = sorted({v for r in ok for v in r["variants"]})
    out: dict[str, Any] = {}
    for name in names:
        vs = [r["variants"][name] for r in ok if name in r["variants"]]
        toks = [v["tokens"] for v in vs]
        entry = {
            "bugs": len(vs),
            "line_hit_rate": round(sum(v["line"] for v in vs) / len(vs), 3),
            "function_hit_rate": round(sum(v["function"] for v in vs) / len(vs), 3),
            "tokens_median": statistics.median(toks),
            "tokens_p90": pct(toks, 90),
        }
        qt = [v["qwen_tokens"] for v in vs if "qwen_tokens" in v]
        if qt:
            entry["qwen_tokens_median"] = statistics.median(qt)
            entry["qwen_tokens_p90"] = pct(qt, 90)
        asserts = [r["variants"][name] for r in ok if r.get("raised_in_test_only") and name in r["variants"]]
        if asserts:
            entry["function_hit_rate_assertions"] = round(
                sum(v["function"] for v in asserts) / len(asserts), 3
            )
        if "ms" in vs[0]:
            entry["localize_ms_median"] = statistics.median(v["ms"] for v in vs)
        out[name] = entry
    return out


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    pool = HELD_OUT if args.held_out else BUGS + HELD_OUT if args.only else BUGS
    bugs = [b for b in pool if not args.only or b[1] in args.only]
    if args.quick:
        bugs = bugs[::4]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-localize-") as tmp:
        work = Path(tmp)
        pristine: dict[str, Path] = {}
        for lib, (name, version, _) in LIBRARIES.items():
            top = extract(fetch(name, version), work / f"src-{lib}")
            pristine[lib] = top
        for bug in bugs:
            lib = bug[0]
            log(f"{bug[1]} ...")
            coverage = not (args.quick or args.no_coverage)
            row = await measure_bug(work, pristine[lib], bug, LIBRARIES[lib][2], coverage=coverage)
            rows.append(row)
            v = row.get("variants", {})
            log(
                f"  {bug[1]}: "
                + ", ".join(f"{k}={int(x['line'])}{int(x['function'])}/{x['tokens']}" for k, x in v.items())
                + (f" ERROR {row['error']}" if "error" in row else "")
            )
    if args.gguf:
        flat = [(r, k) for r in rows for k in r.get("variants", {})]
        counts = qwen_tokens([r["variants"][k]["prompt"] for r, k in flat], args.gguf, args.gguf_python)
        if counts:
            for (r, k), n in zip(flat, counts, strict=True):
                r["variants"][k]["qwen_tokens"] = n
    if args.dump:
        Path(args.dump).write_text(json.dumps(rows, indent=1))
    for r in rows:
        for v in r.get("variants", {}).values():
            v.pop("prompt", None)
    summary = summarize(rows)
    ours = summary.get("autod_committed", {})
    return {
        "bench": "localize",
        "libraries": {k: f"{n}=={v}" for k, (n, v, _) in LIBRARIES.items()},
        "bugs": len(bugs),
        "errors": [{"bug": r["bug"], "error": r["error"]} for r in rows if "error" in r],
        "assertion_only_failures": sum(1 for r in rows if r.get("raised_in_test_only")),
        "goal": {"function_hit_rate_committed": GOAL_FUNC, "median_prompt_tokens": GOAL_MEDIAN_TOKENS},
        "met": bool(ours)
        and ours["function_hit_rate"] >= GOAL_FUNC
        and ours["tokens_median"] <= GOAL_MEDIAN_TOKENS,
        "summary": summary,
        "per_bug": rows,
        "seconds": round(time.monotonic() - started, 1),
    }


def main() -> None:
    import structlog

    # autod's log lines go to stderr: stdout is the JSON document
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="every fourth bug, no coverage variant")
    ap.add_argument("--only", nargs="*", help="bug ids")
    ap.add_argument("--no-coverage", action="store_true", help="skip the coverage-ranked variant")
    ap.add_argument("--held-out", action="store_true", help="the 8 bugs written after the ranking was frozen")
    ap.add_argument("--gguf", help="a GGUF model whose tokenizer counts the prompts too")
    ap.add_argument("--gguf-python", default=sys.executable, help="a python with llama_cpp installed")
    ap.add_argument("--dump", help="write every prompt to this JSON file")
    args = ap.parse_args()
    print(json.dumps(asyncio.run(main_async(args)), indent=1))


if __name__ == "__main__":
    main()
