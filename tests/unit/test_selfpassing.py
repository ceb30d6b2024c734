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
    "def inner():\n            return True\n        return other.v == inner()",
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


# Answers made without looking at the operand: every dunder x body x binding form. `{a}` is the operand's
# parameter; the bodies read other things, compare the operand with itself, or rebind it first.
BLIND_BODIES = [
    "return self.v",
    "return self.v == self.v",
    "return {a} == {a}",
    "return {a} is {a} and self.ok",
    "return bool(1)",
    "flag = self.ok\n        return flag",
    "{a} = self\n        return self.v == {a}.v",
    "del {a}\n        return self.ok",
    "{a}: object = None\n        return {a} is None",
    "def inner():\n            return self.v\n        return inner()",
    "return self.fns[0]()",
]
BLIND_FORMS = [
    "class Num(int):\n    def {name}(self, {a}):\n        {body}\n",
    "class Num(int):\n    async def {name}(self, {a}):\n        {body}\n",
    "class Num(int):\n    def {name}(self, *{a}):\n        {body}\n",
    "class Num(int):\n    pass\n\n\ndef _f(self, {a}):\n    return 0\n\n\nclass M(int):\n"
    "    def {name}(self, {a}, /):\n        {body}\n",
]
LAMBDAS = ["self.v", "{a} == {a}", "self.v or self.w", "bool(1) and self.ok"]
LAMBDA_FORMS = [
    "class Num(int):\n    {name} = lambda self, {a}: {body}\n",
    "Num = type('Num', (int,), {{'{name}': lambda self, {a}: {body}}})\n",
    "class Num(int):\n    pass\n\n\nsetattr(Num, '{name}', lambda self, {a}: {body})\n",
    "class Num(int):\n    pass\n\n\nNum.{name} = lambda self, {a}: {body}\n",
]


def test_every_dunder_that_answers_without_looking_at_its_operand_is_refused() -> None:
    missed = []
    for name in ANSWERS:
        for a in ("other", "x"):
            cases = [f.format(name=name, a=a, body=b.format(a=a)) for f in BLIND_FORMS for b in BLIND_BODIES]
            cases += [f.format(name=name, a=a, body=b.format(a=a)) for f in LAMBDA_FORMS for b in LAMBDAS]
            for code in cases:
                if not any(name in r for r in reach.introduced(BUGGY, code + "\n\n" + BUGGY)):
                    missed.append(code)
    assert missed == [], f"{len(missed)} not refused, e.g. {missed[:3]}"


@pytest.mark.parametrize("body", [
    "return self.v == {a}.v",
    "return getattr({a}, 'v', None) == self.v",
    "if {a} is None:\n            raise TypeError('no')\n        return self.ok",
    "y = {a}\n        return y.v == self.v",
    "def inner():\n            return {a}.v\n        return inner() == self.v",
    "return self.v == locals()['{a}'].v",
    "return {a} == {a} and {a}.v == self.v",
    "if self.ok:\n            {a} = 0\n        return {a} == self.v",
    "return self.v == builtins.eval('{a}').v",
    "self.seen = 1\n        return self.v == {a}.v",
    "self.n: int = 1\n        return self.v == {a}.v",
    "del self.cache\n        return self.v == {a}.v",
    "return NotImplemented",
])
@pytest.mark.parametrize("name", ANSWERS)
def test_a_dunder_that_looks_at_its_operand_is_not_refused(name: str, body: str) -> None:
    for a in ("other", "x"):
        code = f"class Num:\n    def {name}(self, {a}):\n        {body.format(a=a)}\n\n\n{BUGGY}"
        assert reach.introduced(BUGGY, code) == [], (name, body)
        lam = f"class Num:\n    {name} = lambda self, {a}: {a}.v == self.v\n\n\n{BUGGY}"
        assert reach.introduced(BUGGY, lam) == []


def test_a_dunder_with_no_operand_answers_nothing() -> None:
    # called with an operand it raises TypeError: no test passes through it
    code = "class Num:\n    def __eq__(self):\n        return self.v\n\n\n" + BUGGY
    assert reach.introduced(BUGGY, code) == []


@pytest.mark.parametrize("spellings", [
    ("False", "not True", "False or False", "1 == 2", "1 != 1", "2 < 1", "1 > 2", "bool(0)", "1 >= 2",
     "2 <= 1", "False and True", "x != x", "x is not x", "x < x", "x > x"),
    ("True", "not False", "2 > 1", "1 < 2", "1 <= 1", "2 >= 2", "'a' == 'a'", "1.0 == 1", "x == x",
     "x is x", "x <= x", "x >= x", "bool('a')", "False or True"),
])
def test_a_constant_in_any_spelling_on_every_branch_is_the_same_answer(spellings: tuple[str, ...]) -> None:
    # the dunder looks at its operand (`if x.v`), so only the constant rule can refuse it
    for first in spellings:
        for second in spellings:
            code = (f"class Num(int):\n    def __eq__(self, x):\n        if x.v:\n"
                    f"            return {first}\n        return {second}\n\n\n{BUGGY}")
            assert any("__eq__" in r for r in reach.introduced(BUGGY, code)), (first, second)


@pytest.mark.parametrize("pair", [("True", "False"), ("1 < 2", "2 < 1"), ("x == x", "x != x"),
                                  ("self.v == 1", "False"), ("'a' < 'b'", "1"), ("1 < 'a'", "False"),
                                  ("bool(x)", "True"), ("x.v == 1", "x.v == 1"),
                                  ("bool()", "False"), ("bool(x=1)", "True")])
def test_answers_the_branches_decide_are_not_one_constant(pair: tuple[str, str]) -> None:
    code = (f"class Num(int):\n    def __eq__(self, x):\n        if x.v:\n            return {pair[0]}\n"
            f"        return {pair[1]}\n\n\n{BUGGY}")
    assert reach.introduced(BUGGY, code) == [], pair


@pytest.mark.parametrize("nested", ["def inner():\n            return False",
                                    "async def inner():\n            return False"])
def test_returns_of_nested_functions_are_theirs_wherever_they_sit(nested: str) -> None:
    before = f"class Num(int):\n    def __eq__(self, x):\n        {nested}\n        if x.v:\n            " \
             f"return True\n        return True\n\n\n{BUGGY}"
    assert any("__eq__" in r for r in reach.introduced(BUGGY, before))
    # a nested definition between an undecided return and a constant one: both own returns are read
    between = f"class Num(int):\n    def __eq__(self, x):\n        if x.v:\n            return x.v\n" \
              f"        {nested}\n        return True\n\n\n{BUGGY}"
    assert reach.introduced(BUGGY, between) == []


def test_each_definition_is_counted_once_and_unnamed_bindings_are_read_safely() -> None:
    code = "class A:\n    def __eq__(self, o):\n        return True\n\n\n" \
           "class B:\n    def __lt__(self, o):\n        return True\n"
    found = self_passing_features(code)
    assert found is not None and sorted(found.values()) == [1, 1]
    # keys that are not names (`**base`, a number) and a setattr whose name is a variable: no name to judge
    odd = "N = type('N', (int,), {**base, 1: lambda s, o: True, '__eq__': lambda s, o: o.v == s.v})\n" \
          "setattr(N, attr, lambda s, o: True)\n"
    assert self_passing_features(odd) == {}
