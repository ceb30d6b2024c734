"""The shipped example config, for tests that start from it.

When autod runs this repository's own checks, its sandbox hides `config/autod.yaml` (autod's own
config may hold a key, so no check reads it); the committed copy is read from git instead, and a test
that cannot have it at all is skipped saying why, never failed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "config" / "autod.yaml"


def example_config() -> str:
    """config/autod.yaml as in the working tree, else as committed."""
    try:
        text = SHIPPED.read_text(encoding="utf-8")
    except OSError:
        text = ""
    if text.strip():
        return text
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "show", "HEAD:config/autod.yaml"],
            capture_output=True, text=True, timeout=30, check=False,
        )
    except (OSError, subprocess.SubprocessError):
        out = None
    if out is not None and out.returncode == 0 and out.stdout.strip():
        return out.stdout
    why = "config/autod.yaml is hidden here (autod's sandbox) and git cannot show it"
    pytest.skip(why, allow_module_level=True)
    raise AssertionError("unreachable")
