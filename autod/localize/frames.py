"""Where a failure points: traceback frames and failing test ids, parsed from (untrusted) tool output.

Formats read: Python tracebacks (`File "x.py", line 12, in f`), pytest's long and short tracebacks
(`x.py:12: in f`, `x.py:12: AssertionError`), `--tb=line`, and pytest's summary lines
(`FAILED path::Class::test[param] - reason`, `ERROR path::test`, `path::test FAILED`, and a failed
subtest's `SUBFAILED(k=v) path::test - reason`).
Nothing here touches the file system: the caller decides which paths are readable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from autod.linebreaks import lines_of

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_PY_FRAME = re.compile(
    r'^\s*File "(?P<path>[^"<>\n]{1,1000})", line (?P<line>\d{1,7})(?:, in (?P<func>[\w.<>]+))?'
)
# pytest: `path.py:12: in func` (a frame on the way) or `path.py:12: SomeError` (where it was raised)
_PYTEST_FRAME = re.compile(
    r"^(?P<path>[^\s:][^:\n]{0,1000}?\.py):(?P<line>\d{1,7}): (?:in (?P<func>[\w.<>]+)\s*$|(?P<exc>[\w.]+)\b)"
)
_TEST_ID = r"(?P<id>[^\s:]{1,1000}?\.py(?:::[A-Za-z_]\w{0,200}){1,4}(?:\[[^\n]{0,300}?\])?)"
_SUMMARY = re.compile(rf"^(?:FAILED|ERROR)\s+{_TEST_ID}(?:\s+-\s.*)?\s*$")
# a failed subtest: `SUBFAILED[msg] (k=v, ...) path::test - reason` (pytest 9, unittest's subTest and the
# `subtests` fixture), `SUBFAIL ...` (the pytest-subtests plugin); its test's own line may say PASSED
SUBTEST_FAILED = "SUBFAIL"  # the prefix both spell a failed subtest with
# read only where a space ends before it (`_subtest`): said in the pattern, so no other place costs a scan
_SUB_ID = re.compile(rf"(?<!\S){_TEST_ID}(?:\s+-(?:\s.*)?)?\s*$")
_SUB_SCAN = 600  # characters of a subtest's description searched for its test's id, at most
_SUB_TRIES = 40  # places (after a space) the id is tried at, at most: a bounded, linear read
_VERBOSE = re.compile(rf"^{_TEST_ID}\s+(?:FAILED|ERROR)\b")
_SECTION = re.compile(r"^_{3,} (?:ERROR at \w+ of )?(?P<name>[\w.\[\]-][^\n]{0,300}?) _{3,}\s*$")


@dataclass(frozen=True)
class Frame:
    """One place a traceback names: a path as printed, the line, and the function when printed."""

    path: str
    line: int
    func: str | None = None
    raised: bool = False  # the last frame of its traceback (pytest prints the exception there)


@dataclass(frozen=True)
class TestId:
    """A failing test as pytest names it: `path::Class::test[param]`."""

    path: str
    names: tuple[str, ...]  # ("Class", "test") or ("test",); the parameters are dropped
    nodeid: str

    @property
    def qualname(self) -> str:
        return ".".join(self.names)


def clean(text: str) -> str:
    return _ANSI.sub("", text)


def parse_frames(text: str) -> list[Frame]:
    """Every frame the output names, in printed order (outermost first within each traceback)."""
    frames: list[Frame] = []
    for raw in lines_of(clean(text)):
        line = raw.rstrip()
        m = _PY_FRAME.match(line)
        if m:
            frames.append(Frame(m.group("path"), int(m.group("line")), m.group("func")))
            continue
        m = _PYTEST_FRAME.match(line.strip())
        if m:
            func = m.group("func")
            frames.append(Frame(m.group("path"), int(m.group("line")), func, raised=func is None))
    return frames


def parse_test_ids(text: str, limit: int = 50) -> list[TestId]:
    """The failing tests named in pytest's summary (or verbose) lines, deduplicated, in order."""
    out: list[TestId] = []
    seen: set[str] = set()
    for raw in lines_of(clean(text)):
        line = raw.strip()
        m = _SUMMARY.match(line) or _VERBOSE.match(line) or _subtest(line)
        if not m:
            continue
        tid = test_id(m.group("id"))
        if tid is not None and tid.nodeid not in seen:
            seen.add(tid.nodeid)
            out.append(tid)
            if len(out) >= limit:
                break
    return out


def _subtest(line: str) -> re.Match[str] | None:
    """A failed subtest's summary line, matched at its test's id: the first place after a space, within
    the description's first `_SUB_SCAN` characters, where an id and then the reason (or the end) begin.
    The description is the test's own text (its parameters), so an id-shaped parameter can be read
    first: what this names is where to look, never a verdict (autod.checks.judge_plugin hears those)."""
    if not line.startswith(SUBTEST_FAILED):
        return None
    at = len(SUBTEST_FAILED)
    for _ in range(_SUB_TRIES):
        at = line.find(" ", at, _SUB_SCAN)
        if at < 0:
            return None
        at += 1
        m = _SUB_ID.match(line, at)
        if m:
            return m
    return None


def test_id(nodeid: str) -> TestId | None:
    """Parse one `path::name...` node id; None when it is not that shape."""
    base = nodeid.split("[", 1)[0]
    parts = base.split("::")
    if len(parts) < 2 or not parts[0].endswith(".py"):
        return None
    names = tuple(parts[1:])
    if not all(re.fullmatch(r"[A-Za-z_]\w*", n) for n in names):
        return None
    return TestId(parts[0], names, nodeid)


def failing_sections(text: str) -> list[str]:
    """Test names from pytest's `____ test_name ____` section headers (long and short tracebacks)."""
    out = []
    for raw in lines_of(clean(text)):
        m = _SECTION.match(raw.strip())
        if m:
            out.append(m.group("name").strip())
    return out


def is_test_path(rel: str) -> bool:
    """A test file by pytest's default naming, or any file under a `tests`/`test` directory."""
    parts = rel.split("/")
    name = parts[-1]
    if name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py"):
        return True
    return any(p in ("tests", "test", "testing") for p in parts[:-1])
