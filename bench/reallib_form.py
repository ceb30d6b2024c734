"""Does the reply form cost a small model fixes? The oracle's prompt (the failure and the buggy
definition whole), answered as a fenced code block (the oracle) or as autod's JSON plan (the code in a
JSON string, `response_format: json_object`); each reply applied with autod's replace_definition and
judged by the library's whole suite; up to 4 replies per form (temperature 0, then 0.8, seeds 1-4).

    python bench/reallib_form.py --llm http://127.0.0.1:8087/v1 parse-01 semver-01 cachetools-01

One line per reply on stderr; the JSON list of (bug, form, seed, outcome, seconds) on stdout. An
experiment for the next change, not a benchmark of autod: autod's own prompt is not used here.
"""
import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import httpx
from bench_reallib import bug_spans
from reallib_e2e import ORACLE_SYSTEM, ORACLE_USER, fenced
from reallib_seed import LIBRARIES, apply_bug, extract, fresh_tree, load_bugs, run_suite

from autod.act.definition import replace_definition
from autod.config.settings import LocalizeConfig
from autod.localize.excerpt import trim_failure
from autod.modes.debug import EXCERPT_SHARE

JSON_SYSTEM = (
    "You fix bugs in Python code. Reply with ONE JSON object and nothing else: "
    '{"summary": "<what you change>", "edits": [{"path": "<file>", "symbol": "<definition>", '
    '"replace": "<its complete new source>"}]}'
)
SAMPLES = ((1, 0.0), (2, 0.8), (3, 0.8), (4, 0.8))  # (seed, temperature), as autod's candidates

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--llm", required=True, metavar="URL", help="an OpenAI-compatible base URL")
ap.add_argument("--model", default="local")
ap.add_argument("bugs", nargs="+", help="bug ids (reallib_bugs.json)")
args = ap.parse_args()
url = f"{args.llm.rstrip('/')}/chat/completions"
work = Path(tempfile.mkdtemp(prefix="reallib-form-"))
known = {b["id"]: b for b in load_bugs()}
chars = int(LocalizeConfig().budget_tokens * EXCERPT_SHARE) * 4


def messages(form: str, user: str) -> list[dict[str, str]]:
    if form == "code":
        return [{"role": "system", "content": ORACLE_SYSTEM}, {"role": "user", "content": user}]
    asked = user.replace("Write the complete fixed definition",
                         "Reply with the JSON plan whose edit rewrites")
    return [{"role": "system", "content": JSON_SYSTEM}, {"role": "user", "content": asked}]


def judge(tree: Path, bug: dict, lib, buggy: str, form: str, text: str) -> str:
    try:
        src = fenced(text) if form == "code" else json.loads(text)["edits"][0]["replace"]
        new = replace_definition(bug["file"], buggy, bug["qualname"], src)
    except Exception as exc:  # an unusable reply: its kind is the outcome
        return f"error {type(exc).__name__}"
    if new == buggy:
        return "same"
    (tree / bug["file"]).write_text(new)
    res = run_suite(tree, lib, timeout_s=120)
    ok = not res.get("timeout") and res["rc"] == 0 and not res["failed"] and not res["errors"]
    return "fixed" if ok else "failed"


out = []
for bid in args.bugs:
    bug = known[bid]
    lib = LIBRARIES[bug["library"]]
    pristine = extract(lib, work / f"src-{lib.name}")
    for form in ("code", "json"):
        for seed, temperature in SAMPLES:
            tree = fresh_tree(pristine, work / f"{bid}-{form}-{seed}")
            _, buggy = apply_bug(tree, bug)
            _, definition = bug_spans(buggy, bug)
            excerpt = trim_failure(run_suite(tree, lib, timeout_s=120).get("output", "")[-16000:], chars)
            user = ORACLE_USER.format(library=lib.name, excerpt=excerpt, qualname=bug["qualname"],
                                      path=bug["file"], definition="\n".join(definition))
            body = {"model": args.model, "temperature": temperature, "seed": seed, "max_tokens": 1500,
                    "stream": False, "messages": messages(form, user)}
            if form == "json":
                body["response_format"] = {"type": "json_object"}
            t0 = time.time()
            reply = httpx.post(url, json=body, timeout=900).json()["choices"][0]["message"]["content"] or ""
            outcome = judge(tree, bug, lib, buggy, form, reply)
            out.append((bid, form, seed, outcome, round(time.time() - t0, 1)))
            print(out[-1], file=sys.stderr, flush=True)
            if outcome == "fixed":
                break
print(json.dumps(out))
