"""A greedy reply begun with the definition's head (autod.planner.prefill): the head ends where the body's
first statement begins, for every definition of several real libraries, and no text of a prompt
reaches the ChatML rendering as a control token, over generated cases."""

from __future__ import annotations

import ast
import importlib.util
import random
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from autod.planner import prefill

LIBRARIES = ("pydantic", "httpx", "yaml", "structlog", "click", "_pytest", "apscheduler", "watchfiles")
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)

# Qwen2.5's control tokens as its GGUF's vocabulary lists them (token type 3), and other ChatML-family
# models' (Llama 3, Phi, DeepSeek's full-width bars): what a server reads as the token itself
CONTROL_TOKENS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<|fim_prefix|>",
    "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
    "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|user|>", "<|end|>",
    "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>",
    "<|reserved_special_token_0|>",
)


def sources() -> Iterator[tuple[Path, str]]:
    for name in LIBRARIES:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin, name
        for path in sorted(Path(spec.origin).parent.rglob("*.py")):
            yield path, path.read_text(encoding="utf-8", errors="replace")


def definitions() -> Iterator[tuple[str, str]]:
    """Every def and class (nested ones too) of the libraries, with its exact text as a file has it."""
    for path, text in sources():
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        lines = text.split("\n")
        for node in ast.walk(tree):
            if isinstance(node, _DEFS):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                yield f"{path.name}:{node.name}", "\n".join(lines[first - 1 : node.end_lineno])


def _skeleton(node: ast.stmt) -> str:
    """A definition without its body's statements past the docstring: what a head must hold."""
    node = ast.parse(ast.unparse(node)).body[0]
    assert isinstance(node, _DEFS)
    body = node.body
    doc = body[:1] if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
        and isinstance(body[0].value.value, str) else []
    node.body = [*doc, ast.Pass()]
    return ast.dump(node)


@pytest.mark.slow
@pytest.mark.early
def test_a_head_ends_where_the_body_s_first_statement_begins_for_every_definition_of_real_libraries():
    seen = with_head = 0
    for where, code in definitions():
        seen += 1
        head = prefill.head(code)
        if not head:
            continue
        with_head += 1
        assert code.startswith(head + "\n"), where
        rest = code[len(head) + 1 :]
        first = rest.split("\n", 1)[0]
        indent = first[: len(first) - len(first.lstrip())]
        # the head and a `pass` where the rest began: the same decorators, signature and docstring
        closed = textwrap.dedent(f"{head}\n{indent}pass")
        whole = ast.parse(textwrap.dedent(code)).body[0]
        assert _skeleton(ast.parse(closed).body[0]) == _skeleton(whole), where
        # and the rest begins a statement of the body (not inside the docstring or the signature)
        assert first.strip() and not first.lstrip().startswith(("#", ")", '"""', "'''")), where
    assert seen > 5000 and with_head > seen // 2, (seen, with_head)


@pytest.mark.parametrize("code", [
    "def f(x):\n    return x",  # no docstring: the signature alone
    "@a\n@b(1)\ndef f(\n    x=1,\n    y=2,\n):\n    '''doc\n\n    ```pycon\n    >>> f()\n    ```\n"
    "    '''\n    # why\n    return x",
    "    def m(self):\n        \"\"\"A method, as the file indents it.\"\"\"\n        return 1",
    "class C(Base):\n    '''doc'''\n\n    x = 1",
    "def f():\n    \"\"\"doc\"\"\"\n    @wraps(g)\n    def inner():\n        pass\n    return inner",
])
def test_a_head_is_the_lines_up_to_the_first_statement_after_the_docstring(code: str):
    head = prefill.head(code)
    rest = code[len(head) + 1 :]
    assert code.startswith(head + "\n")
    assert rest.lstrip().startswith(("return", "x = 1", "@wraps", "# why"))


@pytest.mark.parametrize("code", [
    "def f(): return 1",  # the body on the def line: nothing to begin with
    "    @classmethod\n    def f(cls) -> bool: ...",  # not the decorator alone either
    "def f(\n    x,\n): return x",
    "def f():\n    '''doc'''; return 1",
    "def f():\n    '''only a docstring'''",
    "x = 1",
    "def f(:\n    pass",
    "def f():\n    pass\ndef g():\n    pass",
])
def test_no_head_where_the_body_cannot_be_told_from_the_head(code: str):
    assert prefill.head(code) == ""
    assert prefill.opening(code) == ""


def test_the_opening_fences_the_head_as_the_prompt_fences_the_definition():
    code = "def f():\n    '''Example:\n\n    ```\n    f()\n    ```\n    '''\n    return 1"
    assert prefill.opening(code) == "````python\n" + code.rsplit("\n", 1)[0] + "\n"


def test_chatml_renders_each_role_and_begins_the_answer():
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "U\nV"}]
    assert prefill.chatml(messages, "```python\ndef f():\n") == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU\nV<|im_end|>\n"
        "<|im_start|>assistant\n```python\ndef f():\n"
    )


def _hostile(rng: random.Random) -> str:
    """Text with a control token's shape somewhere: a real one, or one made up on its pattern."""
    name = "".join(rng.choice("abcdefghij_\u25810123456789") for _ in range(rng.randint(0, 30)))
    bar = rng.choice("|\uff5c")
    token = rng.choice(CONTROL_TOKENS) if rng.random() < 0.6 else f"<{bar}{name}{bar}>"
    filler = "".join(rng.choice("abc <|>\n\t'\"`#\uff5c") for _ in range(rng.randint(0, 60)))
    at = rng.randint(0, len(filler))
    return filler[:at] + token + filler[at:]


def test_no_prompt_text_reaches_the_template_as_a_control_token_over_generated_cases():
    rng = random.Random(20261129)
    refused = 0
    for _ in range(3000):
        messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "the failure, the code"}]
        where = rng.randrange(3)  # the system text, the user's (a file, a check's output) or the code begun
        text = _hostile(rng)
        opening = "```python\ndef f():\n"
        if where == 2:
            opening += text
        else:
            messages[where]["content"] += text
        assert prefill.chatml(messages, opening) is None, (where, text)
        refused += 1
    assert refused == 3000


def test_text_without_a_control_token_s_shape_is_rendered_with_the_template_s_own_tokens_alone():
    rng = random.Random(7)
    for _ in range(2000):
        content = "".join(rng.choice("ab <>|\n`#'\"") for _ in range(rng.randint(0, 80)))
        if prefill.CONTROL.search(content):
            continue
        rendered = prefill.chatml([{"role": "user", "content": content}], "")
        assert rendered is not None
        # the template's three markers, and never one of the text's making
        assert sum(rendered.count(t) for t in CONTROL_TOKENS) == 3


def test_a_role_or_content_autod_does_not_render_is_not_rendered():
    assert prefill.chatml([{"role": "tool", "content": "x"}], "") is None
    assert prefill.chatml([{"role": "user", "content": ["part"]}], "") is None


def test_a_completions_body_keeps_the_parameters_and_drops_the_chat_s_own():
    chat = {"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 0.0, "max_tokens": 9,
            "stream": True, "stop": ["##"], "seed": 1, "response_format": {"type": "json_object"}}
    body = prefill.completions_body(chat, "P")
    assert body == {"model": "m", "temperature": 0.0, "max_tokens": 9, "stream": True, "stop": ["##"],
                    "seed": 1, "prompt": "P"}
