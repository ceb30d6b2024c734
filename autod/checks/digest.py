"""A failed pytest run's output as a prompt should read it: what each failure did, not every line shown.

pytest's default report prints, for every failing test, the whole source of every function on the
failing path down to the line that raised: a 234-line method is printed whole, and a parametrized
test prints its whole parameter table before its one failing line. The same frames recur once per
failing test (one bug, eleven failing tests, eleven copies), and the warnings summary can fill the
tail a fixed-size excerpt keeps. On a CPU a prompt's tokens cost time (the benches' 1.5B model reads
60-200 prompt tokens a second on two cores), and the failing line, its error and the values involved
are what a fix needs.

The digest keeps, in order:

- each failure's section (`___ test_name ___`), each frame of it with its arguments
  (`db = <TinyDB ...>`), its source listing whole up to 30 lines (a longer one as the definition's
  first line and the six lines before the line that failed, `>`), that line, its `E` lines, its
  location (`tests/test_x.py:12: AssertionError`) and short-style frames (`path:N: in f` and their
  line); caret marks and separators out;
- a frame already shown (the same text, memory addresses aside) as its location and `(as above)`;
  a failure whose every frame was already shown as one line naming the first that showed it;
- the short summary's `FAILED`/`ERROR`/`SUBFAIL`/`SUBFAILED(...)` lines and the final counts (with or
  without `-q`'s missing banners), which other readers use (autod.checks.outcome);

and drops the session header, the warnings summary and other sections. What differs between two
runs of the same failure is taken out (the duration on the counts line, an object's address in its
repr: `<Query object at 0x…>`, the number of pytest's temporary directory), so the same failure
gives the same prompt: a server that keeps the prompt it last read reads only what changed, and a
seeded draw is asked the same question again.

Four failures are shown (MAX_SHOWN), in report order: the first raised at each place (its last
location line) before more of the same, each whole, until the cap; the summary has its own share.
Output that is not pytest's report (no
`FAILURES`/`ERRORS` banner) is returned as its tail, as before.

Every check's output is untrusted: this reads it line by line, once, with anchored patterns of no
nested repetition, and caps what it keeps of any one line, frame and section, so garbage, a
megabyte-long line or a million short ones cost linear time and never grow the result past `cap`.
"""

from __future__ import annotations

import re

from autod.linebreaks import lines_of

__all__ = ["digest"]

# `==== FAILURES ====`, `==== 3 failed in 0.1s ====`: the name runs to the line's last character that
# is not `=` (the lazy `(.*?) ?={3,}$` it replaces tried the closing run from every `=` of a long run:
# cubic, 4 s for a 20K line); a line of `=` alone is a banner with no name
_BANNER = re.compile(r"^={3,}+ ?+((?:.*[^=\n])?) ?={3,}+$|^={6,}+$")
_HEADER = re.compile(r"^_{3,} (.{1,300}?) _{3,}$")  # `____ test_add_int[memory] ____`
_SEPARATOR = re.compile(r"^(?:_ ){5,}_?\s*$")  # between the frames of one failure
_CAPTURED = re.compile(r"^-{3,} (?:Captured|captured) .{0,80}-{3,}$")
_LOCATION = re.compile(r"^[^\s>].{0,500}?:\d+: ")  # `tests/x.py:12: AssertionError`, `x.py:3: in f`
_CARETS = re.compile(r"^\s*[\^~]+\s*$")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{4,16}")
# what differs from one run of the same failure to the next: an object's address in its repr, the
# number of pytest's temporary directory (`/tmp/pytest-of-ci/pytest-41/test_x0`), and the run's
# duration on the counts line (`in 0.52s`, `in 72.13s (0:01:12)`)
_OBJECT_AT = re.compile(r" at 0x[0-9a-fA-F]{6,16}(?=>|\.\.\.)")  # `...`: cut in a summary line
_BASETEMP = re.compile(r"(pytest-of-[^/\\\s]{1,64}[/\\]pytest-)\d{1,9}")
_DURATION = re.compile(r" in \d{1,9}(?:\.\d{1,6})?s(?: \(\d{1,4}:\d\d:\d\d\))?")
_COUNTS = re.compile(r"\b\d+ (?:failed|passed|errors?|skipped)\b")
# `-q` ends with the counts and no banner around them: `1 failed, 108 passed in 0.52s`
_QUIET_COUNTS = re.compile(r"^\d+ (?:failed|passed|errors?|skipped|deselected|xfailed|xpassed)\b")
# SUBFAIL: a failed subtest, `SUBFAIL path::test` (pytest-subtests) or `SUBFAILED(k=v) path::test` (pytest 9)
_SUMMARY_LINES = ("FAILED ", "ERROR ", "SUBFAIL")

