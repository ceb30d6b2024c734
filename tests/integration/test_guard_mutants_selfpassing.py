"""The self-passing tripwire under mutation (tests/mutants.py PARTS["selfpassing"]), beside the other
parts."""

from __future__ import annotations

from pathlib import Path

import pytest
from guardpass import DEADLINE_S, run_part

pytestmark = [pytest.mark.slow, pytest.mark.early]


@pytest.mark.timeout(DEADLINE_S + 300)
def test_every_mutant_of_the_self_passing_tripwire_is_killed_or_a_listed_equivalent(tmp_path: Path) -> None:
    run_part(tmp_path, "selfpassing", 100)
