"""A definition whose docstring holds a Markdown example fence, fixed through `autod run` and a loopback
LLM: the model's whole-definition reply is read whole, not cut at the docstring's inner fence and
judged a copy of the prompt."""

from __future__ import annotations

from pathlib import Path

import pytest
from daemon import Autod, base_config, git, write_config

pytestmark = pytest.mark.slow

BUGGY = '''def add(a, b):
    """The sum of a and b.

    ```pycon
    >>> add(2, 3)
    5
    ```
    """
    return a - b


def mul(a, b):
    return a * b
'''


def reply(source: str) -> str:
    definition = source.split("\n\n\n")[0]
    return f"add subtracts; it must add.\n\n### src/calc.py · add\n```python\n{definition}\n```\n"


@pytest.mark.parametrize("focused", [1, 0], ids=["suspect prompt", "wide prompt"])
def test_a_fix_to_a_definition_with_a_fenced_docstring_is_read_whole_and_lands(
    tmp_path, calc_repo: Path, scripted_llm, real_bwrap, focused
):
    (calc_repo / "src" / "calc.py").write_text(BUGGY)
    git(calc_repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qam", "doc example")
    scripted_llm.push_text(reply(BUGGY.replace("a - b", "a + b")))
    cfg = base_config(calc_repo, ranked=True, candidates={"n": 1, "focused": focused},
                      modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}})
    cfg["llm"]["base_url"] = scripted_llm.base_url
    cfg["state_dir"] = str(tmp_path / "state")
    config = write_config(tmp_path / "autod.yaml", cfg)
    d = Autod(config, log_file=tmp_path / "state" / "logs" / "autod.jsonl").start()
    try:
        (r,) = d.wait_reflections(1)
        assert [c["outcome"] for c in r["candidates"]][:1] == ["fixed"], r
        assert r["status"] == "fixed", r
        assert (calc_repo / "src" / "calc.py").read_text() == BUGGY.replace("a - b", "a + b")
        prompt = scripted_llm.requests[0]["messages"][-1]["content"]
        assert "````python\ndef add(a, b):" in prompt  # fenced longer than the docstring's fence
        assert ("The bug is most likely in this definition, `add`" in prompt) == bool(focused)
    finally:
        assert d.stop() == 0
