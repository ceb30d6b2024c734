"""Which line first: asked of the greedy prompts a bench run sent, what the model names and writes.

Reads the `*.trace.jsonl` files a `bench_reallib.py --keep DIR` run leaves (the tracing proxy's), and
for each distinct greedy prompt that began its answer with a definition (`llm.prefill`) asks the
server, at temperature 0: leg one, the same prompt with the answer begun `autod.planner.point.ask`,
one line; then, where that line is one of the definition's (`point.named`), leg two begun at it,
either with the code alone (`--form code`) or, as autod asks it, with the conversation going on from
leg one's answer (`--form conversation`). Prints one JSON line per prompt (the line named, whether it
is the seeded slip, whether leg two changed the named line or wrote the original) and a summary.

    python bench/point_probe.py DIR [DIR ...] --llm http://127.0.0.1:8087/v1 [--form code|conversation]
        [--ask "The line of `{name}` that makes the test fail:\\n"] [--above 1] [--min-lines 24] [--grammar]

`--ask` tries another question for leg one (`{name}`: the definition's name, `{symbol}`: the name the
prompt asks about, a method's with its class; the default is autod's), `--above N` begins leg two N
lines above the named one (`above_changed`: it rewrote one of those), `--min-lines` keeps the
definitions autod would ask in two legs, `--grammar` holds leg one to the definition's lines
(autod.planner.linechoice, as autod asks a server that takes a grammar). Traces of runs made before
`llm.point_lines` give the prompts as asked whole.

A measurement for choosing a design, run once before building it; it needs a ChatML model on a
server with /v1/completions (the traces' prompts are rendered ChatML).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autod.planner import linechoice, point  # noqa: E402

ANSWER = "<|im_start|>assistant\n"


def bugs() -> dict[str, dict[str, Any]]:
    out = {}
    for lib in json.loads((ROOT / "bench" / "corpus_bugs.json").read_text())["libraries"].values():
        out.update({b["id"]: b for b in lib["bugs"]})
    return out


def complete(url: str, prompt: str, max_tokens: int, stop: list[str], grammar: str | None = None
             ) -> tuple[str, int, float]:
    t = time.monotonic()
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stop": stop, "seed": 1}
    if grammar:
        body["grammar"] = grammar
    r = httpx.post(f"{url}/completions", json=body, timeout=900).json()
    return r["choices"][0]["text"], r["usage"]["completion_tokens"], time.monotonic() - t


def definition(base: str, opening: str) -> str | None:
    """The definition the prompt shows whose head the answer was begun with."""
    fence_line, _, head = opening.partition("\n")
    fence = fence_line[: -len("python")]
    first = head.split("\n", 1)[0]
    at = base.rfind("\n" + first + "\n")
    end = base.find("\n" + fence + "\n", at + 1) if at >= 0 else -1
    return base[at + 1 : end] if end >= 0 else None


def probe(url: str, base: str, code: str, bug: dict[str, Any] | None, form: str,
          asked: str | None = None, above: int = 0, held: bool = False) -> dict[str, Any]:
    lines = code.split("\n")
    slip = ((bug or {}).get("new") or [""])[0].strip()
    start = point.ask(code)
    if asked is not None:  # another question: `{name}` the definition's name, `{symbol}` the prompt's
        symbol = re.findall(r"fixed definition of `([^`]+)`", base)
        asked = asked.replace("{symbol}", symbol[-1] if symbol else point.name_of(code))
        fence = start[len(point.question(code)):]
        start = asked.replace("{name}", point.name_of(code)).replace("\\n", "\n") + fence
    grammar = linechoice.gbnf(lines) if held else None
    said, t1, s1 = complete(url, base + start, point.LEG_ONE_TOKENS, ["\n"], grammar)
    at = point.named(said, code)
    row: dict[str, Any] = {"lines": len(lines), "said": said.strip()[:120], "named": at, "slip_shown": bool(
        slip) and slip in (ln.strip() for ln in lines), "named_slip": at is not None and bool(slip)
        and lines[at].strip() == slip, "leg1_tokens": t1, "leg1_s": round(s1, 1)}
    if at is None:
        return row
    fence = start.split("\n")[-2][: -len("python")]
    lead = base
    if form == "conversation":
        lead = (f"{base}{start}{said.rstrip()}\n{fence}<|im_end|>\n"
                f"<|im_start|>user\n{point.FOLLOW}<|im_end|>\n{ANSWER}")
    from_line = max(0, at - above)  # leg two begun `above` lines before the named one
    text, t2, s2 = complete(url, lead + point.begun(code, from_line), 100, [f"\n{fence}"])
    written = text.split("\n")[at - from_line:]
    row["above_changed"] = [w.rstrip() for w in text.split("\n")[: at - from_line]] != [
        ln.rstrip() for ln in lines[from_line:at]]
    old = ((bug or {}).get("old") or [""])[0].strip()
    first = [w.strip() for w in written[:1]]
    row.update(leg2_tokens=t2, leg2_s=round(s2, 1), changed=first != [lines[at].strip()],
               restored=bool(slip) and any(w.strip() == old for w in written[:4]))
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", type=Path, nargs="+", help="kept bench runs' directories")
    ap.add_argument("--llm", required=True, metavar="URL")
    ap.add_argument("--form", choices=("code", "conversation"), default="conversation")
    ap.add_argument("--ask", default=None, help="leg one's question in place of autod's ({name}: the "
                    "definition's name; {symbol}: the prompt's; \\n: a line break)")
    ap.add_argument("--above", type=int, default=0, help="begin leg two this many lines above the named one")
    ap.add_argument("--grammar", action="store_true", help="hold leg one to the definition's lines "
                    "(autod.planner.linechoice; a server that takes `grammar`: llama.cpp's)")
    ap.add_argument("--min-lines", type=int, default=0, help="only definitions longer than this many lines "
                    "(autod asks two legs of those longer than `llm.point_lines`)")
    args = ap.parse_args()
    known, rows = bugs(), []
    for path in sorted(p for d in args.dir for p in d.glob("*.trace.jsonl")):
        bug_id, seen = path.name.split(".")[0], set()
        for line in path.read_text().splitlines():
            req = json.loads(line).get("request") or {}
            prompt = req.get("prompt")
            if not isinstance(prompt, str) or req.get("temperature") != 0 or ANSWER not in prompt:
                continue
            cut = prompt.rindex(ANSWER) + len(ANSWER)
            base, opening = prompt[:cut], prompt[cut:]
            code = definition(base, opening) if opening.startswith(("```", "~~~")) else None
            short = code is None or len(code.split("\n")) <= args.min_lines
            if short or base in seen or point.FOLLOW in base:  # a leg two's conversation: not a question
                continue
            seen.add(base)
            row = {"bug": bug_id, **probe(args.llm.rstrip("/"), base, code, known.get(bug_id), args.form,
                                          args.ask, args.above, args.grammar)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    named = [r for r in rows if r["named"] is not None]
    print(json.dumps({"summary": {"prompts": len(rows), "named": len(named),
                                  "changed": sum(1 for r in named if r["changed"]),
                                  "slip_shown": sum(1 for r in rows if r["slip_shown"]),
                                  "named_slip": sum(1 for r in rows if r["named_slip"]),
                                  "restored": sum(1 for r in named if r["restored"]),
                                  "above_changed": sum(1 for r in named if r.get("above_changed")),
                                  "leg1_tokens": sum(r["leg1_tokens"] for r in rows), "form": args.form}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
