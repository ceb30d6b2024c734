"""What a build-error detector yields (Found), and what the detectors share: one name per path, where a
block ends, eslint's line forms (parse_locations reads them too)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from autod.sources.prefilter import SENTINEL


@dataclass
class Found:
    """One block a detector recognised, in line indexes of the reduced lines."""

    detector: str
    summary: str
    start: int  # first line of the block (index into the reduced lines)
    end: int  # last line of the block
    anchor: int  # the line that completes the failure
    key: tuple[str, ...]
    spans: list[tuple[int, int]] = field(default_factory=list)
    excerpt: str | None = None  # detector-built excerpt (pytest joins two sections)
    fallback_path: str | None = None


# eslint's stylish format; parse_locations reads it too
ESLINT_PATH = re.compile(
    r"^(?P<path>(?:[A-Za-z]:)?[^\s:]*[\w-]\.(?:js|jsx|ts|tsx|mjs|cjs|mts|cts|vue|svelte|astro))\s*$"
)
# The message is the shortest text the rule and the blanks after it leave, and that text ends where a
# run of blanks begins: so it is empty or ends in a non-blank (`(?:.*?\S)??`), and the tail is tried
# once per run of blanks, not from every blank in it (a line of 16,000 blanks was 16,000 scans of
# them: 13.6 s for 20K characters, the event loop stalled). The same matches as the plain `.*?`.
ESLINT_MSG = re.compile(
    r"^\s++(?P<line>\d++):(?P<col>\d++)\s++(?P<sev>error|warning)\s++(?P<msg>(?:.*?\S)??)"
    r"(?:\s{2,}(?P<rule>[\w@/.-]++))?\s*$"
)

# the `--> path:line:col` line under a ruff or rustc message
ARROW = re.compile(r"^\s*--> (?P<path>.+?):(?P<line>\d+):(?P<col>\d+)\s*$")


def clean_path(path: str) -> str:
    """`path` without a leading "./", so one file is always named the same way."""
    return path[2:] if path.startswith("./") else path


def block_until_blank(lines: list[str], i: int, cap: int = 60) -> int:
    """The index of the last line of the block starting at `i`: up to a blank line, at most `cap` lines."""
    end = i
    while end + 1 < len(lines) and end - i < cap and lines[end + 1].strip() and lines[end + 1] != SENTINEL:
        end += 1
    return end

