"""Leg one's grammar (autod.planner.linechoice): every line offered is read back by a GBNF reader exactly
as written, whatever the line holds, and no line can end its literal or add a rule.

`read` below follows llama.cpp's grammar parser (llama-grammar.cpp: `parse_char`, `parse_sequence`,
`parse_alternates`): a literal's escapes are \\x \\u \\U \\t \\r \\n \\\\ \\" \\[ \\] and nothing else, a
newline ends a rule except inside parentheses. The same grammars were also parsed by llama.cpp itself
(bench/linechoice_parse.py, every 120-line window of the installed packages' sources)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autod.planner import linechoice
from autod.planner.earlystop import Watched
from autod.planner.point import held

ESCAPES = {"t": "\t", "r": "\r", "n": "\n", "\\": "\\", '"': '"', "[": "[", "]": "]"}
HEX = {"x": 2, "u": 4, "U": 8}


class Unreadable(ValueError):
    pass


def literal_at(text: str, i: int) -> tuple[str, int]:
    """The literal opening at text[i] (a quote), decoded; and the index after its closing quote."""
    assert text[i] == '"'
    out, i = [], i + 1
    while True:
        if i >= len(text):
            raise Unreadable("unexpected end of input")
        ch = text[i]
        if ch == '"':
            return "".join(out), i + 1
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        kind = text[i + 1: i + 2]
        if kind in HEX:
            digits = text[i + 2: i + 2 + HEX[kind]]
            if len(digits) != HEX[kind] or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise Unreadable(f"bad hex escape at {i}")
            out.append(chr(int(digits, 16)))
            i += 2 + HEX[kind]
        elif kind in ESCAPES:
            out.append(ESCAPES[kind])
            i += 2
        else:
            raise Unreadable(f"unknown escape at {i}")


def read(grammar: str) -> dict[str, list[list[str]]]:
    """rule name -> its alternatives, each a list of items (a decoded literal as 'L:' + text, a char
    class as 'C:' + its source, a group as 'G:' + its index in `groups`, a repeat mark '*')."""
    rules: dict[str, list[list[str]]] = {}
    i, n = 0, len(grammar)

    def space(i: int, newline_ok: bool) -> int:
        while i < n:
            if grammar[i] in " \t" or (newline_ok and grammar[i] in "\r\n"):
                i += 1
            elif grammar[i] == "#":
                while i < n and grammar[i] not in "\r\n":
                    i += 1
            else:
                break
        return i

    def alternates(i: int, nested: bool) -> tuple[list[list[str]], int]:
        alts: list[list[str]] = [[]]
        while i < n:
            ch = grammar[i]
            if ch == '"':
                text, i = literal_at(grammar, i)
                alts[-1].append("L:" + text)
            elif ch == "[":
                end = grammar.index("]", i + 1)
                alts[-1].append("C:" + grammar[i: end + 1])
                i = end + 1
            elif ch == "*":
                alts[-1].append("*")
                i += 1
            elif ch == "(":
                inner, i = alternates(space(i + 1, True), True)
                if i >= n or grammar[i] != ")":
                    raise Unreadable("expecting ')'")
                alts[-1].append(("G:", inner))  # type: ignore[arg-type]
                i += 1
            elif ch == "|":
                alts.append([])
                i += 1
            elif (ch == ")") if nested else (ch in "\r\n"):  # the group's end, or the rule's
                return alts, i
            else:
                raise Unreadable(f"unexpected {ch!r} at {i}")
            i = space(i, nested)
        if nested:
            raise Unreadable("expecting ')'")
        return alts, i

    i = space(i, True)
    while i < n:
        start = i
        while i < n and (grammar[i].isalnum() or grammar[i] in "-_"):
            i += 1
        name = grammar[start:i]
        if not name:
            raise Unreadable(f"expecting name at {i}")
        i = space(i, False)
        if grammar[i: i + 3] != "::=":
            raise Unreadable("expecting ::=")
        if name in rules:
            raise Unreadable(f"rule {name} defined twice")
        rules[name], i = alternates(space(i + 3, False), False)
        i = space(i, True)
    return rules


def offered(grammar: str) -> list[str]:
    """The lines a grammar of linechoice's shape lets the answer be: checks its whole structure."""
    rules = read(grammar)
    assert list(rules) == ["root"]
    (seq,) = rules["root"]
    assert seq[:2] == ["C:[ \\t]", "*"] and len(seq) == 3
    tag, alternatives = seq[2]
    assert tag == "G:"
    out = []
    for alt in alternatives:
        (item,) = alt  # one literal, nothing else: no class, no reference, no repeat
        assert isinstance(item, str) and item.startswith("L:")
        out.append(item[2:])
    return out


def readable(text: str) -> bool:
    return all(ch == "\t" or (0x20 <= ord(ch) < 0x7F) or (ord(ch) >= 0xA0 and not 0xD800 <= ord(ch) <= 0xDFFF)
               for ch in text)


