"""autod's one notion of a line: Python's own. A line ends at `\\r\\n`, `\\r` or `\\n`, nowhere else.

`str.splitlines()` also ends a line at a form feed, a vertical tab, `\\x1c`-`\\x1e`, NEL (`\\x85`),
U+2028 and U+2029; Python's tokenizer does not, so every line number `ast` gives counts different
lines in a file that holds one of them (GNU-style `^L` page breaks between sections, a U+2028 inside a
string). A whole-definition edit placed by `ast` line numbers over `splitlines()` lines landed lines
off: it deleted a comment, left the old body as dead code, and was kept `fixed` (lab notebook,
"Probing the host side again"). So nothing in autod splits text with `str.splitlines`
(`tests/unit/test_linebreaks.py` reads every module's tree for a call to it): source, replies, check
output and diffs are all split here, by the tokenizer's rule, in one linear pass.
"""

from __future__ import annotations

import re

__all__ = ["byte_lines", "lines_of", "split_lines"]

_BREAK = re.compile(r"\r\n|\r|\n")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def lines_of(text: str, keepends: bool = False) -> list[str]:
    """`text.splitlines(keepends)` with Python's line breaks only: no empty last line for a text that
    ends with a break, `[]` for `""`."""
    if keepends:
        return _LINE.findall(text)
    parts = _BREAK.split(text)
    if parts and parts[-1] == "":
        parts.pop()
    return parts


def split_lines(text: str) -> list[str]:
    """`text.split("\\n")` at every one of Python's line breaks: as many parts as breaks plus one, the
    break itself dropped (so a `\\r\\n` file's lines carry no `\\r`)."""
    return _BREAK.split(text)


def byte_lines(data: bytes) -> list[bytes]:
    """The lines of bytes (a process's output before it is decoded): `bytes.splitlines` breaks at
    `\r\n`, `\r` and `\n` only, Python's rule already."""
    return data.splitlines()