LINE_CHARS = 300  # of any one line kept
WHOLE_LISTING = 30  # source lines of a frame shown whole up to this many; past it, the lines below
CONTEXT = 6  # source lines kept before a failing (`>`) line of a longer listing
MAX_E = 30  # `E` lines kept of one frame
MAX_ARGS = 8  # argument lines kept at a frame's top
MAX_CAPTURED = 8  # lines kept of one captured-output section
GAP = "    [...]"  # lines left out (not `...`: a progress-dots filter would take that for noise)
MAX_SHOWN = 4  # failures shown (the rest by name in the summary)
SUMMARY_SHARE = 2  # the summary lines may take up to cap // SUMMARY_SHARE (test ids: autod.localize.frames)
_BLOCKS = {"FAILURES", "ERRORS"}


def digest(output: str, cap: int) -> str:
    """`output` shortened to at most `cap` characters: pytest's report as its failures' essentials,
    any other output as its last `cap` characters."""
    lines = lines_of(output)
    if not any(_is_block_banner(ln) for ln in lines):
        return _tail(output, cap)
    blocks, summary = _sections(lines)
    kept_summary = _fit(summary, max(0, cap // SUMMARY_SHARE))
    room = cap - len(kept_summary) - 1
    seen: dict[str, str] = {}  # a frame's text (addresses out) -> the failure that showed it first
    out: list[str] = []
    used = 60  # the note on what is left out
    for i in _pick(blocks):
        text = _block(*blocks[i], seen)
        if used + len(text) + 1 > room:
            if not out:  # the first failure is always shown, cut to the room there is
                out.append(text[: max(0, room - used)])
            break
        out.append(text)
        used += len(text) + 1
    if len(blocks) > len(out):
        out.append(f"[... {len(blocks) - len(out)} more failure section(s) not shown ...]")
    result = "\n".join([*out, kept_summary] if kept_summary else out)
    return _tail(result, cap)


def _steady(line: str) -> str:
    """`line` without what a rerun of the same failure would print otherwise: addresses, tmp numbers,
    and a counts line's duration (wherever it is: an inner pytest run's output is captured output)."""
    if _COUNTS.search(line):
        line = _DURATION.sub("", line)
    return _BASETEMP.sub(r"\1N", _OBJECT_AT.sub(" at 0x…", line))


def _tail(text: str, cap: int) -> str:
    """The last `cap` characters (none for a cap of 0: `text[-0:]` would be all of it)."""
    return text[len(text) - cap:] if len(text) > cap else text


def _pick(blocks: list[tuple[str, list[str]]]) -> list[int]:
    """The failures to show, in report order: the first of each place a failure was raised (its last
    location line), then the next ones, MAX_SHOWN in all."""
    kinds: dict[str, int] = {}
    for i, (_, body) in enumerate(blocks):
        where = next((ln for ln in reversed(body) if _LOCATION.match(ln)), "")
        kinds.setdefault(where, i)
    picked = set(list(kinds.values())[:MAX_SHOWN])
    for i in range(len(blocks)):
        if len(picked) >= MAX_SHOWN:
            break
        picked.add(i)
    return sorted(picked)


def _banner_name(line: str) -> str | None:
    """The name of a `=== name ===` banner line, stripped; None for another line."""
    m = _BANNER.match(line) if line.startswith("===") else None
    return (m.group(1) or "").strip() if m else None


def _is_block_banner(line: str) -> bool:
    return _banner_name(line) in _BLOCKS


def _sections(lines: list[str]) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """(each failure's header and lines, the summary lines) of a pytest report.

    The code under test can print a banner of its own (shown in the failure's captured output), so a
    section is closed only by the last banner of its name: pytest prints each of its closing sections
    once, after every failure."""
    last: dict[str, int] = {}
    names: dict[int, str] = {}
    for i, line in enumerate(lines):
        name = _banner_name(line)
        if name is not None:
            names[i] = name
            last[name] = i
    blocks: list[tuple[str, list[str]]] = []
    summary: list[str] = []
    where = ""  # the section a line is in: FAILURES, ERRORS, summary, or another (dropped)
    for i, line in enumerate(lines):
        name = names.get(i)
        if name is not None and (name in _BLOCKS or last[name] == i or where not in _BLOCKS):
            if name in _BLOCKS or name == "short test summary info":
                where = name
            elif _COUNTS.search(name):  # the closing counts line
                summary.append(_steady(line[:LINE_CHARS]))
                where = ""
            else:
                where = ""
            continue
        if where in _BLOCKS:
            h = _HEADER.match(line) if line.startswith("___") else None
            if h:
                blocks.append((h.group(1), []))
            elif blocks:
                blocks[-1][1].append(line)
        elif where == "short test summary info" and (line.startswith(_SUMMARY_LINES)
                                                       or _QUIET_COUNTS.match(line)):
            summary.append(_steady(line[:LINE_CHARS]))
    return blocks, summary


def _fit(lines: list[str], room: int) -> str:
    """As many of `lines` as fit in `room` characters, from the first, with a count of the rest."""
    out: list[str] = []
    used = 0
    for i, line in enumerate(lines):
        if used + len(line) + 1 > room:
            if out:
                out.append(f"[... {len(lines) - i} more ...]")
            break
        out.append(line)
        used += len(line) + 1
    return "\n".join(out)


def _block(header: str, body: list[str], seen: dict[str, str]) -> str:
    """One failure's section, its frames shortened, the ones already shown named instead."""
    frames: list[list[str]] = [[]]
    for line in body:
        if _SEPARATOR.match(line):
            frames.append([])
        else:
            frames[-1].append(line)
    shown: list[str] = []
    fresh = False
    first_seen = None
    for frame in frames:
        args, rest = _frame(frame)
        if not rest:
            shown.extend(args)
            continue
        key = _ADDRESS.sub("0x", "\n".join(rest))  # the same frame with other arguments is still the same
        if key in seen:
            first_seen = first_seen or seen[key]
            where = next((ln for ln in reversed(rest) if _LOCATION.match(ln)), rest[-1])
            shown.extend([*args, where + "  (as above)"])
        else:
            seen[key] = header
            fresh = True
            shown.extend([*args, *rest])
    title = f"___ {header[:LINE_CHARS]} ___"
    if not fresh and first_seen is not None:
        args = [ln for ln in shown if not ln.endswith("  (as above)")]
        return "\n".join([title, *args[:MAX_ARGS], f"(the same failure as `{first_seen[:LINE_CHARS]}`)"])
    return "\n".join([title, *shown])


def _frame(lines: list[str]) -> tuple[list[str], list[str]]:
    """A frame's essentials as (its arguments, the rest): the definition's first line, the lines
    before `>` and it, the `E` lines, locations and short-style frames; a run left out as `GAP`."""
    lines = list(lines)  # captured output is marked below: the caller's list stays as it was
    keep = [False] * len(lines)
    is_arg = [False] * len(lines)
    errors = 0
    args = 0
    in_listing = False
    defined = False
    for i, line in enumerate(lines):
        if _CARETS.match(line) or not line.strip():
            continue
        if line.startswith(">"):
            keep[i] = True
            in_listing = True
            back, j = 0, i - 1
            while j >= 0 and back < CONTEXT:
                if lines[j].strip() and not _CARETS.match(lines[j]) and lines[j].startswith("    "):
                    keep[j] = True
                    back += 1
                j -= 1
        elif line.startswith("E ") or line == "E":
            errors += 1
            keep[i] = errors <= MAX_E
        elif _LOCATION.match(line):
            keep[i] = True
            # a short-style frame (`path:N: in f`) shows its line on the next one
            if i + 1 < len(lines) and lines[i + 1].startswith("    "):
                keep[i + 1] = True
        elif line.startswith("    "):
            stripped = line.lstrip()
            if not defined and stripped.startswith(("def ", "async def ")):
                keep[i] = defined = True
            elif i > 0 and ((keep[i - 1] and lines[i - 1].startswith(">")) or _continues(lines, i)):
                keep[i] = True  # the failing statement's continuation lines
            in_listing = True
        elif not in_listing and not line.startswith(" ") and args < MAX_ARGS:
            keep[i] = is_arg[i] = True  # an argument (`db = <TinyDB ...>`), or a message
            args += 1
        elif _CAPTURED.match(line):
            keep[i] = True
            captured = range(i + 1, min(len(lines), i + 1 + MAX_CAPTURED))
            for k in captured:
                keep[k] = True
                lines[k] = "| " + lines[k]  # printed by the code: never read as a report line
            break  # the captured sections end a failure's section
    # a short listing is kept whole: a small model reads a test's setup, a helper's few lines, from it
    end = next((i for i, ln in enumerate(lines) if ln.startswith("E ") or _LOCATION.match(ln)), len(lines))
    listing = [i for i in range(end) if lines[i].startswith(("    ", ">")) and lines[i].strip()
               and not _CARETS.match(lines[i])]
    if len(listing) <= WHOLE_LISTING:
        for i in listing:
            keep[i] = True
    args_out: list[str] = []
    out: list[str] = []
    gap = False
    for line, k, a in zip(lines, keep, is_arg, strict=True):
        if k:
            short = _steady(line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + "…")
            if a:
                args_out.append(short)
                continue
            if gap:
                out.append(GAP)
            out.append(short)
            gap = False
        elif line.strip() and not _CARETS.match(line):
            gap = True
    return args_out, out


def _continues(lines: list[str], i: int) -> bool:
    """Whether line i continues a failing (`>`) statement: only source lines lie between them."""
    j = i - 1
    while j >= 0 and j >= i - 6:
        if lines[j].startswith(">"):
            return True
        if not lines[j].startswith("    ") or _CARETS.match(lines[j]):
            return False
        j -= 1
    return False
