"""`autod show`: each plan and candidate names the prompt it came from, since each numbers its seeds."""

from __future__ import annotations

from autod.transcripts.show import render


def test_plans_and_candidates_name_their_prompt_beside_the_seed_each_prompt_numbers_on_its_own():
    doc = {"cycle": {"cycle_id": "c1"}, "transcript": [
        {"kind": "plan", "choice": 0, "seed": 1, "view": "focused:1", "plan": {"summary": "a"}},
        {"kind": "candidate", "n": 1, "attempt": 1, "seed": 1, "temperature": 0.0, "view": "focused:1",
         "outcome": "unchanged"},
        {"kind": "plan", "choice": 0, "seed": 1, "view": "wide", "plan": {"summary": "b"}},
        {"kind": "candidate", "n": 2, "attempt": 1, "seed": 1, "temperature": 0.0, "view": "wide",
         "outcome": "fixed"},
        {"kind": "candidate", "n": 3, "attempt": 1, "seed": 5, "temperature": 0.8, "outcome": "fixed"},
    ]}
    lines: list[str] = []
    render(doc, lines.append)
    text = "\n".join(lines)
    assert "plan (focused:1 prompt, seed 1, choice 0): a (no edits)" in text
    assert "candidate 1 (attempt 1, focused:1 prompt, seed 1, temperature 0.0): unchanged" in text
    assert "plan (wide prompt, seed 1, choice 0): b (no edits)" in text
    assert "candidate 2 (attempt 1, wide prompt, seed 1, temperature 0.0): fixed" in text
    assert "candidate 3 (attempt 1, seed 5, temperature 0.8): fixed" in text  # a record from before views


def test_show_names_what_memory_contributed_the_recalled_items_and_the_replayed_fix():
    record = {"memory_used": ["ep1", "lesson7"], "candidates": [
        {"n": 1, "attempt": 1, "view": "replay", "replay_of": "ep1", "outcome": "fixed", "seed": None}]}
    doc = {"cycle": {"id": "c2", "record": record}, "transcript": [
        {"kind": "candidate", "n": 1, "attempt": 1, "seed": None, "temperature": 0.0, "view": "replay",
         "replay_of": "ep1", "outcome": "fixed"}]}
    lines: list[str] = []
    render(doc, lines.append)
    text = "\n".join(lines)
    assert "  memory:  recalled ep1, lesson7" in text
    assert "  memory:  replayed the fix of ep1 as candidate 1: fixed (no model call)" in text
    assert "candidate 1 (attempt 1, replayed from memory ep1, seed None, temperature 0.0): fixed" in text
