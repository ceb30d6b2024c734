"""A constant built from other constants (`SUPPORTED = (HTML4, CSS2)`, `LIMIT = BASE * 2`,
`PATTERN = f"{PREFIX}-{SUFFIX}"`) hides them from a suspect that reads only it: a wrong literal in one of
them reaches the suspect through the value built from it. Each suspect's values are followed to what
they are made of (autod.localize.focus.values_read), and the value group asked about them holds those
literals (value_suspects). Checked over generated modules: the shapes a derived value takes, one or
two levels deep, in the same module or imported, with values nothing reads beside them."""

from __future__ import annotations

import random
from pathlib import Path

from autod.localize import focus
from autod.localize.index import build_index
from autod.safety.boundary import Boundary

FORMS = [
    lambda names: "(" + ", ".join(names) + ",)",
    lambda names: "[" + ", ".join(names) + "]",
    lambda names: "{" + ", ".join(f"{n}: {i}" for i, n in enumerate(names)) + "}",
    lambda names: "frozenset({" + ", ".join(names) + "})",
    lambda names: " + ".join(f"{n} * {i + 2}" for i, n in enumerate(names)),
    lambda names: 'f"' + "-".join("{" + n + "}" for n in names) + '"',
]


def literal(rng: random.Random) -> str:
    return rng.choice([str(rng.randint(0, 99)), repr(rng.choice(["css21", "utf-8", "x", "%Y"]))])


def generated(rng: random.Random, root: Path) -> tuple[set[str], set[str], str]:
    """A workspace whose `lib.reader` reads one derived value: (the literal constants it is made of,
    the constants nothing it reads is made of, the derived values' names)."""
    n = rng.randint(1, 3)
    bases = [f"B{i}" for i in range(n)]
    imported = rng.random() < 0.5
    consts = "".join(f"{b} = {literal(rng)}\n" for b in bases)
    others = "".join(f"OTHER{i} = {literal(rng)}\n" for i in range(rng.randint(0, 2)))
    derived = f"MADE = {rng.choice(FORMS)(bases)}\n"
    reads = "MADE"
    if rng.random() < 0.4 and n < 3:  # a second level: a value made of the first
        derived += f"TOP = {rng.choice(FORMS[:3])(['MADE'])}\n"
        reads = "TOP"
    if imported:
        (root / "consts.py").write_text(consts + others)
        head = "from consts import " + ", ".join(bases) + "\n\n"
    else:
        head = consts + others
    (root / "lib.py").write_text(f"{head}{derived}\n\ndef reader(x):\n    return (x, {reads})\n")
    return set(bases), {f"OTHER{i}" for i in range(2)}, reads


def read_lines(root: Path):
    return lambda rel: (root / rel).read_text().split("\n") if (root / rel).is_file() else None


def test_the_literals_a_derived_value_is_made_of_reach_the_suspect_and_its_value_group(tmp_path: Path):
    rng = random.Random(23)
    for case in range(150):
        root = tmp_path / f"ws{case}"
        root.mkdir()
        bases, others, reads = generated(rng, root)
        index = build_index(Boundary(root, root / ".autod", []))
        d = index.get("lib.py", "reader")
        assert d is not None
        code = "\n".join((root / "lib.py").read_text().split("\n")[d.start - 1:d.end])
        (suspect,) = focus.values_read([focus.Suspect("lib.py", "reader", code, start=d.start)], index,
                                       read_lines(root))
        shown = [v.symbol for v in suspect.values]
        assert shown[0] == reads, shown  # what it reads first, then what that is made of
        assert bases <= set(shown), (shown, (root / "lib.py").read_text())
        assert not others & set(shown), shown  # nothing the value does not read
        groups = focus.value_suspects([suspect], 3, {"lib.py", "consts.py"})
        asked = {v.symbol for g in groups for v in g.values}
        assert bases <= asked, (asked, shown)  # each literal is a question to ask
        assert not asked & {"MADE", "TOP"} or any(  # a derived value is asked only for a literal of its own
            focus.has_literal(v.code) for g in groups for v in g.values if v.symbol in {"MADE", "TOP"})


def test_a_value_made_of_itself_or_of_each_other_is_followed_once(tmp_path: Path):
    (tmp_path / "lib.py").write_text("A = 1\nB = (A, 2)\nA = (B, A)\n\n\ndef reader():\n    return A\n")
    index = build_index(Boundary(tmp_path, tmp_path / ".autod", []))
    d = index.get("lib.py", "reader")
    assert d is not None
    (suspect,) = focus.values_read([focus.Suspect("lib.py", "reader", "def reader():\n    return A",
                                                  start=d.start)], index, read_lines(tmp_path))
    symbols = [v.symbol for v in suspect.values]
    assert len(symbols) == len(set(symbols)) <= focus.MAX_VALUES
