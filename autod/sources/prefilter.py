"""Candidate prefilter for the build-error parsers: keyword hits -> regions of lines, on bytes.

Only the regions it returns go through the line-by-line detectors (autod.sources.detectors), so a
100 MB log of mostly noise stays fast. Internal to autod.sources.parsers, which is the public API.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

import numpy as np

SENTINEL = "\x00"  # separates regions; matches no detector and ends every block

# A log is mostly noise, so the cost that matters is the pass over every byte. CPython's
# bytes.find for a short keyword runs at ~1.5 GB/s, so eleven keywords would be eleven such
# passes. Instead each keyword is found the cheapest way the data allows: memchr on one of its
# bytes when that byte is rare in this buffer (~40 GB/s), else a numpy compare of one of its
# two-byte pairs against 16-bit words (~5 GB/s, shared by keywords with the same pair), else
# plain bytes.find. Every candidate is verified against the whole keyword, so the choice only
# changes speed, never the result.

# (keyword, lines kept before the hit, lines kept after it)
_TRIGGERS: tuple[tuple[bytes, int, int], ...] = (
    (b"Traceback (most recent call last)", 0, 400),
    (b"_____ ", 0, 400),  # pytest section header: the section follows
    (b"FAIL", 40, 40),
    (b"ERROR", 40, 40),
    (b"error", 40, 40),
    (b"Error", 40, 40),
    (b"Exception", 40, 40),
    (b"panic:", 5, 60),
    (b".go:", 10, 10),
    (b"-->", 5, 40),
)
_RUFF_TRIGGER = re.compile(rb":\d+:\d+: [A-Z]{1,4}\d{1,4}\b")
_DENSE = 1 / 400  # more hits than one per 400 bytes: parse the whole text, regions cost more
_SAMPLE = 64 << 10  # bytes whose byte and pair counts stand for the whole buffer
_LONG_KEYWORD = 12  # bytes.find uses a skipping two-way search from about here: fast enough
_SPARSE_SHIFT = 13  # "rare" is at most one expected candidate per 8 KB
_SLICE = 1 << 20  # even; fits the L2/L3 cache with its temporaries


def _find_all(buf: bytes, kw: bytes, start: int = 0) -> list[int]:
    out = []
    i = buf.find(kw, start)
    while i >= 0:
        out.append(i)
        i = buf.find(kw, i + 1)
    return out


def _via_rare_byte(buf: bytes, kw: bytes, k: int, budget: int) -> list[int] | None:
    """Offsets of `kw`, found by memchr on its byte `kw[k]`; None once that byte proves common."""
    byte = kw[k : k + 1]
    out: list[int] = []
    misses = 0
    i = buf.find(byte, k)
    while i >= 0:
        if buf.startswith(kw, i - k):
            out.append(i - k)
        else:
            misses += 1
            if misses > budget:  # the sample misled us: let the caller pick another way
                return None
        i = buf.find(byte, i + 1)
    return out


def _pair_offsets(buf: bytes, pairs: Collection[bytes]) -> dict[bytes, np.ndarray]:
    """Sorted offsets of each two-byte sequence: 16-bit word compares at both alignments (SIMD).

    One sweep in slices that stay in the CPU cache, all pairs per slice: on whole multi-MB
    arrays every compare would stream the buffer from memory again, about three times slower.
    """
    n = len(buf)
    parts: dict[bytes, list[np.ndarray]] = {p: [] for p in pairs}
    if n < 2 or not pairs:
        return {p: np.empty(0, dtype=np.intp) for p in pairs}
    codes = [(p, int.from_bytes(p, "little")) for p in pairs]
    a = np.frombuffer(buf, np.uint8)
    for lo in range(0, n - 1, _SLICE):
        s = a[lo : lo + _SLICE + 1]  # one byte more: a pair across the slice edge is seen once
        even = s[: len(s) & ~1].view("<u2")
        odd = s[1 : 1 + ((len(s) - 1) & ~1)].view("<u2")
        for pair, code in codes:
            parts[pair].append(np.flatnonzero(even == code) * 2 + lo)
            parts[pair].append(np.flatnonzero(odd == code) * 2 + (lo + 1))
    return {p: np.sort(np.concatenate(v)) for p, v in parts.items()}


class _Finder:
    """Every offset of each trigger keyword in one buffer, each found the cheapest way."""

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        n = len(buf)
        # the head and the middle, so one odd stretch at the start does not decide alone
        sample = buf if n <= 2 * _SAMPLE else buf[: _SAMPLE // 2] + buf[n // 2 : n // 2 + _SAMPLE // 2]
        self._scale = n / max(1, len(sample))
        self._sparse = max(8, n >> _SPARSE_SHIFT)
        raw = np.frombuffer(sample, np.uint8)
        self._bytes = np.bincount(raw, minlength=256)
        words = raw[: len(raw) & ~1].view("<u2")
        odd = raw[1 : 1 + ((len(raw) - 1) & ~1)].view("<u2")
        self._pairs = np.bincount(words, minlength=1 << 16) + np.bincount(odd, minlength=1 << 16)
        self._offsets: dict[bytes, np.ndarray] = {}

    def _rare_byte(self, kw: bytes) -> int | None:
        """Index of a byte of `kw` expected at most once per 8 KB here, if there is one."""
        k = min(range(len(kw)), key=lambda i: self._bytes[kw[i]])
        return k if self._bytes[kw[k]] * self._scale <= self._sparse else None

    def _rare_pair(self, kw: bytes) -> int:
        """Index of the pair of `kw` seen least in the sample (ties: the lower index)."""
        return min(range(len(kw) - 1), key=lambda i: self._pairs[int.from_bytes(kw[i : i + 2], "little")])

    def plan(self, keywords: Sequence[bytes]) -> None:
        """Compute, in one sweep, the pair offsets the keywords without a rare byte will need."""
        pairs = {b": "}  # ruff's anchor
        for kw in keywords:
            if len(kw) < _LONG_KEYWORD and self._rare_byte(kw) is None:
                j = self._rare_pair(kw)
                pairs.add(kw[j : j + 2])
        self._offsets.update(_pair_offsets(self.buf, pairs - self._offsets.keys()))

    def pair(self, pair: bytes) -> np.ndarray:
        if pair not in self._offsets:
            self._offsets.update(_pair_offsets(self.buf, [pair]))
        return self._offsets[pair]

    def keyword(self, kw: bytes) -> list[int]:
        buf = self.buf
        if len(kw) >= _LONG_KEYWORD:
            return _find_all(buf, kw)
        k = self._rare_byte(kw)
        if k is not None:
            found = _via_rare_byte(buf, kw, k, self._sparse)
            if found is not None:
                return found
        j = self._rare_pair(kw)
        offsets = self.pair(kw[j : j + 2])
        if len(offsets) > len(buf) >> 8:  # common pair: verifying each would cost more than find
            return _find_all(buf, kw)
        return [q - j for q in offsets.tolist() if q >= j and buf.startswith(kw, q - j)]

    def ruff(self) -> list[int]:
        """Ruff's concise "path:L:C: CODE": a digit, ": ", a capital letter; then the regex decides."""
        buf = self.buf
        q = self.pair(b": ")
        q = q[(q >= 1) & (q + 2 < len(buf))]
        if not len(q):
            return []
        a = np.frombuffer(buf, np.uint8)
        # uint8 arithmetic wraps, so one compare tests a range
        q = q[((a[q - 1] - 48) < 10) & ((a[q + 2] - 65) < 26)]
        out = []
        for p in q.tolist():
            line = buf.rfind(b"\n", 0, p) + 1
            if _RUFF_TRIGGER.search(buf, line, p + 12):
                out.append(p)
        return out


