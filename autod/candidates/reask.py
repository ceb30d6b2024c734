"""A suspect asked again another way after a reply that gave its code back.

When a suspect's greedy reply (its first, at temperature 0) gives its definition back as it was (an
echo of the prompt, the code rewritten to the same AST), one more sample of the same prompt mostly
says the same: the model read the question as "copy this". Its next draw is a pointed question
instead, at temperature 0, in place of its next sampled draw: the same prompt and, after it, the
failing assertion and the lines of the definition the traceback runs through (`debug_pointed.md`).
Asked once per suspect and cycle, and only in place of a draw the search planned: a suspect the plan
gives no more draws (autod.candidates.order: a long one of low rank, whose draws are worth less than
the wide prompt's; or `candidates.focused: 1`) is not asked again.

Asked whole, the pointed question gave the greedy reply's echo back, often token for token: 81 of 81
pointed draws in the 17 held-out runs of the tenth to twelfth sessions were echoes. So where the
server takes the answer's start (autod.planner.prefill) it is asked in two legs at any length past
`POINTED_LINES` (autod.planner.point): the line first, held to the definition's lines less those its
earlier draws named and wrote back, then the code from that line. What the question asks ("find the
line ... and write the complete fixed definition") is what the two legs ask.
"""

from __future__ import annotations

from collections.abc import Mapping

from autod.linebreaks import lines_of
from autod.modes import render
from autod.plan import Plan
from autod.planner.fences import fence_for, fenced

__all__ = ["POINTED_LINES", "echoed", "pointed_messages", "reask"]

MAX_FAILURE_LINES = 8
POINTED_LINES = 1  # the pointed question is asked in two legs where its reply would write more lines
View = tuple[str, bool]  # (view, at temperature 0), as CandidateSearch.views gives them


def echoed(outcome: str, plan: Plan | None) -> bool:
    """Whether a candidate gave its prompt's code back: the code as it was, or only the prompt's blocks."""
    return outcome == "unchanged" or (outcome == "no_change" and plan is not None and plan.echoed)


def reask(views: list[View], at: int, view: str, echo: bool) -> bool:
    """After the draw `views[at]` of suspect `view` (`echo`: it gave the code back): its next planned
    draw becomes its pointed question (in `views`, in place). True when one was placed."""
    kind, _, k = view.partition(":")
    pointed = (f"pointed:{k}", True)
    if kind != "focused" or not echo or pointed in views:
        return False
    sample = next((i for i in range(at + 1, len(views)) if views[i] == (view, False)), None)
    if sample is None:  # no draw of it left in the plan: not worth another
        return False
    views[sample] = pointed
    return True


def pointed_messages(messages: list[dict[str, str]], suspect: Mapping[str, str]) -> list[dict[str, str]]:
    """The suspect's prompt with the pointed question added to its last user turn (two user turns in a
    row are refused by some chat templates)."""
    excerpt, code = suspect.get("excerpt") or "", suspect.get("code") or ""
    failure = failing_lines(excerpt) or "(the check's output above)"
    named = traced_lines(excerpt, code)
    shown = f"\nThe traceback runs through these lines of it:\n\n{fenced(named, 'python')}\n" if named else ""
    hint = render("debug_pointed", symbol=suspect.get("symbol", ""), fence=fence_for(failure),
                  failure=failure, named=shown)
    out = [dict(m) for m in messages]
    last = max((i for i, m in enumerate(out) if m.get("role") == "user"), default=None)
    if last is None:
        return [*out, {"role": "user", "content": hint.strip()}]
    out[last]["content"] = out[last]["content"].rstrip("\n") + "\n" + hint
    return out


def failing_lines(excerpt: str) -> str:
    """The lines of a check's output that say what failed: pytest's `>` source line and `E` lines of
    the last frame, else the last non-blank lines."""
    lines = lines_of(excerpt)
    start = max((i for i, ln in enumerate(lines) if ln.startswith(">")), default=None)
    if start is not None:
        picked = [lines[start]] + [ln for ln in lines[start + 1 :] if ln.startswith("E ")]
    else:
        picked = [ln for ln in lines if ln.startswith("E ")] or [ln for ln in lines if ln.strip()]
    return "\n".join(picked[:MAX_FAILURE_LINES] if start is not None else picked[-MAX_FAILURE_LINES:])


def traced_lines(excerpt: str, code: str) -> str:
    """The lines of `code` that pytest's traceback marks with `>` (the frames inside the definition)."""
    marked = {ln[1:].strip() for ln in lines_of(excerpt) if ln.startswith(">") and ln[1:].strip()}
    return "\n".join(ln for ln in lines_of(code) if ln.strip() and ln.strip() in marked)
