"""Build-error parsers: turn tool output into Failures (pure functions, no I/O).

Used by the log tailer and by the check runner. A cheap keyword prefilter (autod.sources.prefilter)
finds the few regions of a large text that can hold an error, and only those regions go through the
line-by-line detectors (autod.sources.detectors), so a 100 MB log of mostly noise stays fast. This
module is the public API: it runs both, turns each block found into one Failure (summary, excerpt,
locations, fingerprint) and reports each failure once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from autod.events import fingerprint
from autod.linebreaks import lines_of
from autod.sources.detectors import DETECTORS, ESLINT_MSG, ESLINT_PATH, Found, clean_path, custom_patterns
from autod.sources.prefilter import SENTINEL, candidate_lines
from autod.sources.prefilter import may_continue as may_continue  # public here, for the log tailer

MAX_EXCERPT_LINES = 200
MAX_EXCERPT_CHARS = 16_000
MAX_SUMMARY_CHARS = 300
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_ANSI_BYTES = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass
class Failure:
    detector: str
    summary: str
    excerpt: str
    locations: list[dict[str, object]]
    fingerprint: str


# ---------------------------------------------------------------------------------------
# Locations

# Linear by construction, on any line: a path is one maximal run of path characters, taken whole
# (possessive `++`: never given back) and only where a run begins (the look-behind), so each character
# is scanned once; whether the run ends in a file name (`x.py`) is asked of its last few characters
# afterwards (`_NAMED_FILE`). Backtracking over a long run of word characters from every start
# position made the earlier patterns quadratic (a 64 KB line took most of a minute).
_PATH_CHARS = r"[\w./\\~+@-]"
_LOC_FRAME = re.compile(r'File "(?P<path>[^"<>]++)", line (?P<line>\d++)')
_LOC_TSC = re.compile(rf"(?<!{_PATH_CHARS})(?P<path>{_PATH_CHARS}++)\((?P<line>\d++),\d++\)")
_LOC_COLON = re.compile(
    r"(?:^|(?<=[\s\"'(\[<>=,]))(?P<path>(?:[A-Za-z]:[\\/])?" + _PATH_CHARS + r"++)"
    r":(?P<line>\d++)(?=[:\s),]|$)"
)
_NAMED_FILE = re.compile(r"[\w~+@-]\.[A-Za-z][\w+]{0,9}\Z")  # the run's end: a name with an extension
MAX_LOCATION_LINE = 16_384  # a location further into one line than this is not looked for
MAX_LOCATION_TEXT = 4 * 2**20  # nor one past the first 4 MB of a text


def _named_file(path: str) -> bool:
    return _NAMED_FILE.search(path[-12:]) is not None


def parse_locations(text: str) -> list[dict[str, object]]:
    """Every file:line named in the text, deduplicated, in the order named."""
    out: list[dict[str, object]] = []
    seen: set[tuple[str, int]] = set()
    eslint_path: str | None = None
    for line in lines_of(_ANSI.sub("", text[:MAX_LOCATION_TEXT])):
        line = line[:MAX_LOCATION_LINE]
        found: list[tuple[int, str, int]] = []
        for pattern in (_LOC_FRAME, _LOC_TSC, _LOC_COLON):
            for m in pattern.finditer(line):
                if pattern is _LOC_FRAME or _named_file(m.group("path")):
                    found.append((m.start(), m.group("path"), int(m.group("line"))))
        pm = ESLINT_PATH.match(line)
        if pm:
            eslint_path = pm.group("path")
        elif eslint_path is not None:
            mm = ESLINT_MSG.match(line)
            if mm:
                found.append((0, eslint_path, int(mm.group("line"))))
            elif line.strip():
                eslint_path = None
        for _, path, lineno in sorted(found, key=lambda t: t[0]):
            item = (clean_path(path), lineno)
            if item not in seen:
                seen.add(item)
                out.append({"path": item[0], "line": item[1]})
    return out


# ---------------------------------------------------------------------------------------
# Assembly


def _excerpt(lines: list[str], f: Found, context: int) -> str:
    if f.excerpt is not None:
        block = f.excerpt.split("\n")
        lo = f.start
        before: list[str] = []
        while lo > 0 and len(before) < context and lines[lo - 1] != SENTINEL:
            lo -= 1
            before.insert(0, lines[lo])
        body = [*before, *block]
    else:
        lo = f.start
        while lo > 0 and f.start - lo < context and lines[lo - 1] != SENTINEL:
            lo -= 1
        hi = f.end
        while hi + 1 < len(lines) and hi - f.end < context and lines[hi + 1] != SENTINEL:
            hi += 1
        body = lines[lo : hi + 1]
    if len(body) > MAX_EXCERPT_LINES:
        half = MAX_EXCERPT_LINES // 2
        body = [*body[:half], "... [lines cut] ...", *body[-half:]]
    text = "\n".join(body)
    return text if len(text) <= MAX_EXCERPT_CHARS else text[:MAX_EXCERPT_CHARS] + "\n... [cut]"


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_SUMMARY_CHARS else line[: MAX_SUMMARY_CHARS - 1] + "…"


def _compile_bytes(patterns: Sequence[str]) -> list[re.Pattern[bytes]]:
    # the prefilter runs on raw bytes; a str pattern's UTF-8 form matches the same literal text
    return [re.compile(p.encode("utf-8")) for p in patterns]


def strip_ansi(data: bytes) -> bytes:
    """`data` without terminal colour codes (a no-op, at memchr speed, when there are none)."""
    return _ANSI_BYTES.sub(b"", data) if b"\x1b" in data else data


def scan_bytes(
    buf: bytes, *, since: int = 0, extra_patterns: Sequence[str] = (), context_lines: int = 5
) -> list[tuple[Failure, int]]:
    """Failures in `buf` (colour codes already stripped), each with the byte offset of the line
    that completed it. Failures completed before `since` may be left out: the log tailer passes
    the length of the history it has already scanned.
    """
    custom = [re.compile(p) for p in extra_patterns]
    lines, offs = candidate_lines(buf, _compile_bytes(extra_patterns), context_lines, since)
    if not lines:
        return []
    return [(f, offs[anchor]) for f, anchor in _assemble(lines, custom, context_lines)]


def scan_failures(
    text: str, *, extra_patterns: Sequence[str] = (), context_lines: int = 5
) -> list[tuple[Failure, int]]:
    """Failures in `text`, each with the line index (in `text`) of the line that completed it.

    The log tailer uses the index to report a failure once, when its last line arrives.
    """
    text = _ANSI.sub("", text) if "\x1b" in text else text
    buf = text.encode("utf-8", "surrogatepass")
    found = scan_bytes(buf, extra_patterns=extra_patterns, context_lines=context_lines)
    return list(zip([f for f, _ in found], _line_numbers(buf, [off for _, off in found]), strict=True))


def _line_numbers(buf: bytes, offsets: list[int]) -> list[int]:
    """The line index of each byte offset, counting each stretch of the buffer once."""
    out: dict[int, int] = {}
    at = line = 0
    for off in sorted(set(offsets)):
        line += buf.count(b"\n", at, off)
        at = off
        out[off] = line
    return [out[off] for off in offsets]


def _assemble(lines: list[str], custom: Sequence[re.Pattern[str]], context: int) -> list[tuple[Failure, int]]:
    """Run every detector over the reduced lines; each failure once, with its anchor line index."""
    accepted: list[Found] = []
    claimed: list[tuple[int, int]] = []
    candidates: list[list[Found]] = [list(d(lines)) for d in DETECTORS]
    candidates.append(list(custom_patterns(lines, custom)))
    for group in candidates:
        new_claims: list[tuple[int, int]] = []
        for f in group:
            if any(a <= f.anchor <= b for a, b in claimed):
                continue  # already part of a block a more specific detector reported
            accepted.append(f)
            new_claims.extend(f.spans or [(f.start, f.end)])
        claimed.extend(new_claims)
    accepted.sort(key=lambda f: (f.start, f.anchor))
    out: list[tuple[Failure, int]] = []
    seen: set[str] = set()
    for f in accepted:
        fp = fingerprint(f.detector, *f.key)
        if fp in seen:
            continue
        seen.add(fp)
        block_lines = [lines[a : b + 1] for a, b in (f.spans or [(f.start, f.end)])]
        block = "\n".join("\n".join(b) for b in sorted(block_lines, key=len, reverse=True))
        if f.excerpt is not None:
            block = f.excerpt
        locations = parse_locations(block)
        if not locations and f.fallback_path:
            locations = [{"path": clean_path(f.fallback_path), "line": None}]
        failure = Failure(f.detector, _one_line(f.summary), _excerpt(lines, f, context), locations, fp)
        out.append((failure, f.anchor))
    return out


def parse_failures(
    text: str, *, extra_patterns: Sequence[str] = (), context_lines: int = 5
) -> list[Failure]:
    """Every distinct failure in `text`, in order; the same failure printed twice counts once."""
    return [f for f, _ in scan_failures(text, extra_patterns=extra_patterns, context_lines=context_lines)]
