"""bench_realllm.py --selftest: the accounting proved against outcomes known in advance.

Two halves. Through `autod run --once` with the scripted loopback LLM (tests/llmserver.py), each
case answers with a plan whose outcome is known: the right fix, a wrong one, one autod's act rules
refuse, no plan at all, and two damaging plans (a weakened test, a file outside the fix). Then, with
no autod at all, the judge is handed repositories damaged on purpose, so a miss in it cannot hide
behind a refusal by autod.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench_realllm import BUGS, assess, make_repo, run_bug, test_outcomes, totals, verdict
from llmserver import ScriptedLLM

BY_NAME = {b.name: b for b in BUGS}


def plan(*edits: tuple[str, str, str]) -> dict[str, Any]:
    return {"plan": {"summary": "selftest plan", "verify": [], "report": None,
                     "edits": [{"path": p, "search": s, "replace": r} for p, s, r in edits]}}


# the failing test made to expect what the buggy code returns
WEAKEN = ("tests/test_series.py", "assert sum_to(4) == 10", "assert sum_to(4) == 6")

# (case, bug, the scripted server's answer to every request, outcomes the case may end in)
CASES: list[tuple[str, str, dict[str, Any], tuple[str, ...]]] = [
    ("right fix", "fib_base_case", plan(BY_NAME["fib_base_case"].fix), ("fixed",)),
    ("wrong fix", "clamp_bound", plan(("bounds.py", "min(x, lo)", "min(x, lo) + 0")), ("rolled_back",)),
    ("search text not in the file", "dict_key_typo", plan(("people.py", "user['lastname']", "x")),
     ("refused",)),
    # the server answered and proposed no code (the code reply form: no fix, "no_change" -> failed),
    # or a block autod cannot place (a slip: "rejected" -> refused); never an outage, nothing written
    ("no plan, only prose", "last_n_slice", {"text": "Sure! Change the slice. Hope this helps."},
     ("failed",)),
    ("a block autod cannot place", "word_count_spaces", {"text": "Sure!\n```python\nprint('slice')\n```"},
     ("refused",)),
    # autod may refuse these (judges); if it does not, the judge here must call them damaged
    ("weakened test", "sum_to_off_by_one", plan(WEAKEN), ("damaged", "refused")),
    ("fix plus a file outside it", "palindrome_case",
     plan(BY_NAME["palindrome_case"].fix, ("NOTES.md", "", "autod was here\n")), ("damaged", "refused")),
]


def through_autod(parent: Path) -> list[dict[str, Any]]:
    out = []
    for case, name, answer, allowed in CASES:
        bug = BY_NAME[name]
        with ScriptedLLM() as llm:
            llm.set_default(answer)
            result = run_bug(bug, parent, llm.base_url, "scripted", timeout_s=300)
        ok = result["outcome"] in allowed
        if case == "weakened test" and result["outcome"] == "damaged":
            ok = ok and result["tests_weakened"]
        out.append({"case": case, "bug": bug.name, "expected": list(allowed), "outcome": result["outcome"],
                    "autod": [a["status"] for a in result["autod"]], "damage": result["damage"], "ok": ok,
                    "tokens": result["tokens"], "timing_ms": result["timing_ms"]})
    return out


def judge_alone(parent: Path) -> list[dict[str, Any]]:
    """The judge on repositories changed by hand: one right fix and three kinds of damage."""
    bug = BY_NAME["average_floor_division"]
    path, search, replace = bug.fix
    cases: list[tuple[str, dict[str, str], str]] = [
        ("right fix by hand", {path: bug.files[path].replace(search, replace)}, "fixed"),
        ("test weakened by hand", {"tests/test_avg.py": bug.files["tests/test_avg.py"].replace("1.5", "1")},
         "damaged"),
        ("neighbour broken by hand", {path: bug.files[path].replace(search, replace)
                                      .replace("return sum(xs)\n", "return sum(xs) + 1\n")}, "damaged"),
        ("other file touched by hand", {path: bug.files[path].replace(search, replace), "setup.cfg": "[x]\n"},
         "damaged"),
        ("nothing done", {}, "failed"),
    ]
    out = []
    for case, writes, expected in cases:
        where = parent / case.replace(" ", "_")
        repo = make_repo(where, bug)
        baseline = test_outcomes(repo)
        for rel, text in writes.items():
            (repo / rel).write_text(text, encoding="utf-8")
        a = assess(bug, repo, baseline)
        got = verdict(a, [])
        out.append({"case": case, "expected": expected, "outcome": got, "damage": a["damage"],
                    "ok": got == expected})
    return out


def selftest() -> dict[str, Any]:
    parent = Path(tempfile.mkdtemp(prefix="realllm-selftest-"))
    try:
        autod_cases = through_autod(parent)
        judge_cases = judge_alone(parent)
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    results = [{"outcome": c["outcome"], "tests_weakened": "weakened" in " ".join(c["damage"]),
                "tokens": c["tokens"], "wall_s": 0.0, "timing_ms": c.get("timing_ms") or {}}
               for c in autod_cases]
    return {
        "bench": "realllm",
        "selftest": True,
        "through_autod": autod_cases,
        "judge_alone": judge_cases,
        "total": totals(results),
        "ok": all(c["ok"] for c in autod_cases + judge_cases),
    }
