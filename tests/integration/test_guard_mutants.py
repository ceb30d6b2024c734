"""The safety guards hold under mutation: every small change to a guard (tests/mutants.py) fails a
test, or is a listed equivalent with its reason. docs/MUTATION.md says what runs and how long."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.early]  # a minute or more: handed out first

ROOT = Path(__file__).resolve().parents[2]
# stop starting mutants after this long: ~45 s alone on two idle cores, 130-190 s beside the whole suite
DEADLINE_S = 600


@pytest.mark.timeout(DEADLINE_S + 300)
def test_every_mutant_of_the_safety_guards_is_killed_or_a_listed_equivalent(tmp_path: Path) -> None:
    out = tmp_path / "mutants.json"
    argv = [sys.executable, str(ROOT / "tests" / "mutants.py"), "--out", str(out)]
    done = subprocess.run(
        [*argv, "--deadline-s", str(DEADLINE_S)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S + 240,
        check=False,
    )
    assert out.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert "error" not in result, result["error"]
    assert result["baseline_failed"] == [], "tests that fail without any mutant: fix them first"
    modules = result["modules"]
    left = [f"{s['status']}: {s['key']} (line {s['line']})" + (f": {s['why']}" if "why" in s else "")
            for m in modules.values() for s in m["survivors"]]
    assert left == [], "mutants no test kills (write a test of the behaviour, or list a true equivalent "
    "in tests/mutants.py EQUIVALENT with its reason):\n" + "\n".join(left)
    assert result["stale_equivalents"] == [], "listed as equivalent, no longer a mutant: drop them"
    assert all(m.get("not_run", 0) == 0 for m in modules.values()), f"past the {DEADLINE_S} s deadline"
    assert sum(m["killed"] + m["timeout"] for m in modules.values()) > 500  # the pass ran for real
