"""Build-error detectors for other languages' tools: gcc/clang and ld, tsc, eslint, cargo and go. Pure
functions over the reduced lines."""

from __future__ import annotations

import re
from collections.abc import Iterator

from autod.sources.found import ARROW, ESLINT_MSG, ESLINT_PATH, Found, block_until_blank, clean_path
from autod.sources.prefilter import SENTINEL

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
        am = next((a for a in (ARROW.match(lines[k]) for k in range(i + 1, min(n, i + 4))) if a), None)
        if am is None:
            continue
        code = m.group("code") or ""
        yield Found(
            "cargo",
            f"cargo: error{f'[{code}]' if code else ''}: {m.group('msg')} "
            f"at {am.group('path')}:{am.group('line')}",
            i,
            block_until_blank(lines, i),
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
