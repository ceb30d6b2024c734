"""Inputs shaped by a regular expression to make it backtrack: drawn from the pattern's own parse tree
(re._parser, sre_parse before 3.11), not from a list of known bad strings.

A pattern's alphabet is its literal characters, a character of each class and category it uses, and a
few characters every pattern meets (space, newline, a letter, a digit, punctuation). Its witnesses are
two strings that walk the pattern (each repeat at its least count, or at least once; the first or the
last branch); a prefix of a witness is a partial match. The shapes, each a unit repeated to a length,
with an optional head and tail:

- a run of one character of the alphabet, with or without a tail that fails the match (`"=" * n + "!"`);
- a partial match followed by a run (`"=== x" + "=" * n + "!"`, `"  1:1  error  x" + " " * n + "!"`);
- a partial match repeated, alone or as a line (`"<<<<<<< SEARCH\\n" * n`);
- a whole witness repeated; short random units of the alphabet.
"""

from __future__ import annotations

import random
import re
from re import _constants as C  # the parser's opcodes
from re import _parser

Shape = tuple[str, str, str]  # head, unit, tail

COMMON = " \n\ta1Z_.-/:=!é"
FAIL = "!"  # a tail no pattern here ends on; "a" when the run itself is "!"
_CATEGORY = {
    "DIGIT": "1", "NOT_DIGIT": "a", "SPACE": " ", "NOT_SPACE": "a", "WORD": "a", "NOT_WORD": " ",
    "LINEBREAK": "\n", "NOT_LINEBREAK": "a",
}
_CATEGORY_RE = {
    "DIGIT": r"\d", "NOT_DIGIT": r"\D", "SPACE": r"\s", "NOT_SPACE": r"\S", "WORD": r"\w", "NOT_WORD": r"\W",
    "LINEBREAK": r"\n", "NOT_LINEBREAK": r"[^\n]",
}
_REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT)


def _category(name: object) -> str:
    return str(name).removeprefix("CATEGORY_").removeprefix("UNI_").removeprefix("LOC_")


def _class_chars(items: list) -> list[str]:
    out = []
    for op, av in items:
        if op is C.LITERAL:
            out.append(chr(av))
        elif op is C.RANGE:
            out += [chr(av[0]), chr(av[1])]
        elif op is C.CATEGORY:
            out.append(_CATEGORY.get(_category(av), "a"))
    return out


def _in_class(ch: str, items: list) -> bool:
    negate = bool(items) and items[0][0] is C.NEGATE
    hit = False
    for op, av in items:
        if op is C.LITERAL:
            hit |= ch == chr(av)
        elif op is C.RANGE:
            hit |= av[0] <= ord(ch) <= av[1]
        elif op is C.CATEGORY:
            hit |= re.fullmatch(_CATEGORY_RE.get(_category(av), "(?!)"), ch) is not None
    return hit != negate


def _walk(tree: list, found: list[str]) -> None:
    for op, av in tree:
        if op is C.LITERAL:
            found.append(chr(av))
        elif op is C.NOT_LITERAL:
            found.append("a" if chr(av) != "a" else "b")
        elif op is C.IN:
            found += _class_chars(av)
        elif op is C.BRANCH:
            for alt in av[1]:
                _walk(alt, found)
        elif op in _REPEATS:
            _walk(av[2], found)
        elif op is C.SUBPATTERN:
            _walk(av[3], found)
        elif op in (C.ATOMIC_GROUP,):
            _walk(av, found)
        elif op in (C.ASSERT, C.ASSERT_NOT):
            _walk(av[1], found)
        elif op is C.GROUPREF_EXISTS:
            _walk(av[1], found)
            if av[2] is not None:
                _walk(av[2], found)


