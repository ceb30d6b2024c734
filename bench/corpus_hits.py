"""Is the bug's definition in the prompt? The judgement bench_corpus applies to both sides alike.

A bug is *found* when the wide prompt's code holds its definition whole, line for line (a constant or
class attribute: its whole statement), as bench_reallib counts a function hit; or, for a definition
longer than autod shows whole (LONG lines), when one block headed by that definition holds both its
signature line and the mutated lines: all a plan needs to fix a long definition is the lines around the
slip, and no whole copy of a 200-line function fits a small model's prompt anyway. `line` is the
mutated lines anywhere in the code. Tokens are autod's estimate of the whole prompt (4 characters a
token), as bench_reallib counts them.
"""

from __future__ import annotations

import re
from typing import Any

from bench_localize import contains_run
from bench_reallib import bug_spans, hits

LONG = 150  # lines; autod.localize.render.LONG when this bench was written (fixed: both sides alike)
_HEADER = re.compile(r"(?m)^(?=### )")


def libraries() -> dict[str, Any]:
    """Every library either bug list names: the twelve of the corpus and bench_reallib's six."""
    from corpus_seed import LIBRARIES as corpus
    from reallib_seed import LIBRARIES as six

    return {**six, **corpus}


def spans(buggy: str, bug: dict[str, Any]) -> dict[str, Any]:
    """The mutated lines, the whole definition's lines and its signature line, in the buggy file."""
    bug_lines, func_lines = bug_spans(buggy, bug)
    sig = next((ln for ln in func_lines if ln.lstrip().startswith(("def ", "async def ", "class "))),
               func_lines[0] if func_lines else "")
    return {"bug": bug_lines, "func": func_lines, "signature": sig}


def blocks_of(code: str, path: str, symbol: str) -> list[list[str]]:
    """The code blocks headed `### path · symbol (...`, each as its lines."""
    out = []
    for part in _HEADER.split(code):
        head, _, body = part.partition("\n")
        if head.startswith(f"### {path} · {symbol} (") or head == f"### {path} · {symbol}":
            out.append([ln.rstrip() for ln in body.splitlines()])
    return out


def sliced_hit(code: str, bug: dict[str, Any], s: dict[str, Any]) -> bool:
    """A long definition's block holding its signature and the mutated lines."""
    if len(s["func"]) <= LONG or not s["bug"]:
        return False
    return any(contains_run(b, [s["signature"]]) and contains_run(b, s["bug"])
               for b in blocks_of(code, bug["file"], bug["qualname"]))


def position(used: list[dict[str, Any]], bug: dict[str, Any]) -> int | None:
    """1-based place of the bug's definition among the code entries shown (outline and diff aside)."""
    code = [e for e in used if e.get("lines") not in ("outline", "diff")]
    return next((i for i, e in enumerate(code, 1)
                 if e.get("path") == bug["file"] and e.get("symbol") == bug["qualname"]), None)


def judge(prompt: str, code: str, used: list[dict[str, Any]], bug: dict[str, Any],
          s: dict[str, Any]) -> dict[str, Any]:
    line, whole = hits(code, s["bug"], s["func"])
    sliced = not whole and sliced_hit(code, bug, s)
    return {"found": whole or sliced, "whole": whole, "sliced": sliced, "line": line,
            "tokens": len(prompt) // 4, "position": position(used, bug),
            "definition_lines": len(s["func"])}


def block_rank(view: str, s: dict[str, Any]) -> int | None:
    """The bug's definition's place among a view's blocks (None: not there)."""
    blocks = [b for b in _HEADER.split(view) if b.strip()]

    def flat(lines: list[str]) -> list[str]:  # a class attribute is shown dedented beside its reader
        return [ln.strip() for ln in lines]

    for i, b in enumerate(blocks, 1):
        if hits("\n".join(flat(b.splitlines())), flat(s["bug"]), flat(s["func"]))[1]:
            return i
    return None


def block_sizes(view: str) -> list[int]:
    """The characters of each of a view's blocks, in order."""
    return [len(b.strip()) for b in _HEADER.split(view) if b.strip()]


def diagnose(code: str, used: list[dict[str, Any]], bug: dict[str, Any], s: dict[str, Any]) -> dict[str, Any]:
    """Why a bug was not found: the same prompt at the largest budget autod accepts."""
    line, whole = hits(code, s["bug"], s["func"])
    at = position(used, bug)
    if at is None:
        why = "not reached"
    elif whole or sliced_hit(code, bug, s):
        why = "reached, ranked below what the budget held"
    elif len(s["func"]) > LONG:
        why = "reached, too long to be shown whole and its slice misses the slip"
    else:
        why = "reached, shown only in part"
    return {"why": why, "position_unbounded": at,
            "of": len([e for e in used if e.get("lines") not in ("outline", "diff")]),
            "line_hit_unbounded": line}
