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


SHORT = "def inc(x):\n    return x + 2"  # a reply of a few tokens: its end is much of its time
SHORT_FIXED = SHORT.replace("x + 2", "x + 1")


def request(k: int, code: str = CODE) -> PlanRequest:
    event = Event(source="check:tests", kind=EventKind.CHECK_FAILED, summary="tests failed", fingerprint="f")
    # ~1.5k characters of failure, each draw's its own: the new part of its prompt
    failure = "".join(f"E   assert total([{k}, {i}]) == {k + i}  (run {k})\n" for i in range(40))
    name = code.split("(")[0].removeprefix("def ")
    asked = f"{failure}\nThe bug is in `{name}`:\n\n```python\n{code}\n```\n"
    messages = [{"role": "system", "content": "You fix bugs."}, {"role": "user", "content": asked}]
    return PlanRequest(mode="auto-debug", event=event, messages=messages, form="code", temperature=0.0,
                       paths=("src/calc.py",), symbols={"src/calc.py": (name,)}, watch=Watched(code))


def measured(base_url: str, draws: int, codes: tuple[str, ...] = (CODE,), **cfg: Any) -> float | None:
    async def go() -> float | None:
        planner = LLMPlanner(LLMConfig(base_url=base_url, reply_form="code", **cfg), None,
                             retry_base_s=0.01, retry_max_s=0.05)
        try:
            assert planner.read_per_generated is None  # nothing measured yet: the order's constant
            for k in range(draws):
                result = await planner.plan(request(k, codes[k % len(codes)]))
                assert result.plan.edits
            return planner.read_per_generated
        finally:
            await planner.aclose()

    return asyncio.run(asyncio.wait_for(go(), timeout=60))  # hang guard only


@pytest.mark.parametrize("read_s, write_s, chars_per_token", [
    # a chunk's time well above what a loaded machine adds to each (0.01 s read 0.195 for 0.35 once)
    (0.002, 0.02, 4), (0.0002, 0.02, 4),
    (0.002, 0.02, 2),  # a tokenizer denser on the prompt than on the reply's code: its tokens differ
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


def test_a_short_reply_s_end_does_not_pass_for_the_server_s_writing_speed(llm: ScriptedLLM):
    """A reply's end (its stop token, the server's last chunk) costs the same whatever its length: a
    reply of a few tokens (a leg one, a value's one line) is mostly its end, and as a reading of writing
    speed made reading look cheap (0.19 where longer replies said 0.27 on llama-cpp-python, at the start
    of every cycle of the held-out benches). Such replies are no reading."""
    read_s, write_s, end_s = 0.001, 0.02, 0.1
    llm.behave(read_s_per_token=read_s, chunk_s=write_s, end_s=end_s)
    for k in range(5):  # short, long, short, long, short
        llm.push_text(f"```python\n{SHORT_FIXED if k % 2 == 0 else FIXED}\n```\n")
    ratio = measured(llm.base_url, 5, (SHORT, CODE), prefill="none")
    assert ratio is not None
    # the long replies' characters: ~330 of them, their end a tenth of their time
    per_char = (read_s / 4) / (write_s / CHUNK_CHARS)
    assert per_char / 1.35 < ratio < per_char * 1.6, (ratio, per_char)
