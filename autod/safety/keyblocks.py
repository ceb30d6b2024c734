"""Private key blocks in text, found in one pass: what autod's redaction (autod.logs) replaces first."""

from __future__ import annotations

import re

__all__ = ["SPAN", "redacted"]

_KEY_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----")
_KEY_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----")
SPAN = 20_000  # characters of a key block looked through for its END line


def redacted(text: str, replacement: str) -> str:
    """Each private key block replaced: from its BEGIN line to its END line, or to `SPAN` characters on
    (or the text's end) when no END line comes within them. One pass: the search for the next block
    starts where the last one ended, so many BEGIN lines cost linear time (a lazy regex tried each of
    them against the 20,000 characters after it)."""
    out, at = [], 0
    while (begin := _KEY_BEGIN.search(text, at)) is not None:
        end = _KEY_END.search(text, begin.end(), begin.end() + SPAN)
        stop = end.end() if end is not None else min(len(text), begin.end() + SPAN)
        out += [text[at:begin.start()], replacement]
        at = stop
    return "".join([*out, text[at:]]) if out else text
