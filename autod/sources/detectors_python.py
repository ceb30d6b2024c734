"""Build-error detectors for Python's tools: tracebacks (chained, prefixed by a log's own format), pytest
(its failure sections and short summary), mypy and ruff. Pure functions over the reduced lines."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from autod.sources.found import ARROW, Found, block_until_blank, clean_path
from autod.sources.prefilter import SENTINEL

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


# The message is the shortest text the code leaves: one character, or ending in a non-blank (the code's
# blanks start after it), or else all of the line. Tried only there, the tail is not scanned again from
# every blank of a long run (quadratic: 0.8 s for 20K characters). The same matches as `.+?`.
_MYPY = re.compile(
    r"^(?P<path>[^\s:][^:]*\.pyi?):(?P<line>\d++):(?:\d++:)? error: (?P<msg>.(?:.*?\S)??|.++)"
    r"(?:\s+\[(?P<code>[\w-]++)\])?$"
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
            am = ARROW.match(lines[i + 1]) if m else None
            if not m or not am:
                continue
            path, ln, col = am.group("path"), am.group("line"), am.group("col")
            end = block_until_blank(lines, i)
        yield Found(
            "ruff",
            f"ruff: {clean_path(path)}:{ln}:{col}: {m.group('code')} {m.group('msg')}",
            i,
            end,
            i,
            (path, m.group("code"), m.group("msg")),
        )
