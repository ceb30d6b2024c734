"""A sampled reply given its docstring (autod.planner.splice), against a loopback server that continues
the answer it is given, as a model does: the first leg is ended at the signature, the second begins
after the docstring, and the plan read is the one the whole reply gives."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import structlog

from autod.events import Event, EventKind
from autod.planner import PlanRequest
from autod.planner.earlystop import Watched

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from llmserver import ScriptedLLM, scripted_llm_fixture  # noqa: E402
from test_llm_prefill import plan  # noqa: E402  (the planner against the loopback server)

pytestmark = pytest.mark.slow

llm = pytest.fixture(scripted_llm_fixture)

SIGNATURE = "def mean(values, *, default=0.0):"
DOCSTRING = '''    """The arithmetic mean of `values`.

    ```pycon
    >>> mean([1, 3])
    2.0
    >>> mean([], default=None) is None
    True
    ```
    An empty list has the mean `default`; anything else must hold numbers that can be added
    and divided by an integer.
    """'''
BODY = '''    if not values:
        return default
    return sum(values) / (len(values) + 1)'''
CODE = f"{SIGNATURE}\n{DOCSTRING}\n{BODY}"
FIXED = CODE.replace("(len(values) + 1)", "len(values)")


def reply(code: str) -> str:
    return f"````python\n{code}\n````\n"


def request(temperature: float = 0.8) -> PlanRequest:
    event = Event(source="check:tests", kind=EventKind.CHECK_FAILED, summary="tests failed", fingerprint="f")
    messages = [{"role": "system", "content": "You fix bugs."},
                {"role": "user", "content": f"The bug is in `mean`:\n\n{reply(CODE)}"}]
    return PlanRequest(mode="auto-debug", event=event, messages=messages, form="code", seed=7,
                       temperature=temperature, paths=("src/stats.py",), symbols={"src/stats.py": ("mean",)},
                       watch=Watched(CODE))


def test_a_sampled_reply_is_ended_at_its_signature_and_given_its_docstring(llm: ScriptedLLM):
    llm.chunk_s = 0.01  # a model writes at its own pace: the client can leave mid-reply
    llm.push_text(reply(FIXED))  # the first leg: the model would write the whole definition
    llm.push_text(reply(FIXED))  # the second: it goes on from where it was begun
    with structlog.testing.capture_logs() as logs:
        (result,) = plan(llm.base_url, request(), prefill="chatml")
    assert llm.paths == ["/v1/completions", "/v1/completions"]
    first, second = llm.requests
    assert first["prompt"].endswith("<|im_start|>assistant\n````python\n")
    assert second["prompt"].endswith(f"<|im_start|>assistant\n````python\n{SIGNATURE}\n{DOCSTRING}\n")
    assert first["temperature"] == second["temperature"] == 0.8 and first["seed"] == second["seed"] == 7
    # the first leg was left once the signature was written: the docstring was never generated
    assert llm.streams[0]["left"] or llm.streams[0]["chunks"] < llm.streams[0]["of"]
    assert llm.streams[0]["chunks"] < len(SIGNATURE) // 7 + 4
    assert llm.streams[1]["of"] < len(BODY) // 7 + 6  # the second leg generated the body alone
    assert any(e["event"] == "llm.docstring_given" for e in logs)
    (edit,) = result.plan.edits
    assert edit.symbol == "mean" and edit.replace.strip("\n") == FIXED


def test_a_sampled_reply_that_changes_its_signature_runs_on_and_keeps_the_change(llm: ScriptedLLM):
    changed = FIXED.replace("default=0.0", "default=None")
    llm.push_text(reply(changed))
    (result,) = plan(llm.base_url, request(), prefill="chatml")
    assert llm.paths == ["/v1/completions"]  # one leg: never ended at the signature
    (edit,) = result.plan.edits
    assert edit.replace.strip("\n") == changed


def test_the_greedy_draw_is_still_begun_with_the_whole_head_in_one_request(llm: ScriptedLLM):
    llm.push_text(reply(FIXED))
    (result,) = plan(llm.base_url, request(temperature=0.0), prefill="chatml")
    assert llm.paths == ["/v1/completions"]
    assert llm.requests[0]["prompt"].endswith(f"````python\n{SIGNATURE}\n{DOCSTRING}\n")
    assert result.plan.edits[0].replace.strip("\n") == FIXED


def test_without_prefill_a_sampled_reply_is_asked_whole_on_the_chat_endpoint(llm: ScriptedLLM):
    llm.push_text(reply(FIXED))
    (result,) = plan(llm.base_url, request(), prefill="none")
    assert llm.paths == ["/v1/chat/completions"]
    assert result.plan.edits[0].replace.strip("\n") == FIXED


def test_without_the_early_stop_the_greedy_draw_keeps_its_head_and_a_sample_is_asked_whole(llm: ScriptedLLM):
    llm.push_text(reply(FIXED))
    llm.push_text(reply(FIXED))
    greedy, sampled = plan(llm.base_url, request(temperature=0.0), request(),
                           prefill="chatml", stop_early=False)
    assert llm.paths == ["/v1/completions", "/v1/chat/completions"]  # no watch to end a first leg
    assert llm.requests[0]["prompt"].endswith(f"````python\n{SIGNATURE}\n{DOCSTRING}\n")
    assert greedy.plan.edits[0].replace.strip("\n") == FIXED == sampled.plan.edits[0].replace.strip("\n")
