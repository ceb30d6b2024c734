"""Terminal-safe text: what autod prints for a human never drives the terminal.

Text a human reads through autod (a proposal's summary and diff, log lines, status, history,
memory hits) comes from an LLM, a build log or a file in the workspace. Printed raw, an OSC 52
sequence writes the reader's clipboard, `ESC[1A ESC[2K` erases the diff line above it, U+009B is a
one-byte CSI on terminals that honour C1, U+0085/U+2028/U+2029 break lines where `less` and some
terminals do, and the bidi controls (Trojan Source) reorder what the reviewer sees. Each of them is
shown escaped instead: `\\x1b`, `\\x9b`, `\\u2028`, `\\u202e`.

- `line(text)`: one line: newline and tab are escaped too (a summary cannot forge a second line).
- `block(text)`: a multi-line block (a diff, a hit list): newline and tab kept, the rest escaped.
- `json_text(text)`: a JSON document: the same characters as `\\uXXXX` escapes, still valid JSON
  meaning the same values (the log file, `autod logs --json`).
"""

from __future__ import annotations

import re

__all__ = ["UNSAFE", "block", "json_text", "line"]

# C0 but newline and tab, DEL, C1 (incl. U+0085 NEL and U+009B CSI), the bidi controls (embeddings and
# overrides U+202A-U+202E, isolates U+2066-U+2069, marks U+200E/U+200F and U+061C) and the Unicode
# line and paragraph separators.
_BIDI_AND_SEPARATORS = "\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI_AND_SEPARATORS}]")
_UNSAFE_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI_AND_SEPARATORS}]")


def _shown(ch: str) -> str:
    code = ord(ch)
    if ch == "\n":
        return "\\n"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _shown_match(m: re.Match[str]) -> str:
    return _shown(m.group())


def line(text: object) -> str:
    """`text` as one terminal-safe line: every control, newline and tab shown escaped."""
    s = text if isinstance(text, str) else str(text)
    return _UNSAFE_LINE.sub(_shown_match, s)


def block(text: object) -> str:
    """`text` as a terminal-safe block: newlines and tabs kept, every other control shown escaped."""
    s = text if isinstance(text, str) else str(text)
    return UNSAFE.sub(_shown_match, s)


def _json_escape(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group()):04x}"


def json_text(text: str) -> str:
    """A JSON text with every unsafe character written as a `\\uXXXX` escape (the values are unchanged).

    Raw control characters can only stand inside JSON strings, where the escape means the same
    character, so the document still parses to the same values.
    """
    return UNSAFE.sub(_json_escape, text)
