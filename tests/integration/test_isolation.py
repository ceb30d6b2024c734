"""Checks on the mirror, with the real bwrap: the check sees the candidate at the workspace's own path,
and the operator's working tree never shows it nor anything the check wrote."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from autod.config.settings import Settings
from autod.isolation import Isolation, recover

pytestmark = pytest.mark.slow

CALC = "def add(a, b):\n    return a - b\n"
# imports the code by the workspace's absolute path, as an editable install does
TEST = (
    "import sys\n"
    "sys.path.insert(0, {src!r})\n"
    "from calc import add\n\n"
    "def test_add():\n"
    "    open({artifact!r}, 'w').write('written by the check')\n"
    "    assert add(2, 3) == 5\n"
)


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "tests").mkdir()
    (ws / "src" / "calc.py").write_text(CALC)
    (ws / "tests" / "test_calc.py").write_text(
        TEST.format(src=str(ws / "src"), artifact=str(ws / "artifact.txt"))
    )
    return ws


def settings_for(ws: Path) -> Settings:
    run = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
    return Settings(workspace=ws, checks={"tests": {"run": run, "timeout_s": 60}})


def snapshot(ws: Path) -> dict[str, bytes]:
    return {
        p.relative_to(ws).as_posix(): p.read_bytes()
        for p in sorted(ws.rglob("*"))
        if p.is_file() and ".autod" not in p.parts and "__pycache__" not in p.parts
    }


def test_a_candidate_is_verified_at_the_workspace_path_and_never_shows_in_the_tree(tmp_path, real_bwrap):
    ws = workspace(tmp_path)
    before = snapshot(ws)
    iso = Isolation(settings_for(ws))

    async def go():
        assert await iso.unavailable() is None
        await iso.stage({"src/calc.py": b"def add(a, b):\n    return a + b\n"})
        good = await iso.run_check("tests")
        await iso.stage({"src/calc.py": b"def add(a, b):\n    return a * b\n"})
        bad = await iso.run_check("tests")
        return good, bad

    good, bad = asyncio.run(go())
    assert good.ok, good.output
    assert not bad.ok and "assert 6 == 5" in bad.output
    assert good.sandbox == "bwrap"
    assert snapshot(ws) == before  # no candidate, no artifact, nothing written in the working tree


def test_the_mirror_left_by_a_killed_daemon_is_removed_at_the_next_start(tmp_path, real_bwrap):
    ws = workspace(tmp_path)
    s = settings_for(ws)
    iso = Isolation(s)
    asyncio.run(iso.stage({"src/calc.py": b"broken(\n"}))
    assert (iso.mirror.root / "src" / "calc.py").read_bytes() == b"broken(\n"
    assert recover(s) is True
    assert not iso.mirror.root.exists()
    assert (ws / "src" / "calc.py").read_text() == CALC


def test_isolation_is_unavailable_when_a_check_runs_unsandboxed(tmp_path):
    ws = workspace(tmp_path)
    s = Settings(workspace=ws, checks={"tests": {"run": "true", "sandbox": "off"}})
    why = asyncio.run(Isolation(s).unavailable())
    assert why is not None and "sandbox: off" in why


def test_a_candidate_that_loops_forever_is_stopped_at_its_own_deadline_not_the_checks(tmp_path, real_bwrap):
    """A shorter deadline for a candidate's run on the mirror (candidates.check_timeout_*): the check's
    own 60 s are not waited for, and the verdict is a timeout, never a pass."""
    ws = workspace(tmp_path)
    iso = Isolation(settings_for(ws))

    async def go():
        await iso.stage({"src/calc.py": b"def add(a, b):\n    while True:\n        pass\n"})
        return await iso.run_check("tests", timeout_s=3)

    looped = asyncio.run(go())
    assert looped.timed_out and not looped.ok
    assert "timed out after 3s" in looped.output


def test_a_config_inside_the_workspace_is_not_a_change_the_check_made_on_the_mirror(tmp_path, real_bwrap):
    """The mirror never holds autod's own files; the sandbox still hides them at the workspace's path, so
    bwrap makes an empty mount point (and its directory) in the mirror. That is not the check writing the
    source: a fix verified there is not rolled back for it, and the mirror does not keep it."""
    import subprocess

    from autod.config.settings import load_config

    ws = workspace(tmp_path)
    (ws / "config").mkdir()
    run = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
    config = ws / "config" / "autod.yaml"  # as in autod's own checkout
    config.write_text(f"workspace: {ws}\nchecks:\n  tests: {{run: {run!r}, timeout_s: 60}}\n")
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    subprocess.run(["git", "-C", str(ws), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(ws), "-c", "user.name=t", "-c", "user.email=t@example.com",
                    "commit", "-qm", "init"], check=True)
    iso = Isolation(load_config(config))

    async def go():
        await iso.stage({"src/calc.py": b"def add(a, b):\n    return a + b\n"})
        return await iso.run_check("tests")

    good = asyncio.run(go())
    assert good.ok, good.output
    assert good.changed == [], good.changed  # it was ["config/autod.yaml"]: every such fix rolled back
    assert not (iso.mirror.root / "config").exists()
    assert config.read_text().startswith("workspace:")
