"""Through `autod run`, a loopback LLM that streams a token at a time, and the real bwrap: a focused
reply that copies the suspect back unchanged is ended once it has copied every line the failing test
ran, the server stops generating, and the fix drawn next lands."""

from __future__ import annotations

import pytest
from daemon import base_config, make_repo, run_cli, start_autod

pytestmark = pytest.mark.slow

# The failing test runs the first branch only; the definition goes on for twenty more lines.
SHIP = '''def shipping(weight, express=False):
    if weight <= 0:
        return 1
    rate = 4
    if express:
        rate = rate * 2
    cost = weight * rate
    if cost > 100:
        cost = 100
    if cost < 5:
        cost = 5
    extra = 0
    if weight > 50:
        extra = 10
    if weight > 80:
        extra = 20
    total = cost + extra
    if express and total < 12:
        total = 12
    rounded = round(total, 2)
    return rounded
'''
SHIP_TEST = '''from src.ship import shipping


def test_nothing_to_ship_costs_nothing():
    assert shipping(0) == 0


def test_a_parcel():
    assert shipping(10) == 40
'''


def reply(code: str) -> str:
    return f"The first branch returns the wrong value.\n\n```python\n{code}```\n\nThat is all.\n"


def test_an_echo_is_ended_where_the_failing_test_stops_running_and_the_next_draw_fixes_it(
    tmp_path, scripted_llm, real_bwrap
):
    repo = make_repo(tmp_path / "repo", {"src/__init__.py": "", "src/ship.py": SHIP,
                                         "tests/test_ship.py": SHIP_TEST})
    scripted_llm.chunk_s = 0.02  # a token every 20 ms, like a small model on a CPU
    scripted_llm.push_text(reply(SHIP))  # the greedy draw: the definition back as it was
    scripted_llm.push_text(reply(SHIP.replace("        return 1\n", "        return 0\n")))
    cfg = base_config(repo, ranked=True, llm={"reply_form": "code", "base_url": scripted_llm.base_url},
                      candidates={"n": 2, "seed": 40, "focused": 2},
                      modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}})
    cfg["checks"]["tests"]["run"] = cfg["checks"]["tests"]["run"].replace(" tests", " tests/test_ship.py")
    d = start_autod(tmp_path, cfg)
    try:
        (r,) = d.wait_reflections(1)
        assert r["status"] == "fixed", r
        first, second = r["candidates"][:2]
        # the echo: ended after the lines the failing test ran (3) and the one after, judged an echo
        assert (first["view"], first.get("echo"), first.get("ended")) == ("focused:1", True, "echo"), first
        assert first["outcome"] in ("unchanged", "no_change"), first
        ended = [x for x in d.records() if x.get("event") == "llm.reply_ended_early"]
        assert ended and ended[0]["lines_read"] == 4 and ended[0]["lines_spliced"] == 17, ended
        # the server was left mid-reply: it sent a fraction of the reply's chunks, and stopped
        echo_stream, fix_stream = scripted_llm.streams[:2]
        assert echo_stream["left"] and echo_stream["chunks"] < echo_stream["of"] // 2, echo_stream
        assert first["reply_tokens"] < fix_stream["of"] // 2
        # the next draw (the same suspect asked again, pointedly) is read back whole and fixes it
        assert second["outcome"] == "fixed" and "        return 0\n" in (repo / "src" / "ship.py").read_text()
        assert all(q.get("stream") is True for q in scripted_llm.requests[:2])
        # `autod show` gives the reply as the model wrote it, cut where autod ended it
        shown = run_cli("show", r["cycle_id"][:8], "-c", str(d.config))
        assert shown.returncode == 0 and "The first branch returns the wrong value." in shown.stdout, shown
        assert "rate = 4" in shown.stdout.split("reply:")[1] and "data:" not in shown.stdout
    finally:
        assert d.stop() == 0
