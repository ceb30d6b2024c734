"""Build-error detectors, one per tool: each reads the reduced lines and yields the blocks it recognises.

Python tracebacks, pytest, mypy, ruff, gcc/ld, tsc, eslint, cargo, go, and the configured custom
patterns; pure functions over lists of str. Internal to autod.sources.parsers, which turns each
Found into a Failure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
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
ESLINT_MSG = re.compile(
    r"^\s+(?P<line>\d+):(?P<col>\d+)\s+(?P<sev>error|warning)\s+(?P<msg>.*?)(?:\s{2,}(?P<rule>[\w@/.-]+))?\s*$"
)


def clean_path(path: str) -> str:
    """`path` without a leading "./", so one file is always named the same way."""
    return path[2:] if path.startswith("./") else path


# ---------------------------------------------------------------------------------------
# Detectors: each yields Found over the reduced lines

_TB_HEAD = "Traceback (most recent call last):"
_TB_FRAME = re.compile(r'^\s+File "(?P<path>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>.+))?')
_EXC_LINE = re.compile(r"^(?P<name>[A-Za-z_][\w.]*)(?::\s?(?P<msg>.*))?$")
_TB_CHAIN = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)


def _prefix_stripper(prefix: str) -> Callable[[str], str | None]:
    """Lines of a prefixed traceback (timestamps, [worker]) carry the same shaped prefix."""
    if not prefix:
        return lambda s: s
    pattern = re.compile("^" + re.sub(r"\d+", r"\\d+", re.escape(prefix)))

    def strip(s: str) -> str | None:
        m = pattern.match(s)
        return s[m.end() :] if m else None

    return strip


def _is_exception_line(body: str) -> re.Match[str] | None:
    m = _EXC_LINE.match(body)
    if m and (any(c.isupper() for c in m.group("name")) or "." in m.group("name")):
        return m
    return None


def _python_tracebacks(lines: list[str]) -> Iterator[Found]:
    n = len(lines)
    i = 0
    while i < n:
        k = lines[i].find(_TB_HEAD)
        if k < 0:
            i += 1
            continue
        strip = _prefix_stripper(lines[i][:k])
        frames: list[tuple[str, str, str]] = []
        exc: re.Match[str] | None = None
        end = i
        j = i + 1
        complete = False
        while j < n:
            body = strip(lines[j])
            if body is None or lines[j] == SENTINEL:
                complete = body is None and lines[j] != SENTINEL
                break
            if body[:1] in (" ", "\t"):
                fm = _TB_FRAME.match(body)
                if fm:
                    frames.append((fm.group("path"), fm.group("line"), (fm.group("func") or "").strip()))
                end = j
                j += 1
                continue
            exc = _is_exception_line(body)
            complete = True
            if exc is None:
                break
            end = j
            # chained exceptions continue the same block
            k2 = j + 1
            while k2 < n and (strip(lines[k2]) or "").strip() == "":
                k2 += 1
            if k2 < n and (strip(lines[k2]) or "").strip() in _TB_CHAIN:
                k3 = k2 + 1
                while k3 < n and (strip(lines[k3]) or "").strip() == "":
                    k3 += 1
                if k3 < n and (strip(lines[k3]) or "").startswith(_TB_HEAD):
                    j = k3 + 1
                    exc = None
                    complete = False
                    continue
            break
        if not complete:  # ran into the end of the text: the rest has not been written yet
            i = j
            continue
        where = f" (at {clean_path(frames[-1][0])}:{frames[-1][1]})" if frames else ""
        if exc is not None:
            head = exc.group(0).strip()
            key = (exc.group("name"), exc.group("msg") or "")
        else:
            head = "traceback without an exception line"
            key = ("<none>", "")
        yield Found(
            "python-traceback",
            f"python: {head}{where}",
            i,
            end,
            end,
            (*key, *(f"{p} in {f}" for p, _, f in frames)),
        )
        i = end + 1


_PT_HEADER = re.compile(r"^_{3,} (?P<name>.+?) _{3,}$")
_PT_SUMMARY = re.compile(r"^(?P<kind>FAILED|ERROR) (?P<node>\S+)(?: - (?P<msg>.*))?$")
_PT_EXC = re.compile(r"^(?P<path>\S+?\.py):(?P<line>\d+): (?P<exc>[\w.]+)\s*$")
_PT_E = re.compile(r"^E\s+(?P<msg>\S.*)$")


@dataclass
class _Section:
    name: str
    start: int
    end: int
    msg: str
    exc_line: int | None


def _pytest_sections(lines: list[str]) -> list[_Section]:
    out: list[_Section] = []
    n = len(lines)
    for i, line in enumerate(lines):
        if not line.startswith("___"):
            continue
        m = _PT_HEADER.match(line)
        if not m:
            continue
        j = i + 1
        msg = ""
        exc_line = None
        while j < n and lines[j] != SENTINEL and not lines[j].startswith(("___", "====")):
            em = _PT_E.match(lines[j])
            if em and not msg:
                msg = em.group("msg").strip()
            if _PT_EXC.match(lines[j]):
                exc_line = j
            j += 1
        if j >= n or lines[j] == SENTINEL:
            continue  # not finished yet
        out.append(_Section(m.group("name"), i, j - 1, msg, exc_line))
    return out


def _section_matches(header: str, node: str) -> bool:
    name = node.split("::")[-1]
    return (
        header == name
        or header.endswith("." + name)
        or header.endswith(" of " + name)
        or header == f"ERROR collecting {node}"
    )


def _pytest(lines: list[str]) -> Iterator[Found]:
    sections = _pytest_sections(lines)
    used: set[int] = set()
    for i, line in enumerate(lines):
        if not line.startswith(("FAILED ", "ERROR ")):
            continue
        m = _PT_SUMMARY.match(line)
        if not m:
            continue
        node = m.group("node")
        summary_msg = (m.group("msg") or "").strip()
        sec = next((s for s in reversed(sections) if s.start < i and _section_matches(s.name, node)), None)
        spans = [(i, i)]
        excerpt = None
        start = i
        msg = summary_msg
        if sec is not None:
            used.add(sec.start)
            spans.append((sec.start, sec.end))
            start = sec.start
            msg = sec.msg or summary_msg
            excerpt = "\n".join([*lines[sec.start : sec.end + 1], "...", line])
        shown = summary_msg or msg
        text = f"pytest: {m.group('kind')} {node}" + (f" - {shown}" if shown else "")
        yield Found(
            "pytest",
            text,
            start,
            i if sec is None else sec.end,
            i,
            (node.split("::")[-1], msg[:80]),
            spans,
            excerpt,
            fallback_path=node.split("::")[0],
        )
    for sec in sections:
        if sec.start in used or (sec.exc_line is None and not sec.msg):
            continue
        msg = sec.msg
        if not msg and sec.exc_line is not None:
            msg = _PT_EXC.match(lines[sec.exc_line]).group("exc")  # type: ignore[union-attr]
        yield Found(
            "pytest",
            f"pytest: {sec.name} - {msg}",
            sec.start,
            sec.end,
            sec.end,
            (sec.name.split(".")[-1].split(" ")[-1], msg[:80]),
            [(sec.start, sec.end)],
        )


_MYPY = re.compile(
    r"^(?P<path>[^\s:][^:]*\.pyi?):(?P<line>\d+):(?:\d+:)? error: (?P<msg>.+?)(?:\s+\[(?P<code>[\w-]+)\])?$"
)


def _mypy(lines: list[str]) -> Iterator[Found]:
    for i, line in enumerate(lines):
        if ": error: " not in line:
            continue
        m = _MYPY.match(line)
        if not m:
            continue
        end = i
        while end + 1 < len(lines) and lines[end + 1].startswith(m.group("path") + ":") and (
            ": note: " in lines[end + 1]
        ):
            end += 1
        code = m.group("code") or ""
        yield Found(
            "mypy",
            f"mypy: {m.group('path')}:{m.group('line')}: error: {m.group('msg')}"
            + (f"  [{code}]" if code else ""),
            i,
            end,
            i,
            (m.group("path"), m.group("msg"), code),
        )


_RUFF_CONCISE = re.compile(
    r"^(?P<path>[^\s:][^:]*):(?P<line>\d+):(?P<col>\d+): (?P<code>[A-Z]{1,4}\d{1,4})(?: \[\*\])? (?P<msg>.*)$"
)
_RUFF_HEAD = re.compile(r"^(?P<code>[A-Z]{1,4}\d{1,4})(?: \[\*\])? (?P<msg>.+)$")
_ARROW = re.compile(r"^\s*--> (?P<path>.+?):(?P<line>\d+):(?P<col>\d+)\s*$")


def _block_until_blank(lines: list[str], i: int, cap: int = 60) -> int:
    end = i
    while end + 1 < len(lines) and end - i < cap and lines[end + 1].strip() and lines[end + 1] != SENTINEL:
        end += 1
    return end


def _ruff(lines: list[str]) -> Iterator[Found]:
    n = len(lines)
    for i, line in enumerate(lines):
        m = _RUFF_CONCISE.match(line)
        if m:
            end = i
            while end + 1 < n and lines[end + 1][:1] == " " and lines[end + 1].strip():
                end += 1
            path, ln, col = m.group("path"), m.group("line"), m.group("col")
        else:
            m = _RUFF_HEAD.match(line) if i + 1 < n and "-->" in lines[i + 1] else None
            am = _ARROW.match(lines[i + 1]) if m else None
            if not m or not am:
                continue
            path, ln, col = am.group("path"), am.group("line"), am.group("col")
            end = _block_until_blank(lines, i)
        yield Found(
            "ruff",
            f"ruff: {clean_path(path)}:{ln}:{col}: {m.group('code')} {m.group('msg')}",
            i,
            end,
            i,
            (path, m.group("code"), m.group("msg")),
        )


_C_EXT = r"(?:c|h|cc|cpp|cxx|c\+\+|hpp|hh|hxx|m|mm|cu|cuh|ino|s|S|f|f90|f95)"
_GCC = re.compile(
    rf"^(?P<path>[^\s:][^:]*?\.{_C_EXT}):(?P<line>\d+):(?:(?P<col>\d+):)? "
    r"(?P<sev>fatal error|error): (?P<msg>.*)$"
)
_LD_UNDEF = re.compile(
    r"^(?P<obj>[^\s:][^:]*?):(?:\(\.\w+[^)]*\)|\d+): undefined reference to [`'](?P<sym>[^`']+)'"
)


def _gcc(lines: list[str]) -> Iterator[Found]:
    n = len(lines)
    for i, line in enumerate(lines):
        if "error: " in line:
            m = _GCC.match(line)
            if not m:
                continue
            end = i
            while end + 1 < n and (
                lines[end + 1][:1] == " " or lines[end + 1].startswith("compilation terminated")
            ) and lines[end + 1] != SENTINEL:
                end += 1
            start = i - 1 if i > 0 and ": In function" in lines[i - 1] else i
            yield Found(
                "gcc",
                f"gcc: {clean_path(m.group('path'))}:{m.group('line')}: {m.group('sev')}: {m.group('msg')}",
                start,
                end,
                i,
                (m.group("path"), m.group("sev"), m.group("msg")),
            )
        elif "undefined reference to" in line:
            lm = _LD_UNDEF.match(line)
            if lm:
                yield Found(
                    "gcc",
                    f"gcc: undefined reference to '{lm.group('sym')}'",
                    i,
                    i,
                    i,
                    ("undefined reference", lm.group("sym")),
                )


_TS_EXT = r"(?:ts|tsx|mts|cts|js|jsx|mjs|cjs|vue)"
_TSC_PAREN = re.compile(
    rf"^(?P<path>[^\s(]+\.{_TS_EXT})\((?P<line>\d+),(?P<col>\d+)\): error (?P<code>TS\d+): (?P<msg>.*)$"
)
_TSC_PRETTY = re.compile(
    rf"^(?P<path>\S+?\.{_TS_EXT}):(?P<line>\d+):(?P<col>\d+) - error (?P<code>TS\d+): (?P<msg>.*)$"
)


def _tsc(lines: list[str]) -> Iterator[Found]:
    n = len(lines)
    for i, line in enumerate(lines):
        if "error TS" not in line:
            continue
        m = _TSC_PAREN.match(line)
        end = i
        if not m:
            m = _TSC_PRETTY.match(line)
            if not m:
                continue
            # pretty: blank, code snippet, squiggle, blank
            while (
                end + 1 < n
                and end - i < 6
                and lines[end + 1] != SENTINEL
                and not _TSC_PRETTY.match(lines[end + 1])
                and not lines[end + 1].startswith("Found ")
            ):
                end += 1
            while end > i and not lines[end].strip():
                end -= 1
        yield Found(
            "tsc",
            f"tsc: {m.group('path')}({m.group('line')},{m.group('col')}): "
            f"error {m.group('code')}: {m.group('msg')}",
            i,
            end,
            i,
            (m.group("path"), m.group("code"), m.group("msg")),
        )


def _eslint(lines: list[str]) -> Iterator[Found]:
    path: str | None = None
    path_line = 0
    for i, line in enumerate(lines):
        pm = ESLINT_PATH.match(line)
        if pm:
            path, path_line = pm.group("path"), i
            continue
        if path is None:
            continue
        mm = ESLINT_MSG.match(line)
        if not mm:
            if line.strip():
                path = None
            continue
        if mm.group("sev") != "error":
            continue
        rule = mm.group("rule") or ""
        yield Found(
            "eslint",
            f"eslint: {path}:{mm.group('line')}:{mm.group('col')} {mm.group('msg')}"
            + (f" ({rule})" if rule else ""),
            i,
            i,
            i,
            (path, rule, mm.group("msg")),
            excerpt="\n".join([lines[path_line], line]),
        )


_CARGO = re.compile(r"^error(?:\[(?P<code>E\d+)\])?: (?P<msg>.*)$")


def _cargo(lines: list[str]) -> Iterator[Found]:
    n = len(lines)
    for i, line in enumerate(lines):
        if not line.startswith("error"):
            continue
        m = _CARGO.match(line)
        if not m:
            continue
        am = next((a for a in (_ARROW.match(lines[k]) for k in range(i + 1, min(n, i + 4))) if a), None)
        if am is None:
            continue
        code = m.group("code") or ""
        yield Found(
            "cargo",
            f"cargo: error{f'[{code}]' if code else ''}: {m.group('msg')} "
            f"at {am.group('path')}:{am.group('line')}",
            i,
            _block_until_blank(lines, i),
            i,
            (code, m.group("msg"), am.group("path")),
        )


_GO_BUILD = re.compile(r"^(?P<path>[^\s:]+?\.go):(?P<line>\d+):(?P<col>\d+): (?P<msg>.*)$")
_GO_FAIL = re.compile(r"^(?P<indent>\s*)--- FAIL: (?P<test>\S+)")
_GO_MSG = re.compile(r"^\s+(?P<loc>\S+\.go:\d+): (?P<msg>.*)$")
_GO_PKG = re.compile(r"^FAIL\t(?P<pkg>\S+)")
_GO_PANIC = re.compile(r"^panic: (?P<msg>.*)$")


def _go(lines: list[str]) -> Iterator[Found]:
    n = len(lines)
    found_any = False
    pkg_lines: list[tuple[int, str]] = []
    for i, line in enumerate(lines):
        m = _GO_BUILD.match(line) if ".go:" in line else None
        if m:
            found_any = True
            yield Found(
                "go",
                f"go: {clean_path(m.group('path'))}:{m.group('line')}:{m.group('col')}: {m.group('msg')}",
                i,
                i,
                i,
                (clean_path(m.group("path")), m.group("msg")),
            )
            continue
        fm = _GO_FAIL.match(line) if "--- FAIL" in line else None
        if fm:
            found_any = True
            test, indent = fm.group("test"), len(fm.group("indent"))
            msgs: list[int] = []
            k = i + 1
            while k < n and lines[k] != SENTINEL and len(lines[k]) - len(lines[k].lstrip()) > indent and (
                not lines[k].lstrip().startswith("--- ")
            ):
                msgs.append(k)
                k += 1
            start = i
            if not msgs:  # -v: the messages came between "=== RUN   Test" and "--- FAIL"
                for b in range(i - 1, max(-1, i - 200), -1):
                    if lines[b] == SENTINEL:
                        break
                    if lines[b].strip() == f"=== RUN   {test}":
                        msgs = [x for x in range(b + 1, i) if _GO_MSG.match(lines[x])]
                        start = b
                        break
            first = _GO_MSG.match(lines[msgs[0]]) if msgs else None
            msg = first.group("msg") if first else ""
            yield Found(
                "go",
                f"go: --- FAIL: {test}" + (f": {msg}" if msg else ""),
                start,
                max([i, *msgs]),
                i,
                (test, msg),
            )
            continue
        pm = _GO_PANIC.match(line) if line.startswith("panic:") else None
        if pm:
            found_any = True
            end = i
            while end + 1 < n and end - i < 60 and lines[end + 1] != SENTINEL and not (
                lines[end + 1].startswith(("FAIL", "exit status"))
            ):
                end += 1
            # the first stack frame's function ("pkg.Func(...)") keys the panic, not its addresses
            frames = (lines[k] for k in range(i + 1, end + 1) if "(" in lines[k] and lines[k][:1].isalpha())
            func = next((f.split("(")[0] for f in frames if not f.startswith("goroutine")), "")
            yield Found("go", f"go: panic: {pm.group('msg')}", i, end, i, (pm.group("msg"), func))
            continue
        if line.startswith("FAIL\t"):
            gm = _GO_PKG.match(line)
            if gm:
                pkg_lines.append((i, gm.group("pkg")))
    if not found_any:
        for i, pkg in pkg_lines:
            yield Found("go", f"go: FAIL {pkg}", i, i, i, (pkg,))


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
