"""Build-error detectors, one per tool: each reads the reduced lines and yields the blocks it recognises.

Python tracebacks, pytest, mypy, ruff (detectors_python), gcc/ld, tsc, eslint, cargo, go
(detectors_other), and the configured custom patterns (here); pure functions over lists of str. This
module fixes the order they run in. Internal to autod.sources.parsers, which turns each Found
(autod.sources.found) into a Failure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence

from autod.sources.detectors_other import _cargo, _eslint, _gcc, _go, _tsc
from autod.sources.detectors_python import _mypy, _pytest, _python_tracebacks, _ruff
from autod.sources.found import ESLINT_MSG, ESLINT_PATH, Found, clean_path
from autod.sources.prefilter import SENTINEL

__all__ = ["DETECTORS", "ESLINT_MSG", "ESLINT_PATH", "Found", "clean_path", "custom_patterns"]


def custom_patterns(lines: list[str], patterns: Sequence[re.Pattern[str]]) -> Iterator[Found]:
    """Each line a configured pattern matches, as its own one-line block."""
    for pattern in patterns:
        for i, line in enumerate(lines):
            if line != SENTINEL and pattern.search(line):
                yield Found("custom", f"custom: {line.strip()}", i, i, i, (pattern.pattern, line))


# run in this order: a block claimed by an earlier, more specific detector is not reported again
DETECTORS: tuple[Callable[[list[str]], Iterator[Found]], ...] = (
    _pytest,
    _python_tracebacks,
    _cargo,
    _ruff,
    _tsc,
    _eslint,
    _mypy,
    _gcc,
    _go,
)
