"""f-strings a model re-quoted so they nest their own quote (valid only from Python 3.12) are given
the other quote back when that makes the text parse."""

from __future__ import annotations

import ast
import sys

import pytest

from autod.act.definition import replace_definition
from autod.act.quotes import requote

NESTED = "def full_name(user):\n    return f'{user['first']} {user['last']}'\n"


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="PEP 701: nested quotes parse from 3.12")
def test_a_nested_quote_fstring_is_requoted():
    with pytest.raises(SyntaxError):
        ast.parse(NESTED)
    assert requote(NESTED) == "def full_name(user):\n    return f\"{user['first']} {user['last']}\"\n"


def test_text_that_needs_no_requote_or_cannot_be_helped_is_left_alone():
    assert requote("x = f'{a}' + 'b'\n") is None
    assert requote("x = f'{d['k']} \"q\"'\n") is None  # both quotes inside: not ours to guess
    assert requote("x = (\n") is None


def test_a_whole_definition_edit_with_the_artifact_applies():
    text = "def full_name(user):\n    return f\"{user['first']} {user['lst']}\"\n"
    out = replace_definition("people.py", text, "full_name", NESTED)
    assert "user['last']" in out
    ast.parse(out)
