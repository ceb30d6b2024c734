"""A fix that writes a literal where a function used a workspace constant is a symptom patch: found
when the constant is the module's own or imported from a workspace module, and not otherwise."""

from __future__ import annotations

from autod.act.inlined import inlined_constants

UNITS = '"""Unit constants."""\n\nINCHES_PER_FOOT = 10\nCM_PER_INCH = 2.54\nNAMES = compute()\n'
CONVERT = ("from units import INCHES_PER_FOOT\n\n\ndef feet_to_inches(feet):\n"
           "    return feet * INCHES_PER_FOOT\n\n\ndef inches_to_feet(inches):\n"
           "    return inches / INCHES_PER_FOOT\n")


def files(**texts: str):
    table = {k.replace("__", "/") + ".py": v for k, v in texts.items()}
    return table.get


def test_an_imported_constant_replaced_by_the_expected_literal_is_found_with_where_it_lives() -> None:
    new = CONVERT.replace("return feet * INCHES_PER_FOOT", "return feet * 12")
    (found,) = inlined_constants("convert.py", CONVERT, new, files(units=UNITS))
    assert (found.name, found.function, found.defined_in) == ("INCHES_PER_FOOT", "feet_to_inches", "units.py")
    assert "change it where it is defined (units.py · INCHES_PER_FOOT)" in found.reason()


def test_the_modules_own_constant_and_a_method_and_a_relative_import() -> None:
    old = "RATE = 0.2\n\n\nclass Tax:\n    def of(self, x):\n        return x * RATE\n"
    (found,) = inlined_constants("pkg/tax.py", old, old.replace("x * RATE", "x * 0.25"), files())
    assert (found.function, found.defined_in) == ("Tax.of", "pkg/tax.py")
    rel = "from .units import INCHES_PER_FOOT as IPF\n\n\ndef f(x):\n    return x * IPF\n"
    new = rel.replace("x * IPF", "x * 12")
    (found,) = inlined_constants("pkg/conv.py", rel, new, files(pkg__units=UNITS))
    assert (found.name, found.defined_in) == ("IPF", "pkg/units.py")


def test_a_fix_that_keeps_using_the_constant_is_no_symptom_patch() -> None:
    operator = CONVERT.replace("inches / INCHES_PER_FOOT", "inches // INCHES_PER_FOOT")
    assert inlined_constants("convert.py", CONVERT, operator, files(units=UNITS)) == []
    plus_one = CONVERT.replace("feet * INCHES_PER_FOOT", "feet * INCHES_PER_FOOT + 4")
    assert inlined_constants("convert.py", CONVERT, plus_one, files(units=UNITS)) == []


def test_names_that_are_no_literal_constant_of_the_workspace_are_left_alone() -> None:
    computed = "from units import NAMES\n\n\ndef first():\n    return NAMES[0]\n"
    assert inlined_constants("m.py", computed, computed.replace("NAMES[0]", "'a'"), files(units=UNITS)) == []
    elsewhere = "from math import pi\n\n\ndef area(r):\n    return pi * r * r\n"
    assert inlined_constants("m.py", elsewhere, elsewhere.replace("pi *", "3.14 *"), files()) == []
    local = "LIMIT = 3\n\n\ndef f(LIMIT=LIMIT):\n    LIMIT = 4\n    return LIMIT\n"
    assert inlined_constants("m.py", local, local.replace("return LIMIT", "return 5"), files()) == []
    rebound = "N = 1\nN = 2\n\n\ndef f():\n    return N\n"
    assert inlined_constants("m.py", rebound, rebound.replace("return N", "return 3"), files()) == []


def test_text_that_does_not_parse_or_is_not_python_finds_nothing() -> None:
    assert inlined_constants("convert.py", CONVERT, "def (:", files(units=UNITS)) == []
    assert inlined_constants("notes.txt", "A = 1", "A = 2", files()) == []


def test_a_negative_literal_in_the_function_is_read_not_a_crash() -> None:
    # found by bench_reallib on parse: `return -1` in a method crashed the cycle (UnaryOp has no value)
    old = "LIMIT = 3\n\n\ndef f(x):\n    if x < 0:\n        return -1\n    return x * LIMIT\n"
    new = old.replace("x * LIMIT", "x * -3")
    (found,) = inlined_constants("m.py", old, new, files())
    assert found.name == "LIMIT"
    assert inlined_constants("m.py", old, old.replace("return -1", "return -2"), files()) == []
