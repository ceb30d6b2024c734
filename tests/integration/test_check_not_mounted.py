"""A check whose own script the sandbox cannot show (its path matches a credential glob) is a start
error naming the path and the rule, never a failing check a cycle would try to fix. Through `autod run`."""

from __future__ import annotations

import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon import Autod, base_config, make_calc_repo, write_config

pytestmark = pytest.mark.slow


@pytest.fixture
def host_root() -> Iterator[Path]:
    """A directory outside /tmp (a check gets a private /tmp, which would hide it for another reason)."""
    root = Path(__file__).resolve().parents[2] / f".unmounted-{uuid.uuid4().hex[:12]}"
    root.mkdir()
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_check_script_behind_a_credential_glob_is_a_start_error_naming_path_and_rule(
    host_root: Path,
) -> None:
    home = host_root / "home"
    script = home / "secret-tools" / "check.py"  # `*secret*` is a credential glob: never bound back
    script.parent.mkdir(parents=True)
    script.write_text("print('checked')\n")
    repo = make_calc_repo(host_root / "repo")
    cfg = base_config(repo)
    cfg["checks"] = {"sandbox": "bwrap",
                     "lint": {"run": f"{sys.executable} {script}", "timeout_s": 60, "when": ["start"]}}
    cfg["state_dir"] = str(host_root / "state")
    config = write_config(host_root / "autod.yaml", cfg)
    d = Autod(config, log_file=host_root / "state" / "logs" / "autod.jsonl", env={"HOME": str(home)},
              args=("--once",))
    try:
        d.start()
        assert d.proc is not None
        code = d.proc.wait(180)
    finally:
        d.kill()
    assert code == 2, d.stderr()[-2000:]  # no verdict: a check cannot start (a configuration error)
    (line,) = [r for r in d.records() if r.get("event") == "check.cannot_start"]
    assert str(script) in line["error"] and "credential glob '*secret*'" in line["error"]
    assert not d.reflections()  # no cycle planned a fix for "can't open file"
