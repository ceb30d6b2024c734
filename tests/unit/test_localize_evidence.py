"""Line-level evidence in the prompt: long definitions as the part the failing tests ran, the lines only
they ran named under their block."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
import yaml

from autod.config.settings import load_config
from autod.localize import slices
from autod.localize.context import localize
from autod.localize.index import build_index
from autod.localize.spectrum import Spectrum, scores
from autod.safety.boundary import Boundary

# a 230-line function: its slip (line 215) far past the first 100 lines, in an `else:` branch
BODY = ["def long_one(x, y=0):", '    """Long on purpose."""', "    if x < 0:", "        x = -x"]
BODY += [f"    x = x + {i}" for i in range(200)]
BODY += ["    if y:", "        x = x * 2", "    else:", "        for k in range(3):",
         "            x = x - 1  # the slip", "        x = x + y", "    return x"]
LONG_SRC = "\n".join(BODY) + "\n"
SLIP = BODY.index("            x = x - 1  # the slip") + 1
SIG = 1
OUTPUT = """\
FAILED tests/test_big.py::test_long - assert 1 == 2
"""
TEST = "from big import long_one\n\n\ndef test_long():\n    assert long_one(1) == 2\n"


def workspace(tmp_path: Path) -> tuple[Path, object, Boundary]:
    ws = tmp_path / "ws"
    (ws / "tests").mkdir(parents=True)
    (ws / "big.py").write_text(LONG_SRC)
    (ws / "tests" / "test_big.py").write_text(TEST)
    cfg = ws.parent / "autod.yaml"
    cfg.write_text(yaml.safe_dump({"workspace": str(ws), "state_dir": str(ws.parent / "state")}))
    s = load_config(cfg)
    return ws, s, Boundary.for_settings(s)


def evidence(failing: list[int], passing: list[int]) -> Spectrum:
    """big.py run by one failing and one passing test."""
    lines: dict[int, tuple[int, int]] = {}
    for ln in failing:
        lines[ln] = (1, 0)
    for ln in passing:
        ef, _ = lines.get(ln, (0, 0))
        lines[ln] = (ef, 1)
    return Spectrum({("big.py", "long_one"): 1.0}, {"big.py": lines}, total_failed=1)


def ran_else_branch() -> tuple[list[int], list[int]]:
    straight = [3, *range(5, 205), 205]
    failing = [*straight, 207, 208, 209, 210, 211]  # y falsy: the else branch, the loop, the slip
    passing = [*straight, 206, 211]  # y truthy
    return failing, passing


def test_the_recorder_result_keeps_how_many_failing_and_passing_tests_ran_each_line(tmp_path):
    ws, _, b = workspace(tmp_path)
    index = build_index(b)
    path = str(ws / "big.py")
    doc = {"tests": {
        "t::fails": {"failed": True, "lines": {path: [3, 207, SLIP]}},
        "t::passes": {"failed": False, "lines": {path: [3, 206]}},
    }}
    found = scores(index, b, doc)
    assert found[("big.py", "long_one")] == 1.0  # still a dict of function scores
    assert found.lines["big.py"][3] == (1, 1) and found.lines["big.py"][SLIP] == (1, 0)
    assert found.failing_only("big.py", 1, 300) == [207, SLIP]
    assert found.failing_ran("big.py", 1, 300) == {3: found.line_score("big.py", 3), 207: 1.0, SLIP: 1.0}


def test_a_long_definition_is_shown_as_what_the_failing_tests_ran_under_its_signature(tmp_path):
    _ws, s, b = workspace(tmp_path)
    failing, passing = ran_else_branch()
    found = asyncio.run(localize(s, b, text=OUTPUT, locations=[], last_green=None, budget_tokens=4000,
                                 spectrum=evidence(failing, passing)))
    (entry,) = [e for e in found.entries if e["symbol"] == "long_one"]
    assert entry["part_of"] == f"1-{len(BODY)}"  # never rewritten whole
    block = found.code.split("### big.py · long_one", 1)[1].split("\n###", 1)[0]
    code = re.search(r"```python\n(.*?)\n```", block, re.S)
    assert code is not None
    shown = code.group(1).splitlines()
    assert shown[0] == BODY[SIG - 1]  # the signature
    assert BODY[SLIP - 1] in shown  # the slip, 210 lines in
    # with the block headers above it, so the indentation reads
    assert "    else:" in shown and "        for k in range(3):" in shown
    assert len(shown) <= slices.SLICE_LINES + 5
    # every line shown is the file's own text, or a comment saying what was left out
    assert all(ln in BODY or re.fullmatch(r"\s*# \.\.\. lines? \d+(-\d+)? not shown", ln) for ln in shown)
    assert "what the failing tests ran" in block


@pytest.mark.slow
def test_a_slice_that_reaches_both_ends_is_still_never_rewritten_whole(tmp_path):
    _ws, s, b = workspace(tmp_path)
    ran = [3, 4, 205, 207, 208, 209, 210, len(BODY)]  # the first and the last line among them
    found = asyncio.run(localize(s, b, text=OUTPUT, locations=[], last_green=None, budget_tokens=4000,
                                 spectrum=evidence(ran, [])))
    (entry,) = [e for e in found.entries if e["symbol"] == "long_one"]
    assert entry["lines"] == f"1-{len(BODY)}" and entry["part_of"] == f"1-{len(BODY)}"


def test_without_line_coverage_a_long_definition_is_still_a_window(tmp_path):
    _ws, s, b = workspace(tmp_path)
    found = asyncio.run(localize(s, b, text=OUTPUT, locations=[], last_green=None, budget_tokens=4000,
                                 spectrum={("big.py", "long_one"): 1.0}))
    (entry,) = [e for e in found.entries if e["symbol"] == "long_one"]
    lo, hi = map(int, entry["lines"].split("-"))
    assert hi - lo + 1 == 100 and "what the failing tests ran" not in found.code


def test_the_lines_only_the_failing_tests_ran_are_named_under_their_block():
    lines = ["def f(x):", "    if x:", "        return 1", "    return 2"]
    ev = Spectrum({}, {"m.py": {1: (1, 1), 2: (1, 1), 3: (1, 0), 4: (0, 1)}}, total_failed=1)
    note = slices.marks(ev, "m.py", lines, [1, 2, 3, 4])
    assert note == "Only the failing tests ran these lines of it:\n  3: return 1"


def test_no_line_is_named_when_the_failing_tests_alone_ran_the_whole_block():
    lines = ["def f(x):", "    return x"]
    ev = Spectrum({}, {"m.py": {1: (1, 0), 2: (1, 0)}}, total_failed=1)
    assert slices.marks(ev, "m.py", lines, [1, 2]) == ""
    assert slices.marks(None, "m.py", lines, [1, 2]) == ""


def test_a_slice_holds_each_line_with_its_whole_statement_and_the_headers_above_it():
    src = [
        "def f(a):",  # 1
        "    try:",  # 2
        "        total = compute(",  # 3
        "            a,",  # 4
        "        )",  # 5
        "    except ValueError:",  # 6
        "        total = 0",  # 7
        "    finally:",  # 8
        "        log(a)",  # 9
        "    return total",  # 10
    ]
    tree = slices.parse_lines(src)
    shown = slices.executed_slice(src, tree, 1, 1, 10, {4: 1.0, 9: 0.5})
    assert shown == [1, 2, 3, 4, 5, 8, 9]  # the whole call, `try:` above it, `finally:` above log(a)
    assert slices.render_slice(src, shown, 10).splitlines()[-1] == "    # ... line 10 not shown"


def test_a_slice_keeps_to_its_budget_most_suspicious_lines_first():
    src = ["def f():"] + [f"    x{i} = {i}" for i in range(40)]
    tree = slices.parse_lines(src)
    ran = {ln: 0.2 for ln in range(2, 42)}
    ran[30] = 1.0
    shown = slices.executed_slice(src, tree, 1, 1, 41, ran, budget=5)
    assert shown == [1, 2, 3, 4, 30]


def test_the_ranking_runs_off_the_event_loop(tmp_path, monkeypatch):
    """Ranking resolves calls and values over the whole index: CPU work that must not stall the daemon."""
    import threading

    from autod.localize import context

    _ws, s, b = workspace(tmp_path)
    seen: list[bool] = []
    real = context.rank

    def rank(*args, **kwargs):
        seen.append(threading.current_thread() is threading.main_thread())
        return real(*args, **kwargs)

    monkeypatch.setattr(context, "rank", rank)
    asyncio.run(localize(s, b, text=OUTPUT, locations=[], last_green=None, budget_tokens=4000))
    assert seen == [False]