def _hits(buf: bytes, custom: Sequence[re.Pattern[bytes]]) -> list[tuple[int, int, int]] | None:
    """Keyword hits as (offset, lines before, lines after); None when so dense regions cost more."""
    finder = _Finder(buf)
    finder.plan([kw for kw, _, _ in _TRIGGERS])
    hits: list[tuple[int, int, int]] = []
    limit = max(64, int(len(buf) * _DENSE))
    for kw, before, after in _TRIGGERS:
        hits.extend((i, before, after) for i in finder.keyword(kw))
        if len(hits) > limit:
            return None
    hits.extend((i, 10, 10) for i in finder.ruff())
    for pattern in custom:
        for m in pattern.finditer(buf):
            hits.append((m.start(), 10, 10))
            if len(hits) > limit:
                return None
    return None if len(hits) > limit else hits


def _regions(buf: bytes, hits: list[tuple[int, int, int]], context: int) -> list[tuple[int, int]]:
    """Merged [start, end) byte ranges, each starting and ending on a line boundary."""
    spans: list[tuple[int, int]] = []
    n = len(buf)
    for pos, before, after in sorted(hits):
        start = buf.rfind(b"\n", 0, pos) + 1
        for _ in range(before + context):
            if start == 0:
                break
            start = buf.rfind(b"\n", 0, start - 1) + 1
        end = pos
        for _ in range(after + context + 1):
            nxt = buf.find(b"\n", end)
            if nxt < 0:
                end = n
                break
            end = nxt + 1
        if spans and start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], end))
        else:
            spans.append((start, end))
    return spans


def _split(buf: bytes, start: int, end: int) -> tuple[list[str], list[int]]:
    """Decoded lines of buf[start:end] and the byte offset where each starts."""
    chunk = buf[start:end]
    if chunk.endswith(b"\n"):
        chunk = chunk[:-1]
    raw = chunk.split(b"\n")
    offs = []
    at = start
    for line in raw:
        offs.append(at)
        at += len(line) + 1
    if chunk.isascii():  # the usual case: one decode, no per-line work
        return chunk.decode("ascii").split("\n"), offs
    return [line.decode("utf-8", "replace") for line in raw], offs


def candidate_lines(
    buf: bytes, custom: Sequence[re.Pattern[bytes]], context: int, since: int = 0
) -> tuple[list[str], list[int]]:
    """The lines worth parsing and, for each, the byte offset of its start (-1: sentinel).

    Regions that end before `since` were parsed by an earlier call and are left out.
    """
    hits = _hits(buf, custom)
    if hits is None:
        return _split(buf, 0, len(buf))
    lines: list[str] = []
    offs: list[int] = []
    for start, end in _regions(buf, hits, context):
        if end <= since:
            continue
        part, part_offs = _split(buf, start, end)
        if lines:
            lines.append(SENTINEL)
            offs.append(-1)
        lines.extend(part)
        offs.extend(part_offs)
    return lines, offs


def may_continue(buf: bytes, lines: int = 40) -> bool:
    """A trigger keyword in the last `lines` lines: the writer may still be completing that block."""
    start = len(buf.rstrip(b"\n"))
    floor = max(0, start - (16 << 10))
    for _ in range(lines):
        start = buf.rfind(b"\n", floor, start)
        if start < 0:
            start = floor
            break
    tail = buf[start:]
    return any(kw in tail for kw, _, _ in _TRIGGERS)
