"""How a key name the operator wrote is shown in a config error: a key pasted where a value belongs
(`llm: {sk-...: 1}`) must not be echoed to the terminal or the journal.

A name is shown whole when it reads like a config key: words of letters and digits joined by `_`, `-`
or `.`, none longer than 16 characters or holding more than 3 digits (what a typo of a real key looks
like; the longest word of a real key is 12). A name that holds a configured secret is `***`; any other
name shows its first characters only. The credential patterns (`sk-...`, `AKIA...`, a bearer token) are
the output's redaction, applied to every line the CLI prints and the daemon logs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

__all__ = ["PREFIX", "raw_secrets", "shown_key"]

PREFIX = 3  # characters of an unusual name shown: enough to find it in the file, far too few to use
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]{0,15}")
_MAX_DIGITS = 3  # in one word: `v2`, `tier3` read as names; `0123456789abcdef` does not
_MAX_LEN = 64


def _reads_as_a_name(name: str) -> bool:
    if not name or len(name) > _MAX_LEN:
        return False
    words = re.split(r"[_.-]", name)
    return all(_WORD.fullmatch(w) and sum(c.isdigit() for c in w) <= _MAX_DIGITS for w in words)


def _holds_secret(name: str, secrets: Iterable[str]) -> bool:
    return any((len(s) >= 4 and s in name) or (len(name) >= 8 and name in s) for s in secrets)


def shown_key(name: object, secrets: Iterable[str] = ()) -> str:
    """`name` as a config error may print it (never the whole of a name that may be a secret)."""
    if isinstance(name, int) and not isinstance(name, bool):
        return str(name)  # a list index
    text = str(name)
    if _holds_secret(text, secrets):
        return "***"
    if _reads_as_a_name(text):
        return text
    return f"{text[:PREFIX]}…({len(text)} characters, not shown: it may be a secret)"


_SECRET_NAMES = ("api_key", "apikey", "token", "secret", "password", "passwd", "authorization")


def raw_secrets(data: Any, depth: int = 0) -> list[str]:
    """The text under secret-named keys of a config not yet validated (`llm.api_key`, a token, ...): what
    an error about that config must not show, even as a key name."""
    out: list[str] = []
    if depth > 16:
        return out
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        if isinstance(value, str) and any(p in str(key).lower().replace("-", "_") for p in _SECRET_NAMES):
            out.append(value)
        else:
            out += raw_secrets(value, depth + 1)
    return out
