"""The candidate search through `autod run`, a loopback LLM and the real bwrap: several plans per
attempt, each verified on the workspace's mirror; only the winner ever reaches the working tree."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from daemon import CALC_BUGGY, FIX_PLAN, Autod, base_config, run_cli, start_autod
from llmserver import ScriptedLLM

pytestmark = pytest.mark.slow

BROKEN = {**FIX_PLAN, "summary": "half an edit",
          "edits": [{"path": "src/calc.py", "search": "return a - b", "replace": "return a +"}]}


def whole(summary: str, source: str) -> dict:
    edit = {"path": "src/calc.py", "symbol": "add", "replace": source}
    return {**FIX_PLAN, "summary": summary, "edits": [edit]}


WRONG = whole("multiply", "def add(a, b):\n    return a * b\n")
WHOLE_FIX = whole("add must add", "def add(a, b):\n    return a + b")


def start(tmp_path: Path, repo: Path, llm_url: str, **overrides: object) -> Autod:
    cfg = base_config(repo, ranked=True, **overrides)
    return start_autod(tmp_path, cfg, llm_url)


def test_the_first_candidate_that_passes_wins_and_no_other_ever_reaches_the_tree(
    tmp_path, calc_repo, scripted_llm, real_bwrap
):
    for plan in (BROKEN, WRONG, WHOLE_FIX):
        scripted_llm.push_plan(plan)
    d = start(tmp_path, calc_repo, scripted_llm.base_url,
              candidates={"n": 3, "temperature": 0.9, "seed": 40, "focused": 0},  # the wide prompt only
              modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}})
    try:
        (r,) = d.wait_reflections(1)
        assert r["status"] == "fixed", r
        assert [c["outcome"] for c in r["candidates"]] == ["refused", "rolled_back", "fixed"]
        assert "syntax" in r["candidates"][0]["reason"]
        # seeds and temperatures as configured; `n` asked once, then one by one (the server gave one)
        sent = [(q.get("seed"), q.get("temperature"), q.get("n", 1)) for q in scripted_llm.requests]
        assert sent == [(40, 0.0, 1), (41, 0.9, 2), (42, 0.9, 1)]
        # the same prompt for every draw (the server's prompt cache serves them)
        assert len({json.dumps(q["messages"]) for q in scripted_llm.requests}) == 1
        written = [x["event"] for x in d.records() if x.get("event") in ("act.applied", "act.rolled_back")]
        assert written == ["act.applied"]  # the winner alone, once
        assert "return a + b" in (calc_repo / "src" / "calc.py").read_text()
        # `autod show` tells what the model sent and why autod refused it
        shown = run_cli("show", r["cycle_id"][:8], "-c", str(d.config))
        assert shown.returncode == 0, shown.stderr
        assert "candidate 1 (attempt 1, wide prompt, seed 40, temperature 0.0): refused" in shown.stdout
        assert "return a +" in shown.stdout and "syntax" in shown.stdout
        assert "candidate 2" in shown.stdout and "rolled_back" in shown.stdout
        doc = json.loads(run_cli("show", r["cycle_id"], "--json", "-c", str(d.config)).stdout)
        exchanges = [e for e in doc["transcript"] if e["kind"] == "exchange"]
        assert len(exchanges) == 3 and all(e["messages"] for e in exchanges)
        history = json.loads(run_cli("history", "--json", "-c", str(d.config)).stdout)
        assert [c["outcome"] for c in history[0]["candidates"]] == ["refused", "rolled_back", "fixed"]
    finally:
        assert d.stop() == 0


def two_draws_one_attempt(tmp_path: Path, calc_repo: Path, scripted_llm: ScriptedLLM) -> Autod:
    """A daemon in the code form whose single attempt draws n: 2, seeds from 40, sampled at 0.9."""
    return start(tmp_path, calc_repo, scripted_llm.base_url, llm={"reply_form": "code"},
                 candidates={"n": 2, "temperature": 0.9, "seed": 40, "focused": 0},
                 modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}})


def test_a_sampled_draw_that_echoes_the_prompt_is_drawn_again_and_the_fix_after_it_lands(
    tmp_path, calc_repo, scripted_llm, real_bwrap
):
    """n: 2. The second draw copies the prompt's failure section back and proposes nothing: it is in
    the record as no_change, and a third is drawn with the next seed in its place (it used to end
    the attempt, and with it the cycle, rolled back)."""
    block = "### src/calc.py · add\n```python\ndef add(a, b):\n    return a {} b\n```\n"
    scripted_llm.push_text("A guess.\n" + block.format("*"))
    scripted_llm.push_text("## Failure output\ncheck tests failed (exit 1)\n")
    scripted_llm.push_text("add subtracts.\n" + block.format("+"))
    d = two_draws_one_attempt(tmp_path, calc_repo, scripted_llm)
    try:
        (r,) = d.wait_reflections(1)
        assert r["status"] == "fixed", r
        assert [c["outcome"] for c in r["candidates"]] == ["rolled_back", "no_change", "fixed"]
        assert [q.get("seed") for q in scripted_llm.requests] == [40, 41, 42]
        assert "return a + b" in (calc_repo / "src" / "calc.py").read_text()
        assert any(x.get("event") == "candidates.redraw" for x in d.records())
    finally:
        assert d.stop() == 0


def test_a_diff_reply_is_an_edit_under_the_act_rules_through_autod_run(
    tmp_path, calc_repo, scripted_llm, real_bwrap
):
    """Hostile: a unified diff names its own path. One aimed outside the workspace is refused, one that
    edits the failing test is dropped as a quote (and drawn again); a hunk on the code fixes it."""
    def diff(path: str, old: str, new: str) -> str:
        return f"Fix.\n```diff\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-{old}\n+{new}\n```\n"

    (tmp_path / "outside.py").write_text("X = 1\n")
    scripted_llm.push_text(diff("../outside.py", "X = 1", "X = 2"))
    scripted_llm.push_text(diff("tests/test_calc.py", "    assert add(2, 3) == 5", "    assert True"))
    scripted_llm.push_text(diff("src/calc.py", "    return a - b", "    return a + b"))
    d = two_draws_one_attempt(tmp_path, calc_repo, scripted_llm)
    try:
        (r,) = d.wait_reflections(1)
        assert r["status"] == "fixed", r
        assert [c["outcome"] for c in r["candidates"]] == ["refused", "no_change", "fixed"]
        assert "'..' is not allowed" in r["candidates"][0]["reason"]
        assert (tmp_path / "outside.py").read_text() == "X = 1\n"
        assert "assert add(2, 3) == 5" in (calc_repo / "tests" / "test_calc.py").read_text()
        assert "return a + b" in (calc_repo / "src" / "calc.py").read_text()
    finally:
        assert d.stop() == 0


def test_the_focused_prompt_is_sent_first_and_the_whole_context_after_it(
    tmp_path, calc_repo, scripted_llm, real_bwrap
):
    """candidates.focused: 2 before n: 3: two plans from the focused view (the one suspect alone, asked as the
    oracle asks; one prompt, the prompt cache serves both), then the wide one, each view opening at
    temperature 0, each numbering its own seeds (seed + i for its ith draw)."""
    for plan in (WRONG, whole("still wrong", "def add(a, b):\n    return a * b * 1\n"), WHOLE_FIX):
        scripted_llm.push_plan(plan)
    d = start(tmp_path, calc_repo, scripted_llm.base_url, candidates={"n": 3, "seed": 40, "focused": 2},
              modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}})
    try:
        (r,) = d.wait_reflections(1)
        assert r["status"] == "fixed", r
        assert [(c["view"], c["outcome"]) for c in r["candidates"]] == [
            ("focused:1", "rolled_back"), ("focused:1", "rolled_back"), ("wide", "fixed")]
        sent = [(q.get("seed"), q.get("temperature")) for q in scripted_llm.requests]
        assert sent == [(40, 0.0), (41, 0.8), (40, 0.0)]
        focused, again, wide = (json.dumps(q["messages"]) for q in scripted_llm.requests)
        assert focused == again and focused != wide
        assert "def add(a, b)" in focused and len(focused) < len(wide)
        # the focused view: the function under test alone; the wide one adds the test and the outline
        assert "def test_add():\\n    assert" in wide and "def test_add():\\n    assert" not in focused
        assert "def mul(a, b):  [5-6]" in wide and "def mul(a, b)" not in focused
        assert "The bug is most likely in this definition, `add` in `src/calc.py`" in focused
    finally:
        assert d.stop() == 0


def test_a_prompt_is_budgeted_to_the_servers_context_before_it_is_sent(tmp_path, calc_repo, scripted_llm):
    # a failing test that calls much code: the default budget would fill more than an 8k window
    lines = [f"def helper_{i}(x):\n    y = x + {i}\n" + "    y = y * 1  # padding\n" * 12 + "    return y\n"
             for i in range(60)]
    (calc_repo / "src" / "helpers.py").write_text("\n\n".join(lines))
    calls = " + ".join(f"helpers.helper_{i}(0)" for i in range(60))
    (calc_repo / "tests" / "test_helpers.py").write_text(
        "import sys, pathlib\nsys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / 'src'))\n"
        f"import helpers\n\n\ndef test_sum():\n    assert {calls} == -1\n"
    )
    scripted_llm.behave(props_n_ctx=8192, context_limit=8192, chars_per_token=3)
    scripted_llm.push_plan(FIX_PLAN)
    d = start(tmp_path, calc_repo, scripted_llm.base_url,
              modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}})
    try:
        d.wait_reflections(1)
        assert scripted_llm.requests, "no request reached the server"
        cut = ("cycle.context_shrunk", "llm.context_too_long")
        refused = [x for x in d.records() if x.get("event") in cut]
        assert not refused  # never cut after a refusal: it fitted before it was sent
        first = scripted_llm.requests[0]
        prompt_tokens = sum(len(m["content"]) for m in first["messages"]) / 3
        assert prompt_tokens + first["max_tokens"] <= 8192
        assert "helper_" in json.dumps(first["messages"])  # still the code the failure leads to
    finally:
        assert d.stop() == 0


def test_a_kill_mid_verification_leaves_the_tree_untouched_and_the_mirror_goes_at_restart(
    tmp_path, calc_repo, scripted_llm, real_bwrap
):
    hang = whole("never returns", "def add(a, b):\n    import time\n    time.sleep(600)\n    return a + b\n")
    scripted_llm.push_plan(hang)
    d = start(tmp_path, calc_repo, scripted_llm.base_url,
              modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}})
    staged = tmp_path / "state" / "mirror" / "tree" / "src" / "calc.py"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (staged.exists() and "sleep(600)" in staged.read_text()):
        time.sleep(0.05)
    assert staged.exists() and "sleep(600)" in staged.read_text(), "the candidate never reached the mirror"
    assert d.proc is not None
    os.kill(d.proc.pid, signal.SIGKILL)
    d.proc.wait(timeout=30)
    assert (calc_repo / "src" / "calc.py").read_text() == CALC_BUGGY
    # the next start removes the mirror before anything else runs
    scripted_llm.set_default({"status": 503})
    again = Autod(d.config, log_file=d.log_file).start()
    try:
        again.wait_for(lambda recs: any(x.get("event") == "isolation.mirror_removed" for x in recs),
                       timeout=60, what="the mirror removed")
        assert (calc_repo / "src" / "calc.py").read_text() == CALC_BUGGY
    finally:
        again.stop()


def test_a_server_that_takes_n_gets_the_sampled_candidates_in_one_request(
    tmp_path, calc_repo, scripted_llm, real_bwrap
):
    scripted_llm.behave(honour_n=True)
    for plan in (WRONG, BROKEN, WHOLE_FIX):
        scripted_llm.push_plan(plan)
    d = start(tmp_path, calc_repo, scripted_llm.base_url, candidates={"n": 3, "seed": 7, "focused": 0},
              modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}})
    try:
        (r,) = d.wait_reflections(1)
        assert r["status"] == "fixed", r
        assert [(q.get("seed"), q.get("n", 1)) for q in scripted_llm.requests] == [(7, 1), (8, 2)]
        assert [c["outcome"] for c in r["candidates"]] == ["rolled_back", "refused", "fixed"]
    finally:
        assert d.stop() == 0


def constant_repo(repo: Path) -> None:
    """mul() multiplies by a workspace constant whose value is wrong: the fix belongs in scale.py."""
    from daemon import git

    (repo / "src" / "calc.py").write_text(
        "from scale import FACTOR\n\n\ndef add(a, b):\n    return a + b\n\n\n"
        "def mul(a, b):\n    return a * b * FACTOR\n"
    )
    (repo / "src" / "scale.py").write_text('"""Scale factors."""\n\nFACTOR = 2\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a wrong factor")


INLINED = {**FIX_PLAN, "summary": "mul must not double", "edits": [
    {"path": "src/calc.py", "symbol": "mul", "replace": "def mul(a, b):\n    return a * b * 1\n"}]}
AT_THE_ROOT = {**FIX_PLAN, "summary": "FACTOR is wrong", "edits": [
    {"path": "src/scale.py", "symbol": "FACTOR", "replace": "FACTOR = 1\n"}]}
NO_IDEA = {**FIX_PLAN, "summary": "no better idea", "edits": []}


@pytest.mark.parametrize("second", ["root", "nothing"])
def test_a_fix_that_writes_a_literal_for_a_constant_earns_one_more_attempt_and_is_never_lost(
    tmp_path, calc_repo, scripted_llm, real_bwrap, second
):
    constant_repo(calc_repo)
    scripted_llm.push_plan(INLINED)
    scripted_llm.push_plan(AT_THE_ROOT if second == "root" else NO_IDEA)
    d = start(tmp_path, calc_repo, scripted_llm.base_url, candidates={"n": 1},
              modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}})
    try:
        (r,) = d.wait_reflections(1)
        assert r["attempts"] == 2  # one more than configured: a fix was in hand, but of the symptom
        first, where = r["candidates"][0], "where it is defined (src/scale.py · FACTOR)"
        assert first["outcome"] == "fixed" and where in first["suspect"]
        # the second request told the model why
        assert where in json.dumps(scripted_llm.requests[1]["messages"], ensure_ascii=False)
        calc = (calc_repo / "src" / "calc.py").read_text()
        scale = (calc_repo / "src" / "scale.py").read_text()
        if second == "root":
            assert r["status"] == "fixed", r
            assert "FACTOR = 1" in scale and "a * b * FACTOR" in calc
            return
        # nothing better: the fix in hand waits for a person, the tree untouched, and approving it works
        assert r["status"] == "pending_approval", r
        assert "may patch the symptom" in r["reason"] and where in r["reason"]
        assert "FACTOR = 2" in scale and "a * b * FACTOR" in calc
        out = run_cli("approve", r["proposal_id"], "-c", str(d.config))
        assert out.returncode == 0, out.stdout + out.stderr
        assert "a * b * 1" in (calc_repo / "src" / "calc.py").read_text()
    finally:
        assert d.stop() == 0


def test_a_wrong_constant_is_fixed_from_the_suspect_prompt_that_shows_the_value_it_reads(
    tmp_path, calc_repo, scripted_llm, real_bwrap
):
    """The bug is a value in another module that the suspect reads: its prompt shows the value beside
    the definition, and the model's headerless block, the value and the function copied back together,
    is read as one edit each (the unchanged function is left as it was): fixed by the first draw."""
    constant_repo(calc_repo)
    scripted_llm.push_text("FACTOR doubles it.\n```python\nFACTOR = 1\n\n\ndef mul(a, b):\n"
                           "    return a * b * FACTOR\n```\n")
    d = start(tmp_path, calc_repo, scripted_llm.base_url, llm={"reply_form": "code"},
              candidates={"n": 1, "focused": 1},
              modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}})
    try:
        (r,) = d.wait_reflections(1)
        assert r["status"] == "fixed", r
        assert [(c["view"], c["outcome"]) for c in r["candidates"]] == [("focused:1", "fixed")]
        prompt = scripted_llm.requests[0]["messages"][1]["content"]
        assert "It reads these values:\n\n```python\n# FACTOR in src/scale.py\nFACTOR = 2\n```" in prompt
        assert "The bug is most likely in this definition, `mul` in `src/calc.py`" in prompt
        assert (calc_repo / "src" / "scale.py").read_text() == '"""Scale factors."""\n\nFACTOR = 1\n'
        assert (calc_repo / "src" / "calc.py").read_text().count("def mul") == 1
    finally:
        assert d.stop() == 0


def test_the_code_reply_form_fixes_through_autod_run_with_no_response_format_sent(
    tmp_path, calc_repo, scripted_llm, real_bwrap
):
    """llm.reply_form: code: the model answers with a header and a fenced block, as a small model writes
    code best; a block autod cannot place is answered with a repair round in the same form, and a
    block naming a test or a path outside the workspace is refused by the same act rules as JSON."""
    scripted_llm.push_text("I changed it.\n```python\nprint('no definition here')\n```\n")
    scripted_llm.push_text(  # no grammar holds the path to the shown files: the act rules still do
        "The test expects too much.\n### tests/test_calc.py · test_add\n"  # shown to read: a quote
        "```python\ndef test_add():\n    assert True\n```\n"
        "### tests/conftest.py (new file)\n"  # never shown: an edit, and a judge's
        "```python\ndef pytest_collection_modifyitems(items):\n    items.clear()\n```\n"
    )
    scripted_llm.push_text("A helper.\n### ../outside.py (new file)\n```python\nX = 1\n```\n")
    scripted_llm.push_text(
        "add subtracts instead of adding.\n\n### src/calc.py · add (lines 1-2)\n"
        "```python\ndef add(a, b):\n    return a + b\n```\n"
    )
    d = start(tmp_path, calc_repo, scripted_llm.base_url, llm={"reply_form": "code"},
              candidates={"n": 3, "focused": 0},
              modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}})
    try:
        (r,) = d.wait_reflections(1)
        assert r["status"] == "fixed", r
        assert (calc_repo / "src" / "calc.py").read_text() == CALC_BUGGY.replace("a - b", "a + b")
        assert all("response_format" not in q for q in scripted_llm.requests)
        system = scripted_llm.requests[0]["messages"][0]["content"]
        assert "```python" in system and "JSON" not in system
        assert [c["outcome"] for c in r["candidates"]] == ["refused", "refused", "fixed"]
        assert "tests/conftest.py" in r["candidates"][0]["reason"]
        assert "'..' is not allowed" in r["candidates"][1]["reason"]
        assert not (tmp_path / "outside.py").exists() and not (calc_repo.parent / "outside.py").exists()
        assert "assert add(2, 3) == 5" in (calc_repo / "tests" / "test_calc.py").read_text()
        assert not (calc_repo / "tests" / "conftest.py").exists()
        stops = {tuple(q.get("stop", ())) for q in scripted_llm.requests}
        assert stops == {("## Failure output", "## Source (exact file text", "## What autod remembers",
                          "## Earlier attempts that did not work")}
        repair = scripted_llm.requests[1]["messages"][-1]["content"]
        assert repair.startswith("autod could not use your reply: a code block with no header")
    finally:
        assert d.stop() == 0


def value_group_run(tmp_path: Path, repo: Path, scripted_llm, echo: str, fix: str) -> dict:
    """`autod run` on `repo`, one suspect and its value group: the suspect's draw gives `echo` back
    unchanged, the value group's draw answers `fix`; the cycle's reflection (the daemon stopped)."""
    scripted_llm.push_text(f"It looks right.\n```python\n{echo}\n```\n")
    scripted_llm.push_text(f"```python\n{fix}\n```\n")
    d = start(tmp_path, repo, scripted_llm.base_url, llm={"reply_form": "code"},
              candidates={"n": 1, "focused": 1}, localize={"focus_definitions": 1},
              modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}})
    try:
        (r,) = d.wait_reflections(1)
    finally:
        assert d.stop() == 0
    assert r["status"] == "fixed", r
    assert [(c["view"], c["outcome"]) for c in r["candidates"]] == [
        ("focused:1", "no_change"), ("value:1", "fixed")]
    return r


def test_a_wrong_constant_the_suspect_prompt_missed_is_fixed_by_the_prompt_of_its_value_alone(
    tmp_path, calc_repo, scripted_llm, real_bwrap
):
    """The model gives the suspect back unchanged (the value beside it did not catch its eye); the
    next draw shows the value alone, "the bug is most likely in this value", and its one-line reply
    is the fix, verified on the mirror and written: the tree never held the unchanged draw."""
    constant_repo(calc_repo)
    value_group_run(tmp_path, calc_repo, scripted_llm, "def mul(a, b):\n    return a * b * FACTOR",
                    "FACTOR = 1")
    prompt = scripted_llm.requests[1]["messages"][1]["content"]
    assert ("The bug is most likely in this value, `FACTOR` in `src/scale.py`, which `mul` reads:"
            "\n\n```python\nFACTOR = 2\n```") in prompt
    assert "def mul" not in prompt
    assert (calc_repo / "src" / "scale.py").read_text() == '"""Scale factors."""\n\nFACTOR = 1\n'
    assert "a * b * FACTOR" in (calc_repo / "src" / "calc.py").read_text()


def test_a_wrong_constant_inside_a_value_built_from_it_is_asked_about_and_fixed(
    tmp_path, calc_repo, scripted_llm, real_bwrap
):
    """mul() reads FACTORS, a tuple made of two other constants; the wrong one holds the literal. The
    value prompt shows what FACTORS is made of (autod.localize.focus.values_read), and its one-line
    reply fixes the constant itself."""
    from daemon import git

    (calc_repo / "src" / "calc.py").write_text(
        "from scale import FACTORS\n\n\ndef add(a, b):\n    return a + b\n\n\n"
        "def mul(a, b):\n    return a * b * FACTORS[0]\n"
    )
    (calc_repo / "src" / "scale.py").write_text('"""Scale factors."""\n\nBASE = 2\nUNIT = 1\n'
                                                 "FACTORS = (BASE, UNIT)\n")
    git(calc_repo, "add", "-A")
    git(calc_repo, "commit", "-q", "-m", "a wrong base")
    value_group_run(tmp_path, calc_repo, scripted_llm, "def mul(a, b):\n    return a * b * FACTORS[0]",
                    "BASE = 1")
    prompt = scripted_llm.requests[1]["messages"][1]["content"]
    assert "BASE = 2" in prompt and "UNIT = 1" in prompt
    assert (calc_repo / "src" / "scale.py").read_text().startswith('"""Scale factors."""\n\nBASE = 1\n')


def test_a_fix_that_stops_calling_the_buggy_helper_is_held_for_a_person_through_autod_run(
    tmp_path, calc_repo, scripted_llm, real_bwrap
):
    """mul() calls a workspace helper that is wrong; a plan that rewrites mul to do the helper's work
    itself passes the checks but leaves the helper broken: a suspect fix, held for `autod approve`."""
    from daemon import git

    (calc_repo / "src" / "calc.py").write_text(
        "from scale import scaled\n\n\ndef add(a, b):\n    return a + b\n\n\n"
        "def mul(a, b):\n    return scaled(a * b)\n"
    )
    (calc_repo / "src" / "scale.py").write_text('"""Scaling."""\n\n\ndef scaled(x):\n    return x * 2\n')
    git(calc_repo, "add", "-A")
    git(calc_repo, "commit", "-q", "-m", "a wrong helper")
    scripted_llm.push_plan({**FIX_PLAN, "summary": "mul multiplies itself", "edits": [
        {"path": "src/calc.py", "symbol": "mul", "replace": "def mul(a, b):\n    return a * b\n"}]})
    scripted_llm.push_plan(NO_IDEA)
    d = start(tmp_path, calc_repo, scripted_llm.base_url, candidates={"n": 1},
              modes={"auto-debug": {"enabled": True, "max_attempts_per_cycle": 1}})
    try:
        (r,) = d.wait_reflections(1)
        first = r["candidates"][0]
        assert first["outcome"] == "fixed" and "no longer calls scaled (src/scale.py)" in first["suspect"]
        assert r["status"] == "pending_approval", r
        assert "return scaled(a * b)" in (calc_repo / "src" / "calc.py").read_text()  # the tree untouched
    finally:
        assert d.stop() == 0