HOSTILE = [
    '") root ::= [^"]* ("',  # ends the literal and the group, starts a rule
    '" | [^"]* | "',
    "\\",
    '\\"',
    "\\x41\\u0042",
    "x = '\\n'  # a newline escape in source",
    "# a comment line",
    "root ::= \"evil\"",
    "[abc] ( ) | *",
    "s = 'caf\u00e9 \u2028 \U0001F600'",  # Latin-1, a line separator, an emoji past the BMP
    "tab\tinside",
]


def test_hostile_lines_are_each_one_literal_read_back_as_written():
    lines = [f"    {line}" for line in HOSTILE]
    grammar = linechoice.gbnf(lines)
    assert grammar is not None
    assert offered(grammar) == [line.strip() for line in HOSTILE]


def test_a_line_no_reply_can_write_is_left_out_and_fewer_than_two_choices_constrain_nothing():
    assert linechoice.literal("a\x00b") is None and linechoice.literal("a\x1bb") is None
    assert linechoice.literal("\ud800") is None and linechoice.literal("\x85") is None
    assert linechoice.gbnf(["x = 1", "y = '\x07'"]) is None  # one line left
    assert offered(linechoice.gbnf(["x = 1", "y = '\x07'", "z = 2"]) or "") == ["x = 1", "z = 2"]
    assert linechoice.gbnf([]) is None and linechoice.gbnf(["", "   "]) is None


def test_blank_repeated_tried_and_overlong_lines_are_not_offered():
    lines = ["def f(x):", "", "    if x:", "        return 1", "    if x:", "    return 2",
             "    s = '" + "a" * linechoice.MAX_LINE_CHARS + "'"]
    assert linechoice.choices(lines) == ["def f(x):", "if x:", "return 1", "return 2"]
    assert linechoice.choices(lines, tried=["  return 1 "]) == ["def f(x):", "if x:", "return 2"]
    many = [f"x{i} = {i}" for i in range(linechoice.MAX_CHOICES + 50)]
    assert len(linechoice.choices(many)) == linechoice.MAX_CHOICES


def grammar(offer: linechoice.Offer | None) -> str:
    return offer.grammar if offer is not None else ""


def test_held_offers_the_lines_through_the_last_the_tests_ran_less_those_tried():
    code = "def f(x):\n    a = 1\n    b = 2\n    c = 3\n    return a\n"
    assert offered(grammar(held(code, Watched(code)))) == ["def f(x):", "a = 1", "b = 2", "c = 3", "return a"]
    assert offered(grammar(held(code, Watched(code, must_see=3)))) == ["def f(x):", "a = 1", "b = 2"]
    assert offered(grammar(held(code, Watched(code, must_see=3, tried=("a = 1",))))) == ["def f(x):", "b = 2"]
    assert held(code, Watched(code, must_see=2, tried=("a = 1",))) is None  # one left: asked freely
    twice = "def f(x):\n    if x:\n        return 1\n    y = 2\n    if x:\n        return y\n"
    # a line held twice (`if x:`, the second below must_see=4) cannot be placed (point.named): offered,
    # the draw would go whole
    assert offered(grammar(held(twice, Watched(twice)))) == ["def f(x):", "return 1", "y = 2", "return y"]
    assert offered(grammar(held(twice, Watched(twice, must_see=4)))) == ["def f(x):", "return 1", "y = 2"]
    # the same lines for vLLM's choices, as the prompt shows them (indented)
    offer = held(twice, Watched(twice, must_see=4))
    assert offer is not None and offer.lines == ("def f(x):", "        return 1", "    y = 2")


@settings(max_examples=400, deadline=None)
@given(st.lists(st.text(max_size=60), min_size=2, max_size=8))
def test_any_text_is_read_back_exactly_or_left_out(lines):
    want = [t for t in linechoice.choices(lines) if readable(t)]
    grammar = linechoice.gbnf(lines)
    if len(want) < 2:
        assert grammar is None
        return
    assert grammar is not None and offered(grammar) == want


def _sources() -> list[Path]:
    """The .py files of several real libraries autod depends on (none of them ours)."""
    out: list[Path] = []
    for name in ("httpx", "pydantic", "structlog", "apscheduler", "chromadb", "yaml", "watchfiles"):
        module = sys.modules.get(name) or __import__(name)
        root = Path(module.__file__ or "").parent
        out += sorted(root.rglob("*.py"))
    return out


def test_every_line_of_several_real_libraries_is_offered_as_written():
    files = _sources()
    assert len(files) > 300
    windows = 0
    for path in files:
        lines = path.read_text(encoding="utf-8", errors="surrogateescape").split("\n")
        for at in range(0, len(lines), 120):  # a long definition's worth at a time
            window = lines[at: at + 120]
            grammar = linechoice.gbnf(window)
            want = [t for t in linechoice.choices(window) if readable(t)]
            if grammar is None:
                assert len(want) < 2, path
                continue
            windows += 1
            assert offered(grammar) == want, (path, at)
    assert windows > 1000


@pytest.mark.parametrize("bad", ['root ::= "a', 'root ::= "\\q"', "root ::= (\n \"a\"\n", "\"a\""])
def test_the_reader_refuses_what_llama_cpp_refuses(bad):
    with pytest.raises((Unreadable, ValueError)):
        read(bad)
