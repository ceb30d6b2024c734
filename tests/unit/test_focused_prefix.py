"""Every focused prompt of a cycle opens with the same text, so a server that keeps the prompt it last
read (llama.cpp's slot cache, vLLM's prefix cache, OpenAI's prompt caching) reads only each draw's own
part: the system message, the failure, the diff and what memory holds first; the values, the suspect
and the question after them. Checked over generated cycles: suspects with and without values, value
groups of one value and of several, with and without a diff and memory, and the pointed re-ask."""

from __future__ import annotations

import os
import random

from autod.candidates.reask import pointed_messages
from autod.events import Event, EventKind
from autod.modes.debug import DebugMode

SEED = int(os.environ.get("AUTOD_TEST_SEED", "20261128"))
WORDS = ["total", "rows", "parse", "value", "None", "assert", "==", "+", "(", ")", "`", "```", "\n", "    "]


def text(rng: random.Random, lo: int, hi: int) -> str:
    return "".join(rng.choice(WORDS) + rng.choice([" ", "", "\n"]) for _ in range(rng.randint(lo, hi)))


def cycle(rng: random.Random) -> tuple[Event, list[dict[str, str]]]:
    """One failure's focused views, as DebugMode.context builds them (the same excerpt, diff and memory
    in each)."""
    shared = {"excerpt": text(rng, 5, 60), "diff": text(rng, 0, 30) if rng.random() < 0.5 else "",
              "memory": text(rng, 1, 20) if rng.random() < 0.5 else ""}
    views: list[dict[str, str]] = []
    for k in range(rng.randint(1, 4)):
        values = f"LIMIT_{k} = {rng.randint(0, 9)}\n" if rng.random() < 0.5 else ""
        views.append({**shared, "path": f"pkg/m{k}.py", "symbol": f"f{k}",
                      "code": f"def f{k}():\n" + text(rng, 1, 20), "values": values,
                      "reads": f"pkg/m{k}.py\tLIMIT_{k}" if values else "",
                      "ran_to": str(rng.randint(0, 5))})
    for j in range(rng.randint(0, 2)):
        names = [f"V{j}_{i}" for i in range(rng.randint(1, 3))]
        views.append({**shared, "path": "pkg/c.py", "symbol": names[0], "read_by": f"f{j}",
                      "reads": "\n".join(f"pkg/c.py\t{n}" for n in names),
                      "blocks": "\n".join(f"{n} = {rng.randint(0, 9)}" for n in names)})
    event = Event(source="check:tests", kind=EventKind.CHECK_FAILED, summary="check tests failed",
                  fingerprint="fp", payload={"check": "tests", "excerpt": shared["excerpt"]})
    return event, views


def prefix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def test_every_focused_prompt_of_a_cycle_shares_its_system_message_and_the_failure_before_what_differs():
    rng = random.Random(SEED)
    mode = DebugMode()
    for _ in range(300):
        event, views = cycle(rng)
        prompts = [mode.messages(event, v, []) for v in views]
        pointed = [pointed_messages(mode.messages(event, v, []), v) for v in views if not v.get("read_by")]
        systems = {p[0]["content"] for p in prompts + pointed}
        assert len(systems) == 1, "a focused draw's system message differs: the server re-reads the prompt"
        # a suspect asked again another way reads its first prompt whole before the new question
        for q, v in zip(pointed, [v for v in views if not v.get("read_by")], strict=True):
            assert q[-1]["content"].startswith(mode.messages(event, v, [])[-1]["content"].rstrip("\n"))
        if len(prompts) < 2:
            continue
        users = [p[-1]["content"] for p in prompts]
        common = users[0]
        for u in users[1:]:
            common = prefix(common, u)
        shared = views[0]
        # the whole failure, the diff and memory are in the part every draw shares
        assert shared["excerpt"] in common
        if shared["diff"]:
            assert shared["diff"] in common
        if shared["memory"]:
            assert shared["memory"].strip() in common
        # and nothing of a draw's own: no suspect's code, no value
        for v in views:
            own = v.get("code") or v.get("blocks") or ""
            assert own.strip() not in common
