"""Marks a small model writes into its code blocks that are not code: read back as what they mean.

The line ranges of autod's own outline (`def get(self, key):  [135-139]  # doc`): a model copying a
signature from the outline copies them too; they are taken off a `def`/`class` line.

A model trained on commits often answers "rewrite this definition" with diff marks, in two shapes:

- a unified diff (`--- a/x.py`, `+++ b/x.py`, `@@ -3,7 +3,8 @@`, each line led by ` `, `-` or `+`):
  each hunk is a search/replace, the search its context and `-` lines, the replace its context and
  `+` lines (Aider's udiff format reads hunks the same way);
- the whole definition with its added lines led by `+` and its removed lines by `-`, the other lines
  bare: the definition with the `+` taken off and the `-` lines left out.

Each is read only when the block does not parse as Python as it stands, so code that merely has a
line starting with `-` or `+` (a continuation line, a unary minus) is never touched. What comes out is
an ordinary edit: the act rules, the judges and the checks decide on it as on any other.
"""

from __future__ import annotations

import re

from autod.act.definition import parse_new_source

__all__ = ["diff_path", "hunks", "parses", "unmark"]

# autod.localize.render's outline row: `def f(x):  [12-30]  # first docstring line`
_OUTLINE_MARK = re.compile(
    r"^([ \t]*(?:async[ \t]+def|def|class)[ \t].*?:)[ \t]+\[\d+-\d+\](?:[ \t]+#.*)?$", re.MULTILINE
)

_META = re.compile(r"^(?:diff --git |index [0-9a-f]|--- |\+\+\+ |@@ .*@@|@@@? )")
_HUNK = re.compile(r"^@@ .*@@")
_PLUS_PATH = re.compile(r"^\+\+\+ (?:b/)?(\S+)", re.MULTILINE)


def parses(code: str) -> bool:
    """Whether the act rules can parse the block as new source (autod.act.definition.parse_new_source)."""
    try:
        parse_new_source(code)
    except (SyntaxError, ValueError):
        return False
    return True


def hunks(body: str) -> list[tuple[str, str]] | None:
    """The (search, replace) pairs of a unified diff, or None when the block is not one: it must have a
    `@@` hunk line or a `---`/`+++` pair, and every other line a ` `, `-` or `+` lead (a blank line is
    a blank context line)."""
    lines = body.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    has_hunk = any(_HUNK.match(ln) for ln in lines)
    has_files = any(ln.startswith("--- ") for ln in lines) and any(ln.startswith("+++ ") for ln in lines)
    if not (has_hunk or has_files):
        return None
    out: list[tuple[str, str]] = []
    search: list[str] = []
    replace: list[str] = []
    changed = False

    def close() -> None:
        nonlocal search, replace, changed
        if changed:
            out.append(("\n".join(search), "\n".join(replace)))
        search, replace, changed = [], [], False

    for ln in lines:
        if _META.match(ln):
            if _HUNK.match(ln):
                close()
            continue
        if ln.startswith("\\"):  # "\ No newline at end of file"
            continue
        lead, rest = ln[:1], ln[1:]
        if lead == "-":
            search.append(rest)
            changed = True
        elif lead == "+":
            replace.append(rest)
            changed = True
        elif lead == " " or not ln:
            search.append(rest)
            replace.append(rest)
        else:
            return None  # a line with no lead: not a diff autod can read
    close()
    return [(s, r) for s, r in out if s.strip()] or None


def diff_path(body: str) -> str | None:
    """The path a unified diff names on its `+++ b/...` line."""
    m = _PLUS_PATH.search(body)
    path = m.group(1) if m else None
    return None if path in (None, "/dev/null") else path


def unmark(body: str) -> str:
    """The block without the outline's line ranges, or a definition written with diff marks (`+` before
    added lines, `-` before removed ones) without them; the body unchanged when it parses already, has
    no marks, or does not parse either way."""
    if parses(body):
        return body
    unranged = _OUTLINE_MARK.sub(r"\1", body)
    if unranged != body and parses(unranged):
        return unranged
    lines = body.split("\n")
    if not any(ln[:1] in "+-" and ln[:1] for ln in lines):
        return body
    kept = [ln for ln in lines if not ln.startswith("-") and not _META.match(ln)]
    for lead in ("", " "):  # `+` before the indentation, or in place of its first space
        candidate = "\n".join(lead + ln[1:] if ln.startswith("+") else ln for ln in kept)
        if parses(candidate):
            return candidate
    return body
