"""What a candidate's check created: removed from the mirror, never from the operator's tree (a file
that appeared during an in-place run may be one the operator just saved: a probe's three saved files
were deleted by an earlier version), and nothing at all for a run that is not a candidate's."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from autod.checks import planted
from autod.checks.changes import snapshot
from autod.checks.pertest import CANDIDATE_FILES


def _tree(root: Path, rng: random.Random, n: int) -> list[str]:
    made = []
    for i in range(n):
        where = rng.choice(["src", "tests", "docs", "tests/sub"])
        rel = f"{where}/f{i}{rng.choice(['.py', '.txt', '.toml', ''])}"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x\n")
        made.append(rel)
    return made


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("in_place", [True, False])
def test_a_candidates_creations_are_removed_on_the_mirror_and_only_named_in_place(tmp_path, seed, in_place):
    rng = random.Random(seed)
    old = _tree(tmp_path, rng, 10)
    before = snapshot(tmp_path)
    new = [rel for rel in _tree(tmp_path, random.Random(seed + 100), 8) if rel not in old]
    after = snapshot(tmp_path)
    token = CANDIDATE_FILES.set(("src/calc.py",))
    try:
        assert planted.created(before, after) == frozenset(new)
        with capture_logs() as logs:
            removed = planted.after_run(tmp_path, before, after, "tests", in_place=in_place)
    finally:
        CANDIDATE_FILES.reset(token)
    assert all((tmp_path / rel).exists() for rel in old)
    if in_place:
        assert removed == [] and all((tmp_path / rel).exists() for rel in new)
        assert [e["event"] for e in logs] == (["check.created_files_left"] if new else [])
    else:
        assert sorted(removed) == sorted(new) and not any((tmp_path / rel).exists() for rel in new)


def test_a_run_that_is_not_a_candidates_keeps_what_it_made(tmp_path):
    before = snapshot(tmp_path)
    (tmp_path / "report.py").write_text("x\n")
    after = snapshot(tmp_path)
    assert planted.created(before, after) == frozenset()
    assert planted.after_run(tmp_path, before, after, "tests", in_place=False) == []
    assert (tmp_path / "report.py").exists()
