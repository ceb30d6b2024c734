"""A context window learnt of a server that states none is kept in the state db (autod.runtime.windows):
a restart or a config reload does not pay a cut reply to learn it again."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from structlog.testing import capture_logs

from autod.config.settings import LLMConfig
from autod.errors import ContextTooLong
from autod.events import Event, EventKind
from autod.planner import CHARS_PER_TOKEN, PlanRequest
from autod.planner.llm import LLMPlanner
from autod.planner.window import Window
from autod.runtime.windows import KEEP_S, KEY, KeptWindows
from autod.stores.state import State

URL = "http://llm.test/v1"
PLAN = {"summary": "s", "edits": [], "verify": [], "report": None, "need": []}


def reply(finish: str, prompt: int, completion: int) -> httpx.Response:
    return httpx.Response(200, json={
        "choices": [{"message": {"role": "assistant", "content": json.dumps(PLAN)}, "finish_reason": finish}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
    })


def planner(answers: list[httpx.Response], memory: KeptWindows, props: httpx.Response | None = None,
            **cfg: object) -> LLMPlanner:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            if request.url.path.endswith("props") and props is not None:
                return props
            return httpx.Response(404 if request.url.path.endswith("props") else 200, json={"data": []})
        return answers.pop(0) if len(answers) > 1 else answers[0]

    p = LLMPlanner(LLMConfig(base_url=URL, model="m", max_tokens=1500, **cfg), None,  # type: ignore[arg-type]
                   transport=httpx.MockTransport(handler))
    p.remember_windows(memory)
    return p


def request(chars: int = 3000) -> PlanRequest:
    event = Event(source="check:t", kind=EventKind.CHECK_FAILED, summary="failed", fingerprint="f")
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u" * chars}]
    return PlanRequest(mode="auto-debug", event=event, messages=messages)


def test_a_window_learnt_from_a_cut_reply_is_recalled_by_the_next_planner_over_the_same_state(tmp_path: Path):
    state = State(tmp_path / "state.db")

    async def go() -> tuple[int | None, int | None]:
        first = planner([reply("length", 7400, 790)], KeptWindows(state))
        with pytest.raises(ContextTooLong):
            await first.plan(request())
        # a restart (or a reload: configure builds a new planner) over the same state db
        second = planner([reply("stop", 10, 10)], KeptWindows(state))
        with capture_logs() as logs:
            window = await second.context_window()
        assert any(x["event"] == "llm.context_size_remembered" for x in logs)
        fresh = planner([reply("stop", 10, 10)], KeptWindows(State(tmp_path / "other.db")))
        return window, await fresh.context_window()

    assert asyncio.run(go()) == (8190, None)


def test_the_servers_own_word_and_the_config_come_before_a_kept_window(tmp_path: Path):
    state = State(tmp_path / "state.db")
    memory = KeptWindows(state)

    async def go() -> tuple[int | None, int | None]:
        await memory.keep(f"{URL}|m", Window(4096))
        stated = planner([reply("stop", 1, 1)], memory, props=httpx.Response(200, json={"n_ctx": 16384}))
        configured = planner([reply("stop", 1, 1)], memory, context_tokens=32768)
        return await stated.context_window(), await configured.context_window()

    assert asyncio.run(go()) == (16384, 32768)


def test_a_kept_window_is_trusted_for_a_day_and_garbage_in_the_state_db_is_ignored(tmp_path: Path):
    state = State(tmp_path / "state.db")
    now = [1_000_000.0]
    memory = KeptWindows(state, clock=lambda: now[0])

    async def go() -> list[Window | None]:
        await memory.keep("k", Window(8192, 2.5))
        out = [await memory.recall("k")]
        now[0] += KEEP_S + 1  # the server may have been restarted with a larger context since
        out.append(await memory.recall("k"))
        for junk in ("8192", {"tokens": True, "at": now[0]}, {"tokens": 100, "at": now[0]}, {"tokens": 9000}):
            state.set_kv(KEY + "junk", junk)
            out.append(await memory.recall("junk"))
        # a ratio no tokenizer has (or none, as an older autod kept it): the window alone
        for ratio in (0.01, "2.5", True, None):
            state.set_kv(KEY + "odd", {"tokens": 8192, "at": now[0], "chars_per_token": ratio})
            out.append(await memory.recall("odd"))
        return out

    assert asyncio.run(go()) == [Window(8192, 2.5), None, None, None, None, None, *[Window(8192, None)] * 4]


def test_the_characters_per_token_a_cut_reply_measured_are_kept_with_the_window_for_the_next_planner(
    tmp_path: Path,
):
    """Recalled without its ratio, the window is budgeted at CHARS_PER_TOKEN, which code overruns in
    most tokenizers: the restart's first prompt would overflow it again (a whole prompt's evaluation)."""
    state = State(tmp_path / "state.db")

    async def go() -> tuple[float | None, float | None]:
        first = planner([reply("length", 7400, 790)], KeptWindows(state))
        with pytest.raises(ContextTooLong):
            await first.plan(request(18_000))  # 18,001 characters in 7,400 tokens: 2.43 a token
        second = planner([reply("stop", 10, 10)], KeptWindows(state))
        await second.context_window()
        return first.chars_per_token, second.chars_per_token

    measured, recalled = asyncio.run(go())
    assert measured is not None and measured < CHARS_PER_TOKEN
    assert recalled == pytest.approx(measured, abs=0.001)


def test_a_token_count_no_tokenizer_gives_does_not_move_the_ratio():
    """A server whose usage is garbage (1 token for 18k characters, or a billion) would have every
    prompt sent whole and refused, or cut to nothing: such counts are not measured."""
    from autod.planner.window import ServerWindow

    async def nothing() -> int | None:
        return None

    window = ServerWindow(URL, "k", None, nothing)
    messages = [{"role": "user", "content": "u" * 18_000}]
    for count in (1, 10**9, 0, None):
        window.measure(messages, count)
    assert window.chars_per_token is None
    window.measure(messages, 6000)
    window.measure(messages, 1)  # and a later garbage count leaves the measured one
    assert window.chars_per_token == 3.0
