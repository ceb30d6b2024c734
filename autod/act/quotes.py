"""Undo a JSON-escaping artifact of small models: f-strings re-quoted so they nest the same quote.

Writing Python inside a JSON string, a model avoids escaping `"` and turns `f"{user['first']}"` into
`f'{user['first']}'`: valid from Python 3.12 (PEP 701), a syntax error before, and a right fix lost.
`requote` gives each such f-string back the other quote character, when the string contains none of
it, and only if the whole text then parses (under the interpreter autod runs on).
"""

from __future__ import annotations

from autod import pyast

__all__ = ["requote"]

_PREFIX = set("rRbBuUfF")


def requote(text: str) -> str | None:
    """The text with nested-quote f-strings re-quoted, if that makes it parse; else None."""
    fixed = _swap(text)
    if fixed == text:
        return None
    try:
        pyast.parse(fixed)
    except (SyntaxError, ValueError):
        return None
    return fixed


def _swap(text: str) -> str:
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "'\"" and _is_fstring_start(text, i) and text[i : i + 3] not in ("'''", '"""'):
            end = _fstring_end(text, i)
            if end is not None:
                body = text[i + 1 : end]
                other = '"' if c == "'" else "'"
                if c in body and other not in body and "\n" not in body:
                    out.append(other + body + other)
                    i = end + 1
                    continue
        out.append(c)
        i += 1
    return "".join(out)


def _is_fstring_start(text: str, i: int) -> bool:
    j = i - 1
    prefix = ""
    while j >= 0 and text[j] in _PREFIX and len(prefix) < 3:
        prefix = text[j] + prefix
        j -= 1
    if j >= 0 and (text[j].isalnum() or text[j] == "_"):
        return False  # part of a name, not a string prefix
    return "f" in prefix.lower()


def _fstring_end(text: str, start: int) -> int | None:
    """Index of the quote closing the f-string opened at `start`, quotes inside {...} skipped."""
    quote = text[start]
    depth = 0
    i = start + 1
    while i < len(text):
        c = text[i]
        if c == "\n":
            return None
        if c == "\\":
            i += 2
            continue
        if c == "{":
            if depth == 0 and text[i + 1 : i + 2] == "{":
                i += 2
                continue
            depth += 1
        elif c == "}":
            depth = max(0, depth - 1)
        elif c == quote and depth == 0:
            return i
        i += 1
    return None
