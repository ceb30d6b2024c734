"""One part of the guard mutation pass (tests/mutants.py PARTS) as CI runs it: `python tests/mutants.py
--only ...` in a subprocess, then every mutant killed or a listed equivalent, nothing past the deadline.
Each part is its own test file (tests/integration/test_guard_mutants*.py), so xdist gives them to
different workers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# stop starting mutants after this long: a part takes under a minute alone on two idle cores
DEADLINE_S = 600


def run_part(tmp_path: Path, part: str, least_killed: int) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from mutants import PARTS

    out = tmp_path / "mutants.json"
    argv = [sys.executable, str(ROOT / "tests" / "mutants.py"), "--out", str(out), "--only", *PARTS[part]]
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
    assert sorted(modules) == sorted(PARTS[part]), "every module of the part ran"
    left = [f"{s['status']}: {s['key']} (line {s['line']})" + (f": {s['why']}" if "why" in s else "")
            for m in modules.values() for s in m["survivors"]]
    assert left == [], "mutants no test kills (write a test of the behaviour, or list a true equivalent "
    "in tests/mutants.py EQUIVALENT with its reason):\n" + "\n".join(left)
    assert result["stale_equivalents"] == [], "listed as equivalent, no longer a mutant: drop them"
    assert all(m.get("not_run", 0) == 0 for m in modules.values()), f"past the {DEADLINE_S} s deadline"
    assert sum(m["killed"] + m["timeout"] for m in modules.values()) > least_killed  # it ran for real
