"""bench_reallib with a real model: autod end to end, and the model's ceiling on the same bugs.

autod (per bug): a throwaway git repository holding the library with the bug (its only commit, as in
the localization headline), `autod run --once` as a subprocess with autod's defaults except the
workspace, one pytest check (what an operator of that library would configure), auto-debug alone,
and `llm.base_url` / `llm.model`. The repository is then judged on its own, as bench_realllm does:
  - fixed: the library's original tests all pass in a copy of the tree with the original test
    directory put back, and nothing is damaged;
  - damaged: a test file changed, a file other than the mutated module changed, or a test that
    passed before autod ran fails now;
  - otherwise autod's last cycle says: rolled_back, refused, failed.
Wall time, tokens and, from the reflection records, model time against check time (each candidate's
`model_ms` and `checks_ms`, and the cycle's `durations_ms`).

The oracle (the ceiling): the same model, handed the failing output (trimmed as autod trims it) and
the buggy definition whole, asked for the complete fixed definition; `candidates.n` replies from
autod's config, the first at temperature 0 and the rest at `candidates.temperature`, seeds
`candidates.seed + i` (autod's first attempt); each applied with autod's whole-definition edit
(`autod.act.definition.replace_definition`) and validated by the library's whole suite; it stops at
the first that passes. A reply that makes the same code as an earlier one is not run again.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import httpx
import overrides
import yaml
from bench_reallib import bug_spans, check_for
from reallib_seed import LIBRARIES, Library, apply_bug, extract, fresh_tree, run_suite
from reallib_share import reply_figures

from autod.act.definition import replace_definition
from autod.checks.digest import digest
from autod.checks.source import EXCERPT_CHARS
from autod.config.settings import CandidatesConfig, LLMConfig, LocalizeConfig
from autod.errors import PlanRejected
from autod.localize.excerpt import trim_failure
from autod.localize.frames import is_test_path
from autod.modes.debug import EXCERPT_SHARE
from autod.planner.fences import blocks
from autod.planner.llm import DEFAULT_MODE_TOKENS

PYTHON = sys.executable
BUG_TIMEOUT_S = 3600.0
REQUEST_TIMEOUT_S = 900.0
KEPT_FIELDS = ("n", "attempt", "outcome", "diff_lines", "tokens", "seed", "temperature", "model_ms",
               "checks_ms", "reason", "view", "reply_tokens", "echo", "ended")  # of each candidate's record
GITIGNORE = "\n.autod/\n__pycache__/\n.pytest_cache/\n"
ORACLE_SYSTEM = (
    "You fix bugs in Python code. Answer with the complete corrected definition in one ```python "
    "code block, and nothing else."
)
ORACLE_USER = """The test suite of the Python library `{library}` fails:

```
{excerpt}
```

The bug is in this definition, `{qualname}` in `{path}`:

```python
{definition}
```

Write the complete fixed definition of `{qualname}`."""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


# -- the repository and its judge ------------------------------------------------------------------
def make_repo(parent: Path, pristine: Path, bug: dict[str, Any]) -> Path:
    repo = fresh_tree(pristine, parent / bug["id"])
    apply_bug(repo, bug)
    with (repo / ".gitignore").open("a", encoding="utf-8") as f:
        f.write(GITIGNORE)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=bench", "-c", "user.email=bench@example.com", "commit", "-qm", "import",
        "--no-verify")
    return repo


def outcomes(tree: Path, lib: Library) -> dict[str, str]:
    """test id -> passed | failed | error | skipped: the library's suite as its check runs it."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        cmd = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", *lib.args.split(),
               f"--junitxml={report}", lib.tests]
        try:
            # the ids autod's checks see (PYTHONHASHSEED=0, autod.confinement.steady_hashes): a set's
            # order names some tests, and a run with other hashes would call them gone (damage)
            env = {"PYTHONHASHSEED": "0", **os.environ, **lib.env}
            subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True,
                           timeout=600)
        except subprocess.TimeoutExpired:
            return {}
        if not report.exists():
            return {}
        out: dict[str, str] = {}
        for case in ET.parse(report).getroot().iter("testcase"):
            verdicts = {child.tag for child in case}
            v = next((v for v in ("error", "failure", "skipped") if v in verdicts), "passed")
            out[f"{case.get('classname')}::{case.get('name')}"] = "failed" if v == "failure" else v
        return out


