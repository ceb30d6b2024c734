"""The forms a configured secret takes when a check prints it: one regex that finds them all.

A check runs the repository's code, and code that got hold of a key (a config file inside the
workspace, a test fixture) can print it any way it likes to get it past redaction. Besides the
exact value, the pattern finds:
- base64, standard and urlsafe, with or without padding, at each of the three byte alignments
  inside a longer base64 stream (only the characters fully determined by the secret's bytes are
  matched, so whatever precedes or follows it in the stream does not matter);
- hex in either case, `\\xNN` escapes, URL-encoding (`%NN` is hex with a separator);
- the value reversed, and ROT13;
- any of its characters written as a JSON, HTML or XML escape (`\\u002B`, `&#43;`, `&#x2B;`, `\\/`);
- any of the above with up to three separator characters (spaces, punctuation, line breaks)
  between its characters, its own punctuation repeated, and case folded where case carries no
  information.

Short values (under MIN_FUZZY characters) are matched exactly only: their encodings are short
enough to occur by chance. Encodings not listed here (base32, compression, split across lines
further apart, encryption) are not found: the documented limit is SECURITY.md's.
"""

from __future__ import annotations

import base64
import codecs
import re
from collections.abc import Iterable
from urllib.parse import quote

__all__ = ["MIN_FUZZY", "cut_tail", "pattern"]

MIN_FUZZY = 8
MIN_TAIL = 6  # characters of a secret's start that `cut_tail` hides at the end of a text
_SEPARATORS = 3


def _base64_cores(data: bytes) -> list[str]:
    """For each alignment k in 0..2, the base64 characters determined by `data` alone when it starts
    k bytes into a stream, plus the standalone encoding with and without padding."""
    out = []
    n = len(data)
    for k in range(3):
        enc = base64.b64encode(b"\0" * k + data + b"\0\0").decode()
        start, end = -(-8 * k // 6), 8 * (k + n) // 6
        out.append(enc[start:end])
    whole = base64.b64encode(data).decode()
    out += [whole, whole.rstrip("=")]
    return out


def _case_free_forms(secret: str) -> list[str]:
    data = secret.encode()
    return [
        secret,
        secret[::-1],
        codecs.encode(secret, "rot13"),
        data.hex(),
        "".join(f"\\x{b:02x}" for b in data),
        quote(secret, safe=""),
    ]


def _spaced(form: str) -> str:
    """`form` with up to _SEPARATORS separator characters allowed between any two of its characters.

    The separator class leaves out letters, digits and the form's own characters, so matching never
    has two ways to read one character (no backtracking blow-up on hostile text)."""
    own = "".join(sorted({c for c in form if not c.isalnum()}))
    sep = f"[^0-9A-Za-z{re.escape(own)}]{{0,{_SEPARATORS}}}" if own else f"[^0-9A-Za-z]{{0,{_SEPARATORS}}}"
    # the form's own punctuation may come repeated (`trust--KEY`); possessive, so a run is read once
    return sep.join(re.escape(c) if c.isalnum() else f"(?:{re.escape(c)})++" for c in form)


_SHORT = {"\n": "n", "\r": "r", "\t": "t", "\b": "b", "\f": "f", "\v": "v", "\0": "0", "\a": "a"}


def _escaped(secret: str) -> str:
    """The secret with any of its characters written as a JSON, HTML or XML escape (`\\u002B`, `&#43;`,
    `&#x2B;`, `\\/`): how a server quoting a request back in an error body writes it; or as Python's
    repr writes it, of the text or of its UTF-8 bytes (`\\n`, `\\x0a`, `\\xc3\\xa9`, `\\U0001f511`):
    how an exception quoting a header (`Illegal header value b'Bearer ...'`) writes it."""
    def one(c: str) -> str:
        n = ord(c)
        alts = [("\\\\?" if not c.isalnum() else "") + re.escape(c), f"&#0*{n};", f"&#[xX]0*(?i:{n:x});"]
        if n <= 0xFFFF:
            alts.append(f"\\\\u(?i:{n:04x})")
        else:  # Python's \\U0001f511, JSON's surrogate pair
            hi, lo = 0xD800 + ((n - 0x10000) >> 10), 0xDC00 + ((n - 0x10000) & 0x3FF)
            alts += [f"\\\\U(?i:{n:08x})", f"\\\\u(?i:{hi:04x})\\\\u(?i:{lo:04x})"]
        if c in _SHORT:
            alts.append(f"\\\\{_SHORT[c]}")
        if n < 0x100 and (n >= 0x80 or not c.isalnum()):
            alts.append(f"\\\\x(?i:{n:02x})")
        if n >= 0x80:
            alts.append("".join(f"\\\\x(?i:{b:02x})" for b in c.encode()))
        return "(?:" + "|".join(alts) + ")"
    return "".join(one(c) for c in secret)


def cut_tail(text: str, secrets: Iterable[str]) -> str:
    """`text` with the start of a secret it ends with replaced (a body cut off inside a key)."""
    for s in secrets:
        for k in range(len(s) - 1, MIN_TAIL - 1, -1):
            if text.endswith(s[:k]):
                return text[:-k] + "***"
    return text


def pattern(secrets: Iterable[str]) -> re.Pattern[str] | None:
    """One regex for every secret in every form above; None when there is nothing to find."""
    exact: set[str] = set()
    escaped: set[str] = set()
    folded: set[str] = set()
    cased: set[str] = set()
    for s in secrets:
        if not s or not s.strip():
            continue
        exact.add(s)
        if len(s) < MIN_FUZZY:
            continue
        folded.update(f for f in _case_free_forms(s) if len(f) >= MIN_FUZZY)
        b64 = _base64_cores(s.encode())
        cased.update(f for f in b64 if len(f) >= MIN_FUZZY)
        cased.update(f.translate(str.maketrans("+/", "-_")) for f in b64 if len(f) >= MIN_FUZZY)
        escaped.add(_escaped(s))
    if not exact:
        return None
    # Longest first, so a form that contains another is replaced whole.
    # each secret as itself, any character escaped, first: longest first, a secret that starts another
    # never leaves the other's rest behind
    parts = sorted(escaped, key=len, reverse=True)
    parts += [f"(?i:{_spaced(f)})" for f in sorted(folded, key=len, reverse=True)]
    parts += [_spaced(f) for f in sorted(cased, key=len, reverse=True)]
    parts += [re.escape(s) for s in sorted(exact, key=len, reverse=True)]
    return re.compile("|".join(parts))
