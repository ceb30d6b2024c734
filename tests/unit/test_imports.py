"""A standard-library module an edit starts to use without importing it gets its import."""

from __future__ import annotations

import ast

from autod.act.imports import add_missing_imports

OLD = '"""Words."""\n\nimport os\n\n\ndef count(text):\n    return len(text.split(" "))\n'


def test_a_module_the_new_code_uses_unimported_is_imported_after_the_last_import():
    new = OLD.replace('len(text.split(" "))', "len(re.findall(r'\\w+', text))")
    out = add_missing_imports(OLD, new)
    assert out.startswith('"""Words."""\n\nimport os\nimport re\n\n\ndef count(text):')
    ast.parse(out)


def test_nothing_is_added_when_the_name_is_a_parameter_a_local_or_already_bound():
    for body in ("def count(text, re):\n    return re.x\n",
                 "def count(text):\n    re = 1\n    return re.real\n",
                 "import re as re\ndef count(text):\n    return re.x\n",
                 "from x import re\ndef count(text):\n    return re.x\n",
                 "re = object()\ndef count(text):\n    return re.x\n"):
        assert add_missing_imports("", body) == body


def test_only_standard_library_modules_and_only_what_the_edit_introduced():
    new = "def f():\n    return numpy.array([1]), json.dumps(1)\n"
    assert add_missing_imports("", new) == "import json\n\n" + new  # numpy: not the stdlib's to add
    old = "def f():\n    return math.pi\n"  # already broken before the edit: not autod's to fix
    assert add_missing_imports(old, old + "\ndef g():\n    return math.e\n").count("import") == 0


def test_a_file_without_imports_gets_it_after_its_docstring_and_future_import():
    old = '"""Doc."""\nfrom __future__ import annotations\n\nX = 1\n'
    new = old + "\ndef f():\n    return textwrap.dedent('x')\n"
    out = add_missing_imports(old, new)
    assert out.startswith('"""Doc."""\nfrom __future__ import annotations\nimport textwrap\n\nX = 1\n')
