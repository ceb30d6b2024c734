"""File names that are not UTF-8: one rule from the OS to every encoder.

On Linux a file name is bytes. Python hands a name that is not UTF-8 over as a str holding lone
surrogates (`b"gen\\xff.py"` -> `"gen\\udcff.py"`, PEP 383's surrogateescape), and every strict encoder
refuses that str: SQLite (a cycle's row was lost and the cycle left `running`), the log file and stderr
("Logging error"), `str.encode()` for git's stdin (the watch source crashed and dropped the real save
batched with such a name). The rule:

- A name that is not UTF-8 is outside what autod reads, indexes, watches or puts in a prompt, as if a
  deny glob matched it: `utf8_only` passes the other names on and says, once per name, which it left
  (`autod.walk.walk`, a watch batch, the doc globs).
- Whatever autod writes goes through `shown` (`encodable` for a tree): each lone surrogate becomes a
  backslash escape, `\\xff` for a byte the OS gave and `\\ud83d` for any other, so no row, log line or
  message is lost to an encoder (the state db's connection, the log processors, git's stdin).
- The guards that must see every file a check wrote (`autod.checks.changes`) still walk such names:
  a check cannot hide a source it wrote behind one; they only ever show it escaped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import structlog

__all__ = ["LONE", "encodable", "is_utf8", "left_out", "shown", "utf8_only"]

log = structlog.get_logger("autod.fsnames")

LONE = re.compile(r"[\ud800-\udfff]")  # a lone surrogate: no UTF-8 encoder takes one
MAX_SAID = 1000  # names said once each; past this many a long-running daemon says no more of them
_said: set[str] = set()


def is_utf8(name: str) -> bool:
    """Whether `name` encodes as UTF-8 (holds no lone surrogate)."""
    return name.isascii() or LONE.search(name) is None


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c - 0xDC00:02x}" if 0xDC80 <= c <= 0xDCFF else f"\\u{c:04x}"


def shown(text: str) -> str:
    """`text` with each lone surrogate as a backslash escape: `gen\\xff.py`, encodable by any encoder."""
    return text if is_utf8(text) else LONE.sub(_escape, text)


def encodable(value: Any) -> Any:
    """`value` with `shown` applied to every str in it (dict keys too), in new containers."""
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, dict):
        return {encodable(k): encodable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [encodable(v) for v in value]
    if isinstance(value, tuple):
        return tuple(encodable(v) for v in value)
    return value


def utf8_only(names: Iterable[str], where: str) -> list[str]:
    """The names that are UTF-8, in order; each other one is said (escaped) the first time it is left."""
    out = []
    for name in names:
        if is_utf8(name):
            out.append(name)
        else:
            left_out(name, where)
    return out


def left_out(name: str, where: str) -> None:
    """Say (once per name, escaped) that `name` is not UTF-8 and was left out by `where`."""
    if name not in _said and len(_said) < MAX_SAID:
        _said.add(name)
        log.warning("fs.name_not_utf8_skipped", name=shown(name), where=where,
                    why="a file name that is not UTF-8 is outside what autod reads, writes or indexes")
