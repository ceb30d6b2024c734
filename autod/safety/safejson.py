"""The one way autod parses JSON that a server, a check or the workspace wrote.

`json.loads` on text autod does not trust fails in more ways than `ValueError`: a document nested a few
thousand levels deep (`[[[[...` in an LLM server's reply, a check's result file) raises
`RecursionError`, which every caller that expected a bad document to be a `ValueError` let through, and
a cycle ended as an internal error. `loads` turns every way a document cannot be read into
`ValueError` (a `UnicodeDecodeError` already is one; an integer of more digits than Python converts
is one too), and reads `NaN` and `Infinity`, which are not JSON, as the error they are.

A number that parses is still only as good as its source: `count` is the check a count (of tokens, of
tests) must pass before it is kept, stored or added up (an SQLite integer is 64 bits).
"""

from __future__ import annotations

import json
import re
from typing import Any

from autod.fsnames import LONE as _LONE

__all__ = ["MAX_COUNT", "count", "loads"]

MAX_COUNT = 2**31 - 1  # larger than any honest count autod reads; well inside SQLite's integers


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_STR = re.compile(r"\\u[dD][89a-fA-F]")


def loads(data: str | bytes | bytearray) -> Any:
    """`json.loads(data)`, raising `ValueError` for anything it cannot read. A lone surrogate a `\\u`
    escape made (`"\\ud83d"`, half of a pair) becomes U+FFFD in every string: no str autod holds can
    then fail to encode as UTF-8 in a log line, a database row, a file or a validated model."""
    try:
        doc = json.loads(data, parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError("the document is nested too deeply to read") from None
    if isinstance(data, str):
        lone = _SURROGATE_ESCAPE_STR.search(data) or _LONE.search(data)
    else:
        lone = _SURROGATE_ESCAPE.search(data)
    return _whole(doc) if lone else doc


def _whole(doc: Any) -> Any:
    """`doc` with every lone surrogate in its strings (keys too) replaced, in new containers."""
    def fix(v: Any) -> Any:
        return _LONE.sub("\ufffd", v) if isinstance(v, str) else v

    root: list[Any] = [doc]
    todo: list[tuple[Any, Any, Any]] = [(root, 0, doc)]
    while todo:
        parent, key, value = todo.pop()
        if isinstance(value, dict):
            new: Any = {}
            for k, v in value.items():
                new[fix(k)] = v
                todo.append((new, fix(k), v))
        elif isinstance(value, list):
            new = list(value)
            todo.extend((new, i, v) for i, v in enumerate(value))
        else:
            new = fix(value)
        parent[key] = new
    return root[0]


def count(value: Any) -> int | None:
    """`value` when it is a plausible count (an int, not a bool, 0 to MAX_COUNT); None otherwise."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
        return value
    return None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