class _Witness:
    """A string that walks the pattern, and the offsets where each of its parts ends (the cuts)."""

    def __init__(self, tree: list, least: bool) -> None:
        self.least = least  # each repeat at its least count and the first branch; else once and the last
        self.text = ""
        self.cuts: set[int] = set()
        self.groups: dict[int, str] = {}
        self._seq(tree)

    def _seq(self, tree: list) -> None:
        for op, av in tree:
            self._node(op, av)
            self.cuts.add(len(self.text))

    def _node(self, op: object, av: object) -> None:  # one arm per opcode
        if op is C.LITERAL:
            self.text += chr(av)
        elif op is C.NOT_LITERAL:
            self.text += "a" if chr(av) != "a" else "b"
        elif op is C.ANY:
            self.text += "a"
        elif op is C.IN:
            picks = [c for c in _class_chars(av) + list(COMMON) if _in_class(c, av)]
            self.text += picks[0] if picks else "a"
        elif op is C.BRANCH:
            self._seq(av[1][0] if self.least else av[1][-1])
        elif op in _REPEATS:
            low, high, sub = av
            count = low if self.least else min(max(low, 1), high)
            for _ in range(min(count, 64)):
                self._seq(sub)
        elif op is C.SUBPATTERN:
            start = len(self.text)
            self._seq(av[3])
            if av[0] is not None:
                self.groups[av[0]] = self.text[start:]
        elif op is C.ATOMIC_GROUP:
            self._seq(av)
        elif op is C.GROUPREF:
            self.text += self.groups.get(av, "")
        elif op is C.GROUPREF_EXISTS:
            self._seq(av[1])
        # AT, ASSERT, ASSERT_NOT: nothing of their own to walk


def alphabet(pattern: re.Pattern) -> tuple[list[str], list[str]]:
    """The pattern's own characters, and those with the common ones added."""
    source = pattern.pattern
    tree = _parser.parse(source, pattern.flags)
    own: list[str] = []
    _walk(list(tree), own)
    own = sorted(set(own))
    return own, sorted(set(own) | set(COMMON))


def witnesses(pattern: re.Pattern) -> list[_Witness]:
    tree = list(_parser.parse(pattern.pattern, pattern.flags))
    return [_Witness(tree, least=True), _Witness(tree, least=False)]


def shapes(pattern: re.Pattern, limit: int = 48) -> list[Shape]:
    """Adversarial shapes for `pattern`, at most `limit` of them drawn at random (seeded by the
    pattern) from the full set when it is larger, always including the runs of its own characters
    and each partial match followed by a run."""
    rng = random.Random(str(pattern.pattern))
    own, chars = alphabet(pattern)
    must: list[Shape] = [("", c, FAIL if c != FAIL else "a") for c in chars]
    may: list[Shape] = [("", c, "") for c in own]
    for w in witnesses(pattern):
        text = w.text
        may += [("", text + sep, "") for sep in ("", "\n", " ")]
        for k in sorted(w.cuts):
            part = text[:k]
            if part:
                must.append(("", part + "\n", ""))
                may.append(("", part, ""))
            nexts = {text[k - 1] if k else " ", text[k] if k < len(text) else " ", " "}
            must += [(part, c, FAIL if c != FAIL else "a") for c in sorted(nexts)]
            may.append((part, rng.choice(chars), FAIL))
    for _ in range(8):
        unit = "".join(rng.choice(chars) for _ in range(rng.randint(2, 5)))
        may.append((rng.choice(["", witnesses(pattern)[1].text[:3]]), unit, ""))
    must = [s for s in dict.fromkeys(must) if s[1]]
    may = [s for s in dict.fromkeys(may) if s[1] and s not in set(must)]
    if len(must) > limit:
        must = rng.sample(must, limit)
    return must + rng.sample(may, min(len(may), max(limit // 4, limit - len(must))))


def build(shape: Shape, size: int, as_bytes: bool) -> str | bytes:
    head, unit, tail = shape
    text = head + unit * max(1, (size - len(head) - len(tail)) // len(unit)) + tail
    return text.encode("utf-8", "surrogatepass") if as_bytes else text
