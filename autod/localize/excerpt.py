"""Failure output made worth its tokens: test-runner progress noise out, the first failure and summary in."""

from __future__ import annotations

import re

from autod.linebreaks import lines_of
from autod.localize.frames import SUBTEST_FAILED

# pytest's progress lines (`tests/x.py ..F..s   [ 42%]`, `....F..`), bare percentage markers,
# timing lines (`==== 3 failed, 5 passed in 0.12s ====`, `Ran 3 tests in 0.001s`), session headers.
_PROGRESS = re.compile(r"^(?:\S+\.py\s+)?[.FEsxXp]++\s*+(?:\[\s*\d{1,3}%\])?\s*+$")  # possessive: linear
_PERCENT = re.compile(r"^\s*\[\s*\d{1,3}%\]\s*$")
_NOISE = re.compile(
    r"^(?:=+ (?:test session starts|warnings summary|short test summary info)? ?=*"
    r"|platform \S+ -- Python .*|cachedir: .*|rootdir: .*|configfile: .*|plugins: .*"
    r"|collected \d+ items?.*|collecting \.\.\..*|Ran \d+ tests? in [\d.]+s"
    r"|-- Docs: https://docs\.pytest\.org.*)\s*$"
)
_TIMING = re.compile(r"\bin \d+(?:\.\d+)?s(?: \(\d+:\d\d:\d\d\))?\b")


def strip_progress(text: str) -> str:
    """`text` without progress dots, percentage markers, session banners and timings."""
    out = []
    for line in lines_of(text):
        bare = line.strip()
        if bare and (_PROGRESS.match(bare) or _PERCENT.match(bare) or _NOISE.match(bare)):
            continue
        out.append(_TIMING.sub("", line).rstrip())
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip()


def trim_failure(text: str, budget_chars: int) -> str:
    """Noise out; when still too long, the first failure's section and the summary lines kept."""
    clean = strip_progress(text)
    if len(clean) <= budget_chars:
        return clean
    lines = lines_of(clean)
    summary = [ln for ln in lines if ln.startswith(("FAILED ", "ERROR ", SUBTEST_FAILED, "E   "))][-20:]
    tail = "\n".join(dict.fromkeys(summary))
    head_budget = max(200, budget_chars - len(tail) - 40)
    head = clean[:head_budget]
    return f"{head}\n[... output cut ...]\n{tail}" if tail else head + "\n[... output cut ...]"
