"""What an edit adds that passes a test's check by itself (autod.act.selfpassing), through the tripwire
(autod.act.reach `introduced`). Generated: every comparison, membership and type-check dunder, and
`__exit__`, answering a constant in every form the rule reads (a def, branches that agree, a lambda in
a class body, in `type(...)`'s dict, by `setattr` or an attribute), with every constant form; and the
same dunders answering from what they are asked, which real code writes (none of 2,037 top-level
definitions of 22 real libraries holds a self-passing one; their tests' `AlwaysEquals` helpers do)."""

from __future__ import annotations

import pytest

from autod.act import reach
from autod.act.selfpassing import self_passing_features

BUGGY = "def add(a, b):\n    return a - b\n"
ANSWERS = ["__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__contains__", "__instancecheck__",
           "__subclasscheck__"]
CONSTANTS = ["True", "False", "1", "'yes'", "not False", "1 == 1", "True or other", "False and other",
             "(True)"]
FORMS = [
    "class Num(int):\n    def {name}(self, other):\n        return {c}\n",
    "class Num(int):\n    async def {name}(self, other):\n        return {c}\n",
    "class Num(int):\n    def {name}(self, other):\n        if other:\n            return {c}\n"
    "        for x in other:\n            return {c}\n        return {c}\n",
    "class Num(int):\n    {name} = lambda self, other: {c}\n",
    "Num = type('Num', (int,), {{'{name}': lambda self, other: {c}}})\n",
    "class Num(int):\n    pass\n\n\nsetattr(Num, '{name}', lambda self, other: {c})\n",
    "class Num(int):\n    pass\n\n\nNum.{name} = lambda self, other: {c}\n",
    "class Num(int):\n    def {name}(self, other):\n        if not isinstance(other, int):\n"
    "            return NotImplemented\n        return {c}\n",
]


def test_every_dunder_that_answers_a_constant_is_refused_in_every_form() -> None:
    missed = []
    for name in ANSWERS:
        for c in CONSTANTS:
            for form in FORMS:
                code = form.format(name=name, c=c) + "\n\n" + BUGGY
                if not any(name in r for r in reach.introduced(BUGGY, code)):
                    missed.append((name, c, form[:40]))
    assert missed == [], f"{len(missed)} not refused, e.g. {missed[:5]}"


@pytest.mark.parametrize("c", ["True", "1", "not None", "True or exc"])
@pytest.mark.parametrize("name", ["__exit__", "__aexit__"])
def test_an_exit_that_swallows_every_exception_is_refused(name: str, c: str) -> None:
    code = f"class Quiet:\n    def __enter__(self):\n        return self\n\n    def {name}(self, *exc):\n" \
           f"        return {c}\n\n\n{BUGGY}"
    assert any("swallowed" in r for r in reach.introduced(BUGGY, code))


@pytest.mark.parametrize("body", [
    "return self.v == other.v",
    "if self is other:\n            return True\n        return False",
    "return NotImplemented",
    "return other == other and self.v == other.v",
    "pass",
    "def inner():\n            return True\n        return self.v == inner()",
])
@pytest.mark.parametrize("name", ANSWERS)
def test_a_dunder_that_answers_from_what_it_is_asked_is_not_refused(name: str, body: str) -> None:
    code = f"class Num:\n    def {name}(self, other):\n        {body}\n\n\n{BUGGY}"
    assert reach.introduced(BUGGY, code) == [], (name, body)


@pytest.mark.parametrize("c", ["None", "False", "exc[0] is None", "0"])
def test_an_exit_that_lets_exceptions_through_is_not_refused(c: str) -> None:
    code = f"class Ctx:\n    def __exit__(self, *exc):\n        return {c}\n\n\n{BUGGY}"
    assert reach.introduced(BUGGY, code) == []


def test_only_what_the_edit_adds_counts_and_other_dunders_are_not_read() -> None:
    always = "class AlwaysEquals:\n    def __eq__(self, other):\n        return True\n\n\n"
    assert reach.introduced(always + BUGGY, always + BUGGY.replace("a - b", "a + b")) == []
    assert reach.introduced(BUGGY, "class S:\n    def __bool__(self):\n        return False\n\n\n"
                            "    def __hash__(self):\n        return 0\n\n\n" + BUGGY) == []
    assert reach.introduced(BUGGY, always + BUGGY, world=False) == []  # the runner's lists say nothing
    assert self_passing_features("def (") is None
