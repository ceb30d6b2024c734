"""Find a plan's `search` text in a file, exactly once, tolerant of the ways a model miscopies it.

The exact text is tried first (it stops at the second match: a 2,000-character search matching a
million times costs two `str.find`s, not a million). When it is absent, a weak model has usually
copied it with the wrong whitespace, from a numbered listing (`   12  code`, `12: code`, a pytest
`>` marker) or from a CRLF file as LF. Whole lines are then matched, in this order:
1. ignoring trailing whitespace and the line ending;
2. also ignoring indentation, when the file's lines are indented by one uniform shift of the
   search's (the replace is re-indented by the same shift);
3. both again with the line-number gutter stripped, when every line of the search has one and the
   numbers run consecutively.
Each step must match exactly once; two matches refuse the plan like an ambiguous exact search. When
nothing matches, the refusal names the closest line actually in the file, so the re-plan can copy it.
Matching works on one joined string with `str.find`, so its cost is linear in the file.
"""

from __future__ import annotations

import bisect
import difflib
import json
import re
import threading
from dataclasses import dataclass

from autod.errors import PlanRejected

__all__ = ["Stopped", "apply_edit", "find_unique"]

# "   12  code", "  12> code" (autod's own listings), "12\tcode" (cat -n), "12: code", "12| code".
_GUTTER = re.compile(r"^[ \t]*(\d{1,7})(?:[ >] |\t|[:|] ?|[ \t]*$)")
_PYTEST_MARK = re.compile(r"^>(?=[ \t])")
_CLOSEST_SCAN_LINES = 20_000
_CLOSEST_CHARS = 200
_SHOW_CHARS = 120


class Stopped(Exception):
    """The daemon is stopping: CPU work in a worker thread ends at the next check."""


@dataclass(frozen=True)
class _Match:
    start: int  # first matched line (index into the file's lines)
    stop: int  # one past the last matched line
    shift: str  # whitespace to add (grow=True) or remove from each replace line
    grow: bool


def apply_edit(rel: str, text: str, search: str, replace: str, stop: threading.Event | None = None) -> str:
    """`text` with the one occurrence of `search` replaced; PlanRejected naming the path otherwise."""
    first = text.find(search)
    if first >= 0:
        second = text.find(search, first + 1)
        if second >= 0:
            a, b = _line_of(text, first), _line_of(text, second)
            where = f"twice on line {a}" if a == b else f"at lines {a} and {b}"
            raise PlanRejected(
                f"search text occurs more than once in {rel} ({where}); "
                "include more of the surrounding lines so it matches once"
            )
        return text[:first] + replace + text[first + len(search) :]
    crlf_search, crlf_replace = _crlf(text, search, replace)
    if crlf_search is not None and (at := find_unique(text, crlf_search)) is not None:
        return text[:at] + crlf_replace + text[at + len(crlf_search) :]
    _check(stop)
    return _tolerant(rel, text, search, replace, stop)


def find_unique(text: str, search: str) -> int | None:
    """Offset of the one exact occurrence of `search`, None when absent or repeated (two finds at most)."""
    first = text.find(search)
    if first < 0 or text.find(search, first + 1) >= 0:
        return None
    return first


def _crlf(text: str, search: str, replace: str) -> tuple[str | None, str]:
    """In a file that is CRLF throughout, LF-only search/replace text is taken as CRLF (endings kept)."""
    crlf = text.count("\r\n")
    if crlf == 0 or crlf != text.count("\n") or "\n" not in search or "\r\n" in search:
        return None, replace
    return search.replace("\n", "\r\n"), replace.replace("\r\n", "\n").replace("\n", "\r\n")


# -- line matching -------------------------------------------------------------------------


def _tolerant(rel: str, text: str, search: str, replace: str, stop: threading.Event | None) -> str:
    lines = text.split("\n")
    s_lines = _lines_of(search)
    r_lines = _lines_of(replace) if replace else []
    s_lines, r_lines = _trim_blank_edges(s_lines, r_lines)
    if not s_lines:
        raise PlanRejected(f"search text not found in {rel} (it is only whitespace)")
    variants = [(s_lines, r_lines)]
    gutterless = _strip_gutter(s_lines)
    if gutterless is not None:
        replace_gutterless = _strip_gutter(r_lines, consecutive=False) if r_lines else None
        variants.append((gutterless, replace_gutterless if replace_gutterless is not None else r_lines))
    trailing = [line.rstrip() for line in lines]
    stripped: list[str] | None = None
    for s, r in variants:
        _check(stop)
        match = _unique(rel, trailing, [x.rstrip() for x in s], lines, s, indent=False)
        if match is None:
            if stripped is None:
                stripped = [line.strip() for line in trailing]
            _check(stop)
            match = _unique(rel, stripped, [x.strip() for x in s], lines, s, indent=True)
        if match is not None:
            return _splice(lines, match, r)
    _check(stop)
    raise PlanRejected(f"search text not found in {rel}, even ignoring whitespace{_closest(lines, s_lines)}")


