"""autod's import guard, in a real Python: installed code first, except what pip built from the workspace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest


def python(ws: Path, lib: Path, site: Path, code: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(PYTHONPATH=os.pathsep.join([str(lib), str(site)]), _AUTOD_JUDGE_WS=str(ws))
    out = subprocess.run([sys.executable, "-c", code], cwd=ws, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.fixture()
def layout(tmp_path: Path) -> tuple[Path, Path, Path]:
    lib, ws, site = tmp_path / "lib", tmp_path / "ws", tmp_path / "venv" / "site-packages"
    for d in (lib, ws, site):
        d.mkdir(parents=True)
    guard = resources.files("autod.checks").joinpath("judge_guard.py").read_bytes()
    (lib / "sitecustomize.py").write_bytes(guard)
    (site / "calcpkg.py").write_text("WHO = 'installed'\n")
    (ws / "calcpkg.py").write_text("WHO = 'checkout'\n")
    (ws / "textwrap.py").write_text("raise SystemExit('the stand-in ran')\n")
    return ws, lib, site


def installed_from(site: Path, url: str) -> None:
    info = site / "calcpkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: calcpkg\nVersion: 1.0\n")
    (info / "top_level.txt").write_text("calcpkg\n")
    (info / "direct_url.json").write_text(json.dumps({"url": url, "dir_info": {}}))


def test_installed_code_comes_before_the_workspace(layout):
    ws, lib, site = layout
    code = f"import textwrap, calcpkg; print(calcpkg.WHO, textwrap.__file__.startswith({str(ws)!r}))"
    assert python(ws, lib, site, code) == "installed False"


def test_a_distribution_built_from_the_workspace_tests_the_checkout(layout):
    ws, lib, site = layout
    installed_from(site, ws.as_uri())
    code = f"import textwrap, calcpkg; print(calcpkg.WHO, textwrap.__file__.startswith({str(ws)!r}))"
    assert python(ws, lib, site, code) == "checkout False"  # never a standard-library name


def test_a_distribution_built_elsewhere_is_not_the_workspaces(layout, tmp_path):
    ws, lib, site = layout
    installed_from(site, (tmp_path / "elsewhere").as_uri())
    assert python(ws, lib, site, "import calcpkg; print(calcpkg.WHO)") == "installed"
