"""A long suspect's greedy draw in two legs (`llm.point_lines`), against a loopback server that continues
the answer it is given, as a model does: the server is asked which line first, then writes the code
from that line alone, and the plan read is the whole definition with the change."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import pytest
import structlog

TESTS = Path(__file__).resolve().parents[1]
for where in (TESTS, TESTS / "unit"):
    if str(where) not in sys.path:
        sys.path.insert(0, str(where))

from llmserver import ScriptedLLM, scripted_llm_fixture  # noqa: E402
from test_llm_prefill import plan, reply  # noqa: E402
from test_llm_prefill import request as prefill_request  # noqa: E402

from autod.planner import PlanRequest, point  # noqa: E402
from autod.planner.earlystop import Watched  # noqa: E402

pytestmark = pytest.mark.slow

llm = pytest.fixture(scripted_llm_fixture)

CODE = '''def checksum(values, *, seed=0):
    """A rolling checksum of `values`.

    ```pycon
    >>> checksum([1, 2])
    5
    ```
    """
    total = seed
    for i, v in enumerate(values):
        total = total * 31 + v
        total &= 0xFFFFFFFF
        if total < 0:
            total = -total
        if i % 1000 == 0:
            total ^= i
        if v is None:
            raise ValueError("no value")
    total += len(values) + 1
    return total'''
SLIP = "    total += len(values) + 1"
FIXED = CODE.replace(SLIP, "    total += len(values)")
AT = CODE.split("\n").index(SLIP)
ASKED = point.ASK.format(name="checksum")  # leg one's question names the definition



def request(code: str, temperature: float = 0.0, seed: int | None = None) -> PlanRequest:
    return prefill_request(code, temperature, symbol="checksum", path="src/sums.py", seed=seed)

def test_the_line_is_asked_first_and_the_code_is_written_from_it(llm: ScriptedLLM):
    llm.push_text(f"{ASKED}````python\n{SLIP}\n")  # leg one: the line, then the stop sequence
    llm.push_text(reply(FIXED))  # leg two: answered from the named line on
    with structlog.testing.capture_logs() as logs:
        (result,) = plan(llm.base_url, request(CODE), prefill="chatml", point_lines=8)
    assert llm.paths == ["/v1/completions", "/v1/completions"]
    one, two = (r["prompt"] for r in llm.requests)
    assert one.endswith(f"<|im_start|>assistant\n{ASKED}````python\n")
    assert llm.requests[0]["stop"] == ["\n"] and llm.requests[0]["max_tokens"] == point.LEG_ONE_TOKENS
    assert two.endswith("<|im_start|>assistant\n" + point.begun(CODE, AT))
    assert next(e for e in logs if e["event"] == "llm.line_named")["line"] == AT
    # what was generated in leg two: the named line, and the two after it until back on the definition
    rest = reply(FIXED)[len(point.begun(CODE, AT)):]
    head = CODE.split("\n    total = seed")[0]
    assert llm.streams[-1]["of"] <= len(rest) // 7 + 4 < (len(reply(FIXED)) - len(head)) // 7
    (edit,) = result.plan.edits
    assert edit.symbol == "checksum" and edit.replace.strip("\n") == FIXED


def test_an_echo_from_the_named_line_is_ended_two_lines_on_and_read_as_no_change(llm: ScriptedLLM):
    llm.push_text(f"{ASKED}````python\n        total &= 0xFFFFFFFF\n")
    llm.push_text(reply(CODE))
    (result,) = plan(llm.base_url, request(CODE), prefill="chatml", point_lines=8)
    assert len(llm.requests) == 2 and result.ended == "echo" and not result.plan.edits


def test_a_definition_shorter_than_the_default_or_the_setting_off_is_asked_in_one_leg(llm: ScriptedLLM):
    llm.push_text(reply(FIXED))
    llm.push_text(reply(FIXED))
    first, second = plan(llm.base_url, request(CODE), request(CODE), prefill="chatml")  # the default: 24
    head = CODE.split("\n    total = seed")[0]
    assert len(llm.requests) == 2 and all(r["prompt"].endswith(f"{head}\n") for r in llm.requests)
    assert first.plan.edits and second.plan.edits
    llm.push_text(reply(FIXED))
    (third,) = plan(llm.base_url, request(CODE), prefill="chatml", point_lines=0)
    assert len(llm.requests) == 3 and third.plan.edits


def test_a_first_leg_that_names_no_line_leaves_the_draw_begun_with_the_head(llm: ScriptedLLM):
    llm.push_text(f"{ASKED}````python\nprint('the loop never ends')\n")
    llm.push_text(reply(FIXED))
    (result,) = plan(llm.base_url, request(CODE), prefill="chatml", point_lines=8)
    head = CODE.split("\n    total = seed")[0]
    assert llm.requests[1]["prompt"].endswith(f"````python\n{head}\n") and result.plan.edits


def test_a_sampled_draw_names_its_line_by_sampling_and_writes_from_it_at_its_temperature(llm: ScriptedLLM):
    llm.push_text(f"{ASKED}````python\n{SLIP}\n")
    llm.push_text(reply(FIXED))
    sampled = request(CODE, 0.8, seed=7)
    (result,) = plan(llm.base_url, sampled, prefill="chatml", point_lines=8)
    assert llm.paths == ["/v1/completions", "/v1/completions"]
    assert [(r["temperature"], r["seed"]) for r in llm.requests] == [(0.8, 7), (0.8, 7)]
    assert llm.requests[1]["prompt"].endswith("<|im_start|>assistant\n" + point.begun(CODE, AT))
    assert result.plan.edits[0].replace.strip("\n") == FIXED


def test_a_named_line_carrying_a_control_token_never_reaches_the_template(llm: ScriptedLLM):
    """Leg one's answer goes back into leg two's conversation: a line close enough to the definition's
    to be named, but holding `<|im_end|>`, must not become a real turn boundary in a rendered prompt."""
    llm.push_text(f"{ASKED}````python\n{SLIP}<|im_end|>\n")
    llm.push_text(reply(FIXED))
    (result,) = plan(llm.base_url, request(CODE), prefill="chatml", point_lines=8)
    assert point.named(f"{SLIP}<|im_end|>", CODE) == AT  # close enough to be named
    assert llm.paths == ["/v1/completions", "/v1/chat/completions"]  # leg two: never rendered
    assert "<|im_end|>" in llm.requests[1]["messages"][-2]["content"]  # as text, in a JSON string
    assert result.plan.edits[0].replace.strip("\n") == FIXED


def _offered(body: dict) -> list[str]:
    from test_linechoice import offered  # the reader that follows llama.cpp's grammar parser

    return offered(body["grammar"])


def test_leg_one_is_held_to_the_definitions_lines_and_leg_two_is_free(llm: ScriptedLLM):
    """A server that takes `grammar` (llama.cpp's) samples only one of the definition's own lines: a
    test's `assert` or another definition's line can no longer be named, so the draw never goes back
    to the whole copy for that reason."""
    llm.push_text(f"{ASKED}````python\n{SLIP}\n")
    llm.push_text(reply(FIXED))
    with structlog.testing.capture_logs() as logs:
        (result,) = plan(llm.base_url, request(CODE), prefill="chatml", point_lines=8)
    one, two = llm.requests
    lines = [ln.strip() for ln in CODE.split("\n") if ln.strip()]
    assert _offered(one) == list(dict.fromkeys(lines)) and "grammar" not in two
    assert next(e for e in logs if e["event"] == "llm.line_named")["held"] is True
    assert result.named == SLIP.strip() and result.plan.edits


def test_a_line_named_and_written_back_unchanged_is_not_offered_again(llm: ScriptedLLM):
    tried = "total &= 0xFFFFFFFF"
    llm.push_text(f"{ASKED}````python\n{SLIP}\n")
    llm.push_text(reply(FIXED))
    again = request(CODE)
    again.watch = Watched(CODE, tried=(tried, "return total"))
    plan(llm.base_url, again, prefill="chatml", point_lines=8)
    offered = _offered(llm.requests[0])
    assert tried not in offered and "return total" not in offered and SLIP.strip() in offered


def test_a_server_that_refuses_the_grammar_is_asked_again_without_it_and_never_sent_it_again(
    llm: ScriptedLLM,
):
    llm.behave(refuse_grammar=True)  # OpenAI: "Unrecognized request argument supplied: grammar"
    for _ in range(2):
        llm.push_text(f"{ASKED}````python\n{SLIP}\n")
        llm.push_text(reply(FIXED))
    with structlog.testing.capture_logs() as logs:
        first, second = plan(llm.base_url, request(CODE), request(CODE), prefill="chatml", point_lines=8)
    assert ["grammar" in r for r in llm.requests] == [True, False, False, False, False]
    assert llm.paths == ["/v1/completions"] * 5  # the begun reply (prefill) is kept
    assert [e["event"] for e in logs].count("llm.grammar_refused") == 1
    assert first.plan.edits and second.plan.edits


def test_vllm_holds_leg_one_by_its_choice_field_and_the_grammar_it_ignores_changes_nothing(llm: ScriptedLLM):
    """vLLM from 0.12 takes only `structured_outputs`; the lines are offered as the prompt shows them, so
    its answer is a line of the definition, indented, and the server keeps counting as holding leg one."""
    llm.behave(choice_field="structured_outputs")
    llm.push_text(f"{ASKED}````python\n{SLIP.strip()}\n")  # the line written unindented: held, as shown
    llm.push_text(reply(FIXED))
    with structlog.testing.capture_logs() as logs:
        (result,) = plan(llm.base_url, request(CODE), prefill="chatml", point_lines=8)
    one = llm.requests[0]
    shown = [ln for ln in CODE.split("\n") if ln.strip()]
    assert one["structured_outputs"] == {"choice": list(dict.fromkeys(shown))} and "guided_choice" not in one
    assert _offered(one) == [ln.strip() for ln in dict.fromkeys(shown)]  # and llama.cpp's grammar beside it
    assert all(f not in llm.requests[1] for f in ("structured_outputs", "guided_choice", "grammar"))
    assert result.named == SLIP.strip() and result.plan.edits
    assert not [e for e in logs if e["event"] == "llm.choice_field_switched"]


def test_an_older_vllm_is_offered_its_own_choice_field_after_an_answer_outside_the_lines(llm: ScriptedLLM):
    """Before 0.10.2 vLLM ignores `structured_outputs` (and `grammar`): leg one wrote a test's `assert`,
    the draw went whole, and the next leg one carries `guided_choice` alone, which holds it."""
    llm.behave(choice_field="guided_choice")
    llm.push_text(f"{ASKED}````python\nassert checksum([1, 2]) == 5\n")
    llm.push_text(reply(FIXED))
    llm.push_text(f"{ASKED}````python\nassert checksum([1, 2]) == 5\n")  # held now: the first choice
    llm.push_text(reply(FIXED))
    with structlog.testing.capture_logs() as logs:
        first, _ = plan(llm.base_url, request(CODE), request(CODE), prefill="chatml", point_lines=8)
    fields = [[f for f in ("structured_outputs", "guided_choice") if f in r] for r in llm.requests]
    assert fields == [["structured_outputs"], [], ["guided_choice"], []]
    assert [e["event"] for e in logs].count("llm.choice_field_switched") == 1
    named = [e["line"] for e in logs if e["event"] == "llm.line_named"]
    assert named == [None, 0]  # the first draw went whole (and fixed); the second was held to a line
    assert first.plan.edits


KEY = "sk-live-7c1e94b2d05a8f36"  # below: as written, base64-encoded, reversed


@pytest.mark.parametrize("form", [KEY, base64.b64encode(KEY.encode()).decode(), KEY[::-1]])
def test_a_request_holding_a_configured_secret_is_never_sent(llm: ScriptedLLM, form: str):
    """The last line of defence at the wire: a definition's raw text given as the reply's start, leg
    two's start or leg one's grammar (none of which the prompt's redaction sees) would carry a configured
    secret; the endpoint sends no body that holds one, in any of the forms the log redacts."""
    from autod import logs
    from autod.errors import PlanInvalid

    code = CODE.replace("A rolling checksum", f"A rolling checksum (token {form})")
    logs.set_secrets([KEY])
    try:
        with pytest.raises(PlanInvalid, match="configured secret"):
            plan(llm.base_url, request(code), prefill="chatml", point_lines=8)
    finally:
        logs.set_secrets([])
    assert llm.requests == []
