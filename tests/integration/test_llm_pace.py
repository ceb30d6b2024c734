"""A server's reading speed against its writing speed, measured on the replies it streams to a real
loopback server that reads a prompt's new part and writes a reply at set speeds (autod.planner.pace):
the ratio the order prices prompt tokens at is that server's."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from autod.config.settings import LLMConfig
from autod.events import Event, EventKind
from autod.planner import PlanRequest
from autod.planner.earlystop import Watched
from autod.planner.llm import LLMPlanner

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from llmserver import CHUNK_CHARS, ScriptedLLM, scripted_llm_fixture  # noqa: E402

pytestmark = pytest.mark.slow

llm = pytest.fixture(scripted_llm_fixture)

CODE = "def total(values):\n" + "".join(f"    step_{i} = values[{i}] * {i}\n" for i in range(12)) + \
    "    return sum(values) + 1"
FIXED = CODE.replace("sum(values) + 1", "sum(values)")


def request(k: int) -> PlanRequest:
    event = Event(source="check:tests", kind=EventKind.CHECK_FAILED, summary="tests failed", fingerprint="f")
    # ~1.5k characters of failure, each draw's its own: the new part of its prompt
    failure = "".join(f"E   assert total([{k}, {i}]) == {k + i}  (run {k})\n" for i in range(40))
    messages = [{"role": "system", "content": "You fix bugs."},
                {"role": "user", "content": f"{failure}\nThe bug is in `total`:\n\n```python\n{CODE}\n```\n"}]
    return PlanRequest(mode="auto-debug", event=event, messages=messages, form="code", temperature=0.0,
                       paths=("src/calc.py",), symbols={"src/calc.py": ("total",)}, watch=Watched(CODE))


def measured(base_url: str, draws: int, **cfg: Any) -> float | None:
    async def go() -> float | None:
        planner = LLMPlanner(LLMConfig(base_url=base_url, reply_form="code", **cfg), None,
                             retry_base_s=0.01, retry_max_s=0.05)
        try:
            assert planner.read_per_generated is None  # nothing measured yet: the order's constant
            for k in range(draws):
                result = await planner.plan(request(k))
                assert result.plan.edits
            return planner.read_per_generated
        finally:
            await planner.aclose()

    return asyncio.run(asyncio.wait_for(go(), timeout=60))  # hang guard only


@pytest.mark.parametrize("read_s, write_s, chars_per_token", [
    (0.001, 0.01, 4), (0.0002, 0.02, 4),
    (0.001, 0.01, 2),  # a tokenizer denser on the prompt than on the reply's code: its tokens differ
])
def test_the_ratio_is_the_server_s_reading_against_its_writing_per_character(
        llm: ScriptedLLM, read_s: float, write_s: float, chars_per_token: float):
    """The order prices a prompt's characters and a reply's in one unit (autod.planner.pace): the ratio is
    the time a character of prompt takes to read against the time one of reply takes to write. Counted
    in the server's tokens (a prompt token here holds `chars_per_token` characters, a streamed chunk
    CHUNK_CHARS), it came out at read_s / write_s whatever the characters."""
    llm.behave(read_s_per_token=read_s, chunk_s=write_s, chars_per_token=chars_per_token)
    for _ in range(3):
        llm.push_text(f"```python\n{FIXED}\n```\n")
    ratio = measured(llm.base_url, 3, prefill="none")
    assert ratio is not None
    # each reply's new prompt part (its failure lines) read, then its chunks written
    per_char = (read_s / chars_per_token) / (write_s / CHUNK_CHARS)
    assert per_char / 1.6 < ratio < per_char * 1.6, (ratio, per_char)
