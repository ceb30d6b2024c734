"""Leg one's answer held to the definition's own lines: a grammar of its lines, for servers that take one.

Leg one (autod.planner.point) asks which line of a long definition makes the test fail. Asked freely,
a small model named no line of it in 5 of 18 prompts of four held-out libraries (it quoted a test's
`assert` from the failure output, or a line of another definition the prompt shows), and each such
draw went back to the whole copy, the dearest draw there is. llama.cpp's servers (llama-cpp-python and
llama-server) take a `grammar` (GBNF) with a request and sample only what it allows; held to "one of
these lines", the same model named one in all 18, the same line as asked freely in the 13 that had
named one (bench/point_probe.py --grammar). The grammar also leaves out what a suspect's earlier
draws named and wrote back unchanged (`tried`), so a later draw of the same suspect tries another line
instead of writing the same echo.

The lines are the definition's text, which is the workspace's and so untrusted: each becomes a GBNF
string literal in which every character but printable ASCII is written as an escape (`\\"`, `\\\\`,
`\\xHH`, `\\uHHHH`, `\\UHHHHHHHH`), so no line can end its literal or the rule; a line holding a control
character or a lone surrogate (which no token decodes to) is left out. The grammar constrains the
answer, not the question: the prompt is unchanged, and a server that ignores `grammar` (vLLM, Ollama)
answers as it would have. One that refuses it is asked without it from then on
(autod.planner.hold). vLLM is given the same lines as a list of choices, each as the prompt shows it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["MAX_CHOICES", "Offer", "choices", "gbnf", "literal", "offer"]

MAX_CHOICES = 400  # lines offered at most (a longer definition is not shown whole in a prompt anyway)
MAX_LINE_CHARS = 400  # a longer line is not offered (a data or minified line, not a fix's; a big grammar)


def literal(text: str) -> str | None:
    """`text` as a GBNF string literal, quotes included; None when it holds a character no reply can
    write (a control character other than a tab, a lone surrogate)."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        elif ch == "\t":
            out.append("\\t")
        elif code < 0x20 or code == 0x7F or 0xD800 <= code <= 0xDFFF or 0x80 <= code < 0xA0:
            return None
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04X}")
        else:
            out.append(f"\\U{code:08X}")
    out.append('"')
    return "".join(out)


def choices(lines: Iterable[str], tried: Iterable[str] = ()) -> list[str]:
    """The distinct stripped lines leg one may name, in their order: not blank, not in `tried`
    (stripped lines an earlier draw named), not longer than `MAX_LINE_CHARS`; at most `MAX_CHOICES`."""
    seen = {t.strip() for t in tried}
    out: list[str] = []
    for line in lines:
        text = line.strip()
        if not text or text in seen or len(text) > MAX_LINE_CHARS:
            continue
        seen.add(text)
        out.append(text)
        if len(out) >= MAX_CHOICES:
            break
    return out


def gbnf(lines: Iterable[str]) -> str | None:
    """A GBNF grammar whose answer is one of `lines` (their `choices`, after any indentation); None when
    fewer than two are left to choose from (no choice to constrain)."""
    alternatives = [q for q in (literal(text) for text in choices(lines)) if q is not None]
    if len(alternatives) < 2:
        return None
    # a newline ends a rule in GBNF except inside parentheses: one line each, grouped
    return "root ::= [ \\t]* (\n    " + "\n  | ".join(alternatives) + "\n)\n"


@dataclass(frozen=True)
class Offer:
    """The lines leg one may write, spelt for each kind of server (autod.planner.hold): a GBNF grammar
    (llama.cpp's), and the lines as the prompt shows them, indented (vLLM's choices)."""

    grammar: str
    lines: tuple[str, ...]


def offer(allowed: Sequence[str], shown: Sequence[str]) -> Offer | None:
    """The `Offer` of the stripped lines `allowed` (their `choices`) of a definition whose lines are
    `shown`; None where fewer than two can be written."""
    grammar = gbnf(allowed)
    if grammar is None:
        return None
    as_shown: dict[str, str] = {}
    for line in shown:
        as_shown.setdefault(line.strip(), line.rstrip())
    return Offer(grammar, tuple(as_shown.get(text, text) for text in choices(allowed) if literal(text)))
