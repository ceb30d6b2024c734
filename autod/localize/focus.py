"""The focused view of a failure's code: the suspects, the few top-ranked definitions under test, whole.

Handed the failure and the buggy function alone, and told the bug is there, Qwen2.5-Coder-1.5B fixed
real-library bugs with its first reply that it missed when the same function sat first among twenty
definitions of a wide prompt (bench/bench_reallib.py: the oracle against autod, docs/PERFORMANCE.md).
Agentless repairs from its localized snippets, and a prompt a fifth the size is a fifth of the prompt
time on a CPU. Localization cannot know which definition is buggy, so each suspect is asked about
alone, in rank order (where the error was raised, then the Ochiai ranking of the failing tests'
coverage), in turn over the attempts (autod.candidates.search: `candidates.focused` draws an
attempt), and the wide prompt follows: a focused draw is one view among the candidates' draws, never
the only one.

Tests are left out (the failure output already shows the failing lines and pytest's assertion), and
so are constants, class headers, outlines and windows of module-level code: a suspect is a definition
a plan can rewrite whole; what is not is what the wide view is for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from autod.localize.frames import is_test_path

if TYPE_CHECKING:
    from autod.localize.render import Rendered

FOCUS_KINDS = ("function",)  # a definition shown whole


@dataclass(frozen=True)
class Suspect:
    """One definition of the code under test, whole, as the wide prompt showed it."""

    path: str
    symbol: str
    code: str  # the definition's exact text


def eligible(entry: dict[str, str | None], kind: str) -> bool:
    """Whether a rendered entry may be a suspect: a definition under test a plan can rewrite whole."""
    path = entry.get("path") or ""
    return (kind in FOCUS_KINDS and bool(path) and bool(entry.get("symbol")) and not is_test_path(path)
            and not entry.get("part_of"))


def suspects(code: Rendered, k: int) -> list[Suspect]:
    """The first `k` eligible definitions in rank order (none when k is 0)."""
    out: list[Suspect] = []
    for entry, kind, block in zip(code.entries, code.kinds, code.blocks, strict=True):
        if len(out) >= k:
            break
        if eligible(entry, kind):
            out.append(Suspect(str(entry["path"]), str(entry["symbol"]), _body(block)))
    return out


def _body(block: str) -> str:
    """The code inside a rendered block (autod.localize.render.block: a header line, then a fence)."""
    inner = block.split("\n", 1)[1] if "\n" in block else ""
    inner = inner.split("\n", 1)[1] if inner.startswith("```") else inner
    return inner[: inner.rfind("\n```")] if inner.rstrip().endswith("```") else inner
