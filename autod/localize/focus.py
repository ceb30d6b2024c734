"""The focused view of a failure's code: the few top-ranked definitions of the code under test, whole.

Handed the failure and the buggy function alone, Qwen2.5-Coder-1.5B fixed real-library bugs that it
missed when the same function sat first among thirty definitions and the module's constants
(bench/bench_reallib.py: the oracle against autod); Agentless repairs from its localized snippets,
and a third of the tokens is a third of the prompt time on a CPU. Localization cannot know which
definition is buggy, so the focused view is the top `k` by rank (where the error was raised, then the
Ochiai ranking of the failing tests' coverage), and it is one view among the candidates' draws, never
the only one (autod.candidates.search: the wide prompt follows), and only when `candidates.focused`
asks for it: measured, it fixed as many small bugs in less time (different ones) and no more
real-library bugs than the wide prompt alone (docs/PERFORMANCE.md).

Tests are left out (the failure output already shows the failing lines and pytest's assertion), and
so are constants, class headers and outlines: they are what the wide view is for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autod.localize.frames import is_test_path

if TYPE_CHECKING:
    from autod.localize.render import Rendered

FOCUS_KINDS = ("function", "window")  # a definition whole, or the lines around a module-level frame


def eligible(entry: dict[str, str | None], kind: str) -> bool:
    """Whether a rendered entry may be in the focused view: code under test a plan can rewrite."""
    path = entry.get("path") or ""
    return kind in FOCUS_KINDS and bool(path) and not is_test_path(path) and not entry.get("part_of")


def focused(code: Rendered, k: int) -> str:
    """The first `k` eligible blocks in rank order ("" when k is 0 or none is eligible)."""
    if k <= 0:
        return ""
    shown = zip(code.entries, code.kinds, code.blocks, strict=True)
    picked = [block for entry, kind, block in shown if eligible(entry, kind)]
    return "\n\n".join(picked[:k])