def assess(repo: Path, pristine: Path, bug: dict[str, Any], before: dict[str, str]) -> dict[str, Any]:
    lib = LIBRARIES[bug["library"]]
    lines = git(repo, "status", "--porcelain", "--untracked-files=all").splitlines()
    changed = sorted({ln[3:].split(" -> ")[-1].strip('"') for ln in lines})
    tests = [p for p in changed if p.startswith(f"{lib.tests}/") or is_test_path(p)]
    outside = [p for p in changed if p != bug["file"] and p not in tests]
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "tree"
        shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".git", ".autod", "__pycache__"))
        # the original tests, whatever happened (a library's tests may be one file: inflection's)
        if (pristine / lib.tests).is_file():
            shutil.copy2(pristine / lib.tests, copy / lib.tests)
        else:
            shutil.rmtree(copy / lib.tests, ignore_errors=True)
            shutil.copytree(pristine / lib.tests, copy / lib.tests)
        after = outcomes(copy, lib)
    broken = sorted(t for t, v in before.items() if v == "passed" and after.get(t) != "passed")
    damage = [f"test file {p} changed" for p in tests]
    damage += [f"changed {p}, outside the mutated module" for p in outside]
    damage += [f"{t} passed before and does not now" for t in broken[:10]]
    passing = bool(after) and all(v in ("passed", "skipped") for v in after.values())
    return {"changed": changed, "tests_touched": tests, "damage": damage, "original_tests_pass": passing}


# -- autod end to end ---------------------------------------------------------------------------------
def autod_config(repo: Path, lib: Library, base_url: str, model: str) -> Path:
    cfg = {
        "workspace": str(repo),
        "checks": {"tests": check_for(lib)},
        "modes": {"auto-debug": {"enabled": True}},
        "llm": {"base_url": base_url, "model": model},
    }
    path = repo.parent / f"{repo.name}.autod.yaml"
    path.write_text(yaml.safe_dump(overrides.apply(cfg), sort_keys=False), encoding="utf-8")
    return path


def run_autod_bug(parent: Path, pristine: Path, bug: dict[str, Any], url: str, model: str,
                  trace: bool) -> dict[str, Any]:
    from bench_realllm import run_autod, verdict

    lib = LIBRARIES[bug["library"]]
    repo = make_repo(parent, pristine, bug)
    before = outcomes(repo, lib)
    if trace:
        from realllm_trace import TracingProxy

        with TracingProxy(url, parent / f"{bug['id']}.trace.jsonl") as proxy:
            ran = run_autod(autod_config(repo, lib, proxy.base_url, model), repo, BUG_TIMEOUT_S)
    else:
        ran = run_autod(autod_config(repo, lib, url, model), repo, BUG_TIMEOUT_S)
    judged = assess(repo, pristine, bug, before)
    statuses = [r["status"] for r in ran["reflections"]]
    tokens = {"prompt": 0, "completion": 0}
    phases: dict[str, int] = {}
    timing = {"wall_ms": 0, "model_ms": 0, "checks_ms": 0, "autod_ms": 0}  # the records' own account
    candidates: list[dict[str, Any]] = []
    for r in ran["reflections"]:
        for k in tokens:
            tokens[k] += int((r.get("tokens") or {}).get(k, 0))
        for k in timing:
            timing[k] += int((r.get("timing") or {}).get(k, 0))
        for k, v in (r.get("durations_ms") or {}).items():
            phases[k] = phases.get(k, 0) + int(v)
        candidates += r.get("candidates") or []
    model_ms = sum(int(c.get("model_ms") or 0) for c in candidates)
    checks_ms = sum(int(c.get("checks_ms") or 0) for c in candidates)
    out = {
        "bug": bug["id"],
        "outcome": verdict(judged, statuses),
        "cycles": [{"status": r["status"], "reason": (r.get("reason") or "")[:300],
                    "attempts": r.get("attempts"), "context": len(r.get("context") or [])}
                   for r in ran["reflections"]],
        "candidates": [{k: c.get(k) for k in (*KEPT_FIELDS, *(("part",) if c.get("part") else ()))}
                       for c in candidates],
        "damage": judged["damage"],
        "changed": judged["changed"],
        "tokens": tokens,
        "wall_s": ran["wall_s"],
        "durations_ms": phases,
        "timing_ms": timing,
        "model_s": round(model_ms / 1000, 1),
        "candidate_checks_s": round(checks_ms / 1000, 1),
        "rc": ran["rc"],
    }
    if ran["rc"] not in (0, 1):
        out["stderr_tail"] = ran["stderr_tail"]
    return out


