"""The safety guards hold under mutation: every small change to a guard (tests/mutants.py) fails a
test, or is a listed equivalent with its reason. docs/MUTATION.md says what runs and how long. This
file runs the `safety` part (the file rules, secrets, the act rules, limits); the others run beside it
on other workers (test_guard_mutants_checks.py, test_guard_mutants_world.py,
test_guard_mutants_selfpassing.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from guardpass import DEADLINE_S, run_part

pytestmark = [pytest.mark.slow, pytest.mark.early]  # a minute or more: handed out first


def test_every_part_of_the_pass_covers_the_guards_once() -> None:
    from mutants import GUARDS, PARTS

    listed = [m for part in PARTS.values() for m in part]
    assert sorted(listed) == sorted(GUARDS) and len(set(listed)) == len(listed)


@pytest.mark.timeout(DEADLINE_S + 300)
def test_every_mutant_of_the_safety_guards_is_killed_or_a_listed_equivalent(tmp_path: Path) -> None:
    run_part(tmp_path, "safety", 500)