def _unique(
    rel: str, norm: list[str], needle: list[str], lines: list[str], s_lines: list[str], *, indent: bool
) -> _Match | None:
    """The one place where `needle` equals consecutive normalised lines (and, with indent, by one shift)."""
    hay = "\n" + "\n".join(norm) + "\n"
    pin = "\n" + "\n".join(needle) + "\n"
    starts = _line_starts(norm)
    found: list[_Match] = []
    pos = hay.find(pin)
    tries = 0
    while pos >= 0 and len(found) < 2:
        tries += 1
        if tries > 1000:  # a pathological file of near-identical blocks: refuse rather than spin
            raise PlanRejected(f"search text matches too many places in {rel} once whitespace is ignored")
        start = bisect.bisect_right(starts, pos) - 1
        stop = start + len(needle)
        match = _shifted(lines[start:stop], s_lines, start) if indent else _Match(start, stop, "", True)
        if match is not None:
            found.append(match)
        pos = hay.find(pin, pos + 1)
    if len(found) > 1:
        raise PlanRejected(
            f"search text matches more than once in {rel} once whitespace is ignored (lines "
            f"{found[0].start + 1} and {found[1].start + 1}); include more of the surrounding lines"
        )
    return found[0] if found else None


def _line_starts(norm: list[str]) -> list[int]:
    """Offset in "\\n" + "\\n".join(norm) of the "\\n" that precedes each line."""
    starts, pos = [], 0
    for line in norm:
        starts.append(pos)
        pos += len(line) + 1
    return starts


def _shifted(file_lines: list[str], s_lines: list[str], start: int) -> _Match | None:
    """A match whose indentation differs from the search's by one uniform shift, else None."""
    shift: tuple[str, bool] | None = None
    for f, s in zip(file_lines, s_lines, strict=True):
        if not s.strip():
            continue
        f_ind, s_ind = _indent(f), _indent(s)
        if f_ind.endswith(s_ind):
            this = (f_ind[: len(f_ind) - len(s_ind)], True)
        elif s_ind.endswith(f_ind):
            this = (s_ind[: len(s_ind) - len(f_ind)], False)
        else:
            return None  # tabs against spaces, or a different nesting: not a shift
        if this[0] == "":
            this = ("", True)
        if shift is None:
            shift = this
        elif shift != this:
            return None
    shift = shift or ("", True)
    return _Match(start, start + len(s_lines), shift[0], shift[1])


def _splice(lines: list[str], m: _Match, r_lines: list[str]) -> str:
    matched = lines[m.start : m.stop]
    crlf = all(line.endswith("\r") for line in matched)
    new: list[str] = []
    for r in r_lines:
        r = r.rstrip("\r")
        if r.strip() and m.shift:
            # the same shift as between the search and the file; never below column 0
            r = m.shift + r if m.grow else r[min(len(_indent(r)), len(m.shift)) :]
        new.append(r + "\r" if crlf else r)
    return "\n".join(lines[: m.start] + new + lines[m.stop :])


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _lines_of(text: str) -> list[str]:
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()  # a final newline ends the last line; it is not a line of its own
    return lines


def _trim_blank_edges(s_lines: list[str], r_lines: list[str]) -> tuple[list[str], list[str]]:
    """Leading/trailing blank lines of the search are not matched; the replace loses as many."""
    lead = 0
    while lead < len(s_lines) and not s_lines[lead].strip():
        lead += 1
    trail = 0
    while trail < len(s_lines) - lead and not s_lines[len(s_lines) - 1 - trail].strip():
        trail += 1
    s = s_lines[lead : len(s_lines) - trail]
    r = list(r_lines)
    for _ in range(lead):
        if r and not r[0].strip():
            r.pop(0)
    for _ in range(trail):
        if r and not r[-1].strip():
            r.pop()
    return s, r


def _strip_gutter(lines: list[str], *, consecutive: bool = True) -> list[str] | None:
    """The lines without a line-number gutter (or pytest's `>` marker), when every line has one."""
    out: list[str] = []
    numbered = marked = 0
    first: int | None = None
    for i, line in enumerate(lines):
        m = _GUTTER.match(line)
        if m is not None:
            n = int(m.group(1))
            if first is None:
                first = n - i
            elif consecutive and n != first + i:
                return None
            numbered += 1
            out.append(line[m.end() :])
        elif _PYTEST_MARK.match(line):
            marked += 1
            out.append(" " + line[1:])
        elif not line.strip() and numbered:
            out.append("")
        elif numbered:
            return None  # a line without a number in a numbered listing: not a gutter after all
        else:
            out.append(line)
    if numbered and numbered + marked < sum(1 for x in lines if x.strip()):
        return None
    return out if numbered or marked else None


def _closest(lines: list[str], s_lines: list[str]) -> str:
    """A short hint: the file line most like the search's first line (or nothing when none is close)."""
    target = next((s.strip() for s in (_strip_gutter(s_lines) or s_lines) if s.strip()), "")[:_CLOSEST_CHARS]
    if not target:
        return ""
    seen: dict[str, int] = {}
    for n, line in enumerate(lines[:_CLOSEST_SCAN_LINES], 1):
        key = line.strip()[:_CLOSEST_CHARS]
        if key and key not in seen:
            seen[key] = n
    best = difflib.get_close_matches(target, list(seen), n=1, cutoff=0.6)
    if not best:
        return "; no line of the file is close to its first line, so copy the text from the source shown"
    n = seen[best[0]]
    return f"; the closest line in the file is {n}: {json.dumps(lines[n - 1].rstrip()[:_SHOW_CHARS])}"


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _check(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise Stopped()