# -- the oracle ---------------------------------------------------------------------------------------
def oracle_bug(work: Path, pristine: Path, bug: dict[str, Any], url: str, model: str) -> dict[str, Any]:
    lib = LIBRARIES[bug["library"]]
    cand, reply_tokens = oracle_settings()
    tree = fresh_tree(pristine, work / f"{bug['id']}-oracle")
    _, buggy = apply_bug(tree, bug)
    _, definition = bug_spans(buggy, bug)
    suite = run_suite(tree, lib, timeout_s=600)
    chars = int(LocalizeConfig().budget_tokens * EXCERPT_SHARE) * 4  # as much as autod's prompt gives it
    # the failure output as autod's event carries it (autod.checks.digest), cut as autod's prompt cuts it
    excerpt = trim_failure(digest(suite.get("output", ""), EXCERPT_CHARS)[-16000:], chars)
    user = ORACLE_USER.format(library=lib.name, excerpt=excerpt, qualname=bug["qualname"], path=bug["file"],
                              definition="\n".join(definition))
    messages = [{"role": "system", "content": ORACLE_SYSTEM}, {"role": "user", "content": user}]
    path = tree / bug["file"]
    seen: dict[str, int] = {}
    tried: list[dict[str, Any]] = []
    fixed = False
    started = time.monotonic()
    for i in range(cand.n):
        temperature = 0.0 if i == 0 else cand.temperature
        c: dict[str, Any] = {"n": i + 1, "seed": cand.seed + i, "temperature": temperature}
        t0 = time.monotonic()
        try:
            reply, usage = chat(url, model, messages, temperature, cand.seed + i, reply_tokens)
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            tried.append({**c, "outcome": "error", "reason": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        c.update(model_ms=int((time.monotonic() - t0) * 1000), tokens=usage, reply=reply[:3000])
        try:
            new = replace_definition(bug["file"], buggy, bug["qualname"], fenced(reply))
            ast.parse(new)
        except PlanRejected as exc:
            tried.append({**c, "outcome": "refused", "reason": exc.reason[:300]})
            continue
        except SyntaxError as exc:
            tried.append({**c, "outcome": "refused", "reason": f"does not parse: {exc.msg}"})
            continue
        key = ast.dump(ast.parse(new))
        if new == buggy or key == ast.dump(ast.parse(buggy)):
            tried.append({**c, "outcome": "no_change"})
            continue
        if key in seen:
            tried.append({**c, "outcome": "duplicate", "reason": f"the same code as reply {seen[key]}"})
            continue
        seen[key] = i + 1
        path.write_text(new, encoding="utf-8")
        t1 = time.monotonic()
        res = run_suite(tree, lib, timeout_s=600)
        path.write_text(buggy, encoding="utf-8")
        ok = not res.get("timeout") and res["rc"] == 0 and not res["failed"] and not res["errors"]
        c.update(checks_ms=int((time.monotonic() - t1) * 1000),
                 failing_after=None if res.get("timeout") else res["failed"] + res["errors"])
        tried.append({**c, "outcome": "fixed" if ok else "rolled_back"})
        if ok:
            fixed = True
            break
    shutil.rmtree(tree, ignore_errors=True)
    spent = {k: sum((t.get("tokens") or {}).get(k, 0) for t in tried) for k in ("prompt", "completion")}
    return {"bug": bug["id"], "fixed": fixed, "candidates": tried, "tokens": spent,
            "prompt_chars": sum(len(m["content"]) for m in messages),
            "wall_s": round(time.monotonic() - started, 1)}


def oracle_settings() -> tuple[CandidatesConfig, int]:
    """autod's candidates settings and auto-debug reply cap, with this run's --set applied: a run with
    `candidates.seed`, `.n` or `.temperature` moved draws the oracle's replies the same way as autod's."""
    cfg = overrides.apply({"candidates": {}, "llm": {}})
    llm = LLMConfig(**{k: v for k, v in cfg["llm"].items() if k in ("max_tokens", "max_tokens_by_mode")})
    reply = llm.max_tokens or llm.max_tokens_by_mode.get("auto-debug", DEFAULT_MODE_TOKENS)
    return CandidatesConfig(**cfg["candidates"]), reply


def chat(url: str, model: str, messages: list[dict[str, str]], temperature: float, seed: int,
         max_tokens: int) -> tuple[str, dict[str, int]]:
    body = {"model": model, "messages": messages, "temperature": temperature, "seed": seed,
            "max_tokens": max_tokens, "stream": False}
    r = httpx.post(f"{url.rstrip('/')}/chat/completions", json=body, timeout=REQUEST_TIMEOUT_S)
    r.raise_for_status()
    doc = r.json()
    usage = doc.get("usage") or {}
    spent = {k: int(usage.get(f"{k}_tokens") or 0) for k in ("prompt", "completion")}
    return doc["choices"][0]["message"]["content"] or "", spent


def fenced(reply: str) -> str:
    """The first fenced code block of a reply (the reply itself when it has none), read as autod reads
    one: a docstring's own Markdown fence does not end it (autod.planner.fences)."""
    found = blocks(reply)
    return found[0].body if found else reply


# -- both, over the bugs ---------------------------------------------------------------------------------
def resumed(parent: Path, ids: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The autod and oracle results a run stopped half way left in `parent/partial.json`, for the bugs
    asked for this time (each run is a bug's row; `commit` says which autod a row measured)."""
    try:
        doc = json.loads((parent / "partial.json").read_text())
    except (OSError, ValueError):
        return [], []
    keep = set(ids)
    rows = [[r for r in doc.get(side) or [] if isinstance(r, dict) and r.get("bug") in keep]
            for side in ("autod", "oracle")]
    return rows[0], rows[1]


def commit() -> str | None:
    """The commit of the autod this bench runs, `+dirty` with uncommitted changes (None outside git)."""
    root = str(Path(__file__).resolve().parent.parent)
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty else "") if head.returncode == 0 else None


def model_runs(bugs: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    url = args.llm.rstrip("/")
    parent = Path(args.keep or tempfile.mkdtemp(prefix="reallib-e2e-"))
    parent.mkdir(parents=True, exist_ok=True)
    autod, oracle = resumed(parent, [b["id"] for b in bugs]) if args.resume else ([], [])
    done_autod, done_oracle = {r["bug"] for r in autod}, {r["bug"] for r in oracle}
    if done_autod or done_oracle:
        log(f"resumed {parent / 'partial.json'}: autod {len(done_autod)}, oracle {len(done_oracle)} bug(s)")
    at = commit()
    tag = {"commit": at, "set": {".".join(k): v for k, v in overrides.SET}}  # what each row measured
    try:
        pristine = {name: extract(LIBRARIES[name], parent / f"src-{name}")
                    for name in dict.fromkeys(b["library"] for b in bugs)}
        for i, bug in enumerate(bugs, 1):
            if not args.no_e2e and bug["id"] not in done_autod:
                log(f"[{i}/{len(bugs)}] autod on {bug['id']} ...")
                autod.append({**run_autod_bug(parent, pristine[bug["library"]], bug, url, args.model,
                                              trace=bool(args.keep)), **tag})
                a = autod[-1]
                log(f"    {a['outcome']} ({', '.join(c['status'] for c in a['cycles']) or 'no cycle'}) "
                    f"{a['wall_s']} s, model {a['model_s']} s, {a['tokens']}")
            if not args.no_oracle and bug["id"] not in done_oracle:
                log(f"[{i}/{len(bugs)}] oracle on {bug['id']} ...")
                oracle.append({**oracle_bug(parent, pristine[bug["library"]], bug, url, args.model), **tag})
                o = oracle[-1]
                log(f"    oracle {'fixed' if o['fixed'] else 'not fixed'}: "
                    f"{[c['outcome'] for c in o['candidates']]} {o['wall_s']} s")
            if args.keep:  # a long run stopped half way still has its figures
                (parent / "partial.json").write_text(json.dumps({"autod": autod, "oracle": oracle}, indent=1))
    finally:
        if not args.keep:
            shutil.rmtree(parent, ignore_errors=True)
    fixed_autod = sum(r["outcome"] == "fixed" for r in autod)
    fixed_oracle = sum(r["fixed"] for r in oracle)
    cand, _ = oracle_settings()
    total: dict[str, Any] = {"bugs": len(bugs), "candidates_n": cand.n, "candidates_seed": cand.seed}
    if autod:
        total["autod"] = {o: sum(r["outcome"] == o for r in autod)
                          for o in ("fixed", "rolled_back", "refused", "failed", "damaged")}
        total["autod"]["wall_s"] = round(sum(r["wall_s"] for r in autod), 1)
        total["autod"]["tokens"] = {k: sum(r["tokens"][k] for r in autod) for k in ("prompt", "completion")}
    if oracle:
        total["oracle_fixed"] = fixed_oracle
    if autod and oracle:
        total["autod_over_oracle"] = round(fixed_autod / fixed_oracle, 3) if fixed_oracle else None
    if autod:  # where the model's time went, and time to fix against the oracle's model time
        total["replies"] = reply_figures(autod, oracle, {b["id"]: b["library"] for b in bugs})
    settings = overrides.described("autod defaults; workspace, one pytest check, auto-debug alone, "
                                   "llm.base_url and llm.model")
    return {"url": url, "model": args.model, "settings": settings, "total": total, "autod": autod,
            "oracle": oracle}
