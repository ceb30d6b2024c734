"""Every regular expression autod keeps at module level matches in time linear in its input.

Check output, tailed log lines, LLM replies and workspace files are untrusted, and Python's `re` holds
the GIL for a whole match: a pattern whose time grows with the square of a line's length stalls the
event loop even from a worker thread. The patterns are found, not listed: every module of the package
is imported and every compiled pattern it holds (alone or in a tuple, list, dict or set) is run over
inputs drawn from its own parse tree (tests/adversarial.py), at 2,000 and 32,000 characters; the CPU
time may grow 16-fold, not 256-fold (tests/cputime.py)."""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from adversarial import Shape, build, shapes
from cputime import BOUND, LARGE, SMALL, climb

import autod

# A pattern that only ever meets bounded, trusted text may be exempted here, by name, with the reason
# and the call site that bounds it. None is: every pattern found is held to linear time.
EXEMPT: dict[str, str] = {}


def _containers(value: object, name: str, depth: int = 0):
    """The patterns in `value`: itself, or in a container two levels deep at most (`(pattern, repl)`
    pairs in a list). A module's namespace kept in a value (autod.checks.judge_plugin keeps pytest's)
    holds another package's patterns, not autod's."""
    if isinstance(value, re.Pattern):
        yield name, value
    elif depth < 2 and isinstance(value, tuple | list | set | frozenset):
        for i, item in enumerate(value):
            yield from _containers(item, f"{name}[{i}]", depth + 1)
    elif depth < 2 and isinstance(value, dict) and not any(str(k).startswith("__") for k in value):
        for key, item in value.items():
            yield from _containers(item, f"{name}[{key!r}]", depth + 1)


def _defines(module: object, attr: str) -> bool:
    path = getattr(module, "__file__", None)
    source = Path(path).read_text(encoding="utf-8") if path else ""
    return re.search(rf"^{re.escape(attr)}\b[^=\n]*=", source, re.M) is not None


def module_patterns() -> dict[str, re.Pattern]:
    """Every compiled pattern held at the top of an autod module, named where it is defined."""
    found: dict[int, tuple[bool, str, re.Pattern]] = {}
    for info in sorted(pkgutil.walk_packages(autod.__path__, "autod."), key=lambda i: i.name):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for attr, value in sorted(vars(module).items()):
            for name, pattern in _containers(value, f"{info.name}.{attr}"):
                here = _defines(module, attr)
                if id(pattern) not in found or (here and not found[id(pattern)][0]):
                    found[id(pattern)] = (here, name, pattern)
    return {name: pattern for _, name, pattern in sorted(found.values(), key=lambda f: f[1])}


PATTERNS = module_patterns()


def test_the_patterns_are_found() -> None:
    # the discovery itself: it reaches ones that once were quadratic, alone and in a list of pairs, and
    # no module namespace another package's patterns are kept in
    for name in ("autod.checks.digest._BANNER", "autod.sources.found.ESLINT_MSG",
                 "autod.planner.parse._FENCE", "autod.events._NORMALISERS[5][0]",
                 "autod.logs._PATTERNS[0][0]"):
        assert name in PATTERNS, name
    assert len(PATTERNS) > 100 and not any("judge_plugin._SPACES" in name for name in PATTERNS)
    assert set(EXEMPT) <= set(PATTERNS)


def worst_growth(pattern: re.Pattern) -> tuple[float, str | bytes]:
    """The largest growth from SMALL to LARGE over the pattern's shapes (the first one past BOUND)."""
    as_bytes = isinstance(pattern.pattern, bytes)
    worst: tuple[float, str | bytes] = (0.0, "")
    for shape in shapes(pattern):

        def work_at(size: int, shape: Shape = shape) -> Callable[[], object]:
            text = build(shape, size, as_bytes)
            return lambda: list(pattern.finditer(text))

        ratio = climb(work_at)
        if ratio > worst[0]:
            worst = (ratio, build(shape, SMALL, as_bytes))
        if ratio >= BOUND:
            break  # one shape is enough to fail; the others would only add minutes
    return worst


@pytest.mark.slow
@pytest.mark.early
@pytest.mark.parametrize("name", sorted(set(PATTERNS) - set(EXEMPT)))
def test_matching_time_grows_linearly(name: str) -> None:
    ratio, text = worst_growth(PATTERNS[name])
    assert ratio < BOUND, f"{name}: {ratio:.0f}x on {text[:60]!r}... ({SMALL} to {LARGE} characters)"
